"""Segments: a reference output, the outputs placed in its coordinates, and the sites they need.

An output that is a cat along an outer dim (the gradient of a qkv tensor, assembled from q, k
and v) takes one segment per piece, the piece's shape its reference and the piece's offset its
store's: each thread then runs only its own piece's code, where one segment would run every
piece's at every lane and select. Otherwise the reference of a segment is the largest output not
yet placed. Outputs of its shape join it unshifted; an output of another shape joins it when some input it reads through pointwise ops,
slices, pads and cats is also read by the reference: then both read that input at the same index
and one load serves both (``pad(x)`` beside ``relu(x)``: the relu's output is stored at offset
-4 of the pad's coordinates). The others start segments of their own.
"""

from __future__ import annotations

import math

from .. import ir
from .projection import (
    Frontier,
    IndexMap,
    Projection,
    Segment,
    Site,
    Store,
    _resize_dim,
    _Walk,
    bounded,
    full_frontier,
    is_empty,
)


def _input_offsets(kernel: ir.Kernel, output: str, budget: int = 4096):
    """Yields ``(input name, delta)`` with input coordinate = output coordinate + delta along a
    chain of pointwise, slice, pad and cat nodes (broadcasts end a chain)."""
    stack, seen = [(output, (0,) * kernel.node(output).type.rank)], set()
    while stack and budget > 0:
        budget -= 1
        name, delta = stack.pop()
        if (name, delta) in seen:
            continue
        seen.add((name, delta))
        node = kernel.node(name)
        if isinstance(node, ir.Input):
            yield name, delta
        elif isinstance(node, (ir.Elementwise, ir.Cast)):
            stack.extend((o, delta) for o in node.operand_names())
        elif isinstance(node, ir.Slice):
            stack.append((node.operand, tuple(x + s for x, s in zip(delta, node.start))))
        elif isinstance(node, ir.Pad):
            stack.append((node.operand, tuple(x - lo for x, (lo, _) in zip(delta, node.widths))))
        elif isinstance(node, ir.Cat):
            offset = 0
            for piece in node.operands:
                shifted = tuple(x - offset if d == node.dim else x for d, x in enumerate(delta))
                stack.append((piece, shifted))
                offset += kernel.node(piece).type.shape[node.dim]


def _placement(kernel: ir.Kernel, output: str, ref_shape: tuple[int, ...], sites: tuple[Site, ...]):
    """Offsets that place ``output`` inside the reference through an input both read, or None."""
    shape = kernel.node(output).type.shape
    if len(shape) != len(ref_shape):
        return None
    reached: dict[str, list[IndexMap]] = {}
    for site in sites:
        if all(ref == d for d, (ref, _) in enumerate(site.index_map)) and len(site.index_map) == len(shape):
            reached.setdefault(site.node, []).append(site.index_map)
    for name, delta in _input_offsets(kernel, output):
        for index_map in reached.get(name, ()):
            offsets = tuple(off - dx for (_, off), dx in zip(index_map, delta))
            if all(0 <= -p and size - p <= limit for p, size, limit in zip(offsets, shape, ref_shape)):
                return offsets
    return None


def _store_frontier(ref_shape: tuple[int, ...], shape: tuple[int, ...], offsets: tuple[int, ...]) -> Frontier:
    """The output's bounds, at reference coordinates -p and size - p, act like the edges of a slice."""
    frontier = full_frontier(ref_shape)
    for d, (p, size, limit) in enumerate(zip(offsets, shape, ref_shape)):
        if p or size != limit:
            frontier = _resize_dim(frontier, d, p, size - p)
    return frontier


def _segment(kernel: ir.Kernel, ref_shape: tuple[int, ...], placed: dict[str, tuple[int, ...]]) -> Segment:
    walk = _Walk(kernel, ref_shape)
    full_box = tuple((0, n) for n in ref_shape)
    for name, offsets in placed.items():
        shape = kernel.node(name).type.shape
        frontier = _store_frontier(ref_shape, shape, offsets)
        walk.reach(name, tuple(enumerate(offsets)), full_box, frontier, None)
    sites = walk.run()
    ids = {(s.node, s.index_map): s.id for s in sites}
    stores = []
    for index, name in enumerate(kernel.outputs):
        if name not in placed:
            continue
        offsets = placed[name]
        index_map = tuple(enumerate(offsets))
        box = bounded(full_box, index_map, kernel.node(name).type.shape)
        if is_empty(box):
            continue
        frontier = _store_frontier(ref_shape, kernel.node(name).type.shape, offsets)
        stores.append(Store(name, index, ids[(name, index_map)], offsets, box, frontier))
    return Segment(ref_shape, sites, tuple(stores))


MAX_PIECE_SEGMENTS = 8  # pieces of a cat output, at most, that take a segment each
MIN_PIECE_SLAB = 16  # elements right of the cat's dim, at least (a thread's lanes stay in one piece)


def _piece_offsets(kernel: ir.Kernel, output: str) -> list[tuple[tuple[int, ...], tuple[int, ...]]] | None:
    """``(reference shape, store offsets)`` of each non-empty piece of a cat output split into
    segments, or None where the output is not such a cat."""
    node = kernel.node(output)
    if not isinstance(node, ir.Cat) or node.dim == node.type.rank - 1:
        return None
    sizes = [kernel.node(p).type.shape[node.dim] for p in node.operands]
    if (sum(1 for n in sizes if n) < 2 or len(sizes) > MAX_PIECE_SEGMENTS or not node.type.numel
            or math.prod(node.type.shape[node.dim + 1:]) < MIN_PIECE_SLAB):
        return None
    pieces, offset = [], 0
    for n in sizes:
        if n:
            shape = node.type.shape[:node.dim] + (n,) + node.type.shape[node.dim + 1:]
            pieces.append((shape, tuple(offset if d == node.dim else 0 for d in range(node.type.rank))))
        offset += n
    return pieces


def project(kernel: ir.Kernel) -> Projection:
    """Groups the outputs into segments and projects each segment's reference onto every node."""
    remaining = list(dict.fromkeys(kernel.outputs))
    segments = []
    for name in list(remaining):
        pieces = _piece_offsets(kernel, name)
        if pieces is not None:
            segments += [_segment(kernel, shape, {name: offsets}) for shape, offsets in pieces]
            remaining.remove(name)
    while remaining:
        ref = max(remaining, key=lambda name: kernel.node(name).type.numel)
        ref_shape = kernel.node(ref).type.shape
        placed = {name: (0,) * len(ref_shape) for name in remaining if kernel.node(name).type.shape == ref_shape}
        segment = _segment(kernel, ref_shape, placed)
        shifted = {}
        for name in remaining:
            if name not in placed:
                offsets = _placement(kernel, name, ref_shape, segment.sites)
                if offsets is not None:
                    shifted[name] = offsets
        if shifted:
            placed.update(shifted)
            segment = _segment(kernel, ref_shape, placed)
        if math.prod(ref_shape):
            segments.append(segment)
        remaining = [name for name in remaining if name not in placed]
    return Projection(kernel, tuple(segments))


