"""Segments: a reference output, the outputs placed in its coordinates, and the sites they need.

An output that is a cat along an outer dim (the gradient of a qkv tensor, assembled from q, k
and v) takes one segment per piece, the piece's shape its reference and the piece's offset its
store's: each thread then runs only its own piece's code, where one segment would run every
piece's at every lane and select. Otherwise the reference of a segment is the largest output not
yet placed. Outputs of its shape join it unshifted; an output of another shape joins it when some
input it reads through pointwise ops, slices, pads and cats is also read by the reference: then both
read that input at the same index and one load serves both (``pad(x)`` beside ``relu(x)``: the relu's
output is stored at offset -4 of the pad's coordinates). The others start segments of their own.

Rows in pieces. Where the columns of a segment's rows fall into pieces that read no common input
columns (partial rotary: the rotated features, whose halves read each other's, and the features
passed through), each piece takes a segment of its own, its columns' offset the store's: a thread
then holds only its piece's registers, and no thread idles at the other piece's steps. On the H200,
phi-2's RoPE kernels went from 68 registers to 27, and its forward and backward at batch 2 from
38.2 to 33.1 µs (``benchmarks/results/2026-12-03-flat-rows/``). A launch holding pieces interleaves
their blocks (``schedule.Tuning.interleave``), so that the pieces of a row run at about the same time.
Where the last dim is narrower than a vector (GPT-J's rotation, whose features the kernel holds as
``[..., pairs, 2]``), the rows are cut along the dim before it instead: a piece is then whole pairs.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

from .. import ir
from .plan import row_breakpoints
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


def _row_reads(kernel: ir.Kernel, segment: Segment, lo: int, hi: int, dim: int) -> list[tuple]:
    """``(input, index map of the other dims, shift along the row, first column, end column)`` of each
    load of the reference's columns ``[lo, hi)`` along ``dim``, its columns those of the input."""
    reads = []
    for site in segment.sites:
        if not isinstance(kernel.node(site.node), ir.LOADS) or not site.index_map:
            continue
        along = [i for i, (ref, _) in enumerate(site.index_map) if ref == dim]
        if len(along) != 1:
            continue
        (i,) = along
        offset = site.index_map[i][1]
        a, b = max(lo, site.box[dim][0]), min(hi, site.box[dim][1])
        if a < b:
            reads.append((site.node, site.index_map[:i] + site.index_map[i + 1:], offset, a + offset, b + offset))
    return reads


def _row_pieces(kernel: ir.Kernel, segment: Segment, dim: int, itemsize: int) -> list[tuple[int, int]] | None:
    """Ranges along ``dim`` (the reference's last dim, or the one before a last dim narrower than a
    vector: GPT-J's pairs) that split the reference's rows into segments of their own, or None
    (``itemsize``: the widest of the outputs' items). The breakpoints of a row cut it into slabs; slabs
    that read overlapping columns of an input stay together (a RoPE's rotated halves read each other's
    x), and a cut falls only where no group of them spans it, on a 16-byte boundary, leaving pieces of at
    least ``MIN_ROW_PIECE_BYTES`` (else the rows stay whole), one of which rotates (``_rotates``):
    partial rotary's rotated features and the features it passes through (a plain cat of two tensors
    stays one segment)."""
    if not ROW_PIECES or len(segment.shape) < 2 or not segment.stores:
        return None
    row = segment.shape[dim]
    points = sorted(row_breakpoints(kernel, segment, dim) | {0, row})
    slabs = list(itertools.pairwise(points))
    reads = [_row_reads(kernel, segment, a, b, dim) for a, b in slabs]
    spans = []  # column spans of the groups of slabs that share input columns
    for i, (a, b) in enumerate(slabs):
        for j in range(i):
            if any(x[:2] == y[:2] and x[3] < y[4] and y[3] < x[4] for x in reads[i] for y in reads[j]):
                spans.append((slabs[j][0], b))
    inner = math.prod(segment.shape[dim + 1:]) * itemsize  # bytes of a column
    cuts = [p for p in points[1:-1] if p * inner % 16 == 0 and not any(a < p < b for a, b in spans)]
    pieces = list(zip([0, *cuts], [*cuts, row]))
    if len(pieces) < 2 or len(pieces) > MAX_PIECE_SEGMENTS or any(
            (b - a) * inner < MIN_ROW_PIECE_BYTES for a, b in pieces):
        return None
    return pieces if any(_rotates(kernel, segment, a, b, dim) for a, b in pieces) else None


def _rotates(kernel: ir.Kernel, segment: Segment, lo: int, hi: int, dim: int) -> bool:
    """Whether columns ``[lo, hi)`` along ``dim`` read an input two ways: at two index maps of the row's
    dims (``dim`` and those inside it: a RoPE's halves at two shifts, the gradient read at each of a
    pair's elements) or through two views (GPT-J's strided halves of x beside x)."""
    patterns = {}
    for site in segment.sites:
        node = kernel.node(site.node)
        if not isinstance(node, ir.LOADS) or max(lo, site.box[dim][0]) >= min(hi, site.box[dim][1]):
            continue
        source = node.operand if isinstance(node, ir.View) else node.name
        outer = tuple(e for e in site.index_map if e[0] is not None and e[0] < dim)
        inner = tuple(e for e in site.index_map if e[0] is None or e[0] >= dim)
        patterns.setdefault((source, outer), set()).add((site.node, inner))
    return any(len(p) > 1 for p in patterns.values())


def _split_rows(kernel: ir.Kernel, segment: Segment, placed: dict[str, tuple[int, ...]]) -> list[Segment]:
    """The segment, or one segment per piece of its rows (``_row_pieces``), each storing the columns
    of its outputs that lie in it. Rows are cut along the last dim, or, where that dim is narrower than
    a vector (GPT-J's pairs), along the one before it."""
    dim = len(segment.shape) - 1
    itemsize = max((kernel.node(s.output).type.dtype.itemsize for s in segment.stores), default=0)
    pieces = _row_pieces(kernel, segment, dim, itemsize)
    if pieces is None and PAIR_PIECES and len(segment.shape) > 2 and segment.shape[-1] * itemsize < 16:
        dim -= 1
        pieces = _row_pieces(kernel, segment, dim, itemsize)
    if pieces is None:
        return [segment]
    found = []
    for a, b in pieces:
        shape = segment.shape[:dim] + (b - a,) + segment.shape[dim + 1:]
        inside = {}
        for name, offsets in placed.items():
            size = kernel.node(name).type.shape[dim]
            if max(a, -offsets[dim]) < min(b, size - offsets[dim]):
                inside[name] = offsets[:dim] + (offsets[dim] + a,) + offsets[dim + 1:]
        if inside:
            found.append(replace(_segment(kernel, shape, inside), row_piece=True))
    return found


MAX_PIECE_SEGMENTS = 8  # pieces of a cat output, at most, that take a segment each
MIN_PIECE_SLAB = 16  # elements right of the cat's dim, at least (a thread's lanes stay in one piece)
ROW_PIECES = True  # rows cut into pieces that read no common input columns, a segment each (see _row_pieces)
MIN_ROW_PIECE_BYTES = 64  # ... each piece of a row at least this wide
PAIR_PIECES = True  # ... also along the dim before a last dim narrower than a vector (GPT-J's pairs)


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
            for shape, offsets in pieces:
                segments += _split_rows(kernel, _segment(kernel, shape, {name: offsets}), {name: offsets})
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
            segments += _split_rows(kernel, segment, placed)
        remaining = [name for name in remaining if name not in placed]
    return Projection(kernel, tuple(segments))


