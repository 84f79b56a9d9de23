"""Vectorization analysis that sees through pad, slice and cat.

Each kernel iterates over the coordinates of a *reference* output. A thread owns ``lanes``
consecutive elements of the reference (in its flattened, row-major order). Walking from the
outputs back to the inputs, every node is reached at one or more *index maps* (its coordinates
as the reference's coordinates plus constant offsets); a node at one index map is a
:class:`Site`. Each site carries

- a *box*: the reference coordinates at which its value is needed (the hull over its uses);
- a *frontier*: its trailing dims that are still contiguous with the reference's lanes, each
  with a *projected extent*: groups of that many aligned elements are read or written as one,
  lie inside one pad / slice / cat piece, and need one predicate.

Rules, walking from a node to its operand (``e`` is a projected extent, zero widths ignored):

- pointwise, cast, where: unchanged.
- broadcast: a broadcast (expanded) dim cuts the frontier; only dims right of it remain.
- pad (lo, hi) on dim d: dims left of d leave; ``e = gcd(e, |lo|, hi if hi > 0)``. A negative
  width is a crop: at the low end it shifts the index like a slice start; at the high end it
  needs no alignment at all.
- slice [start, end) on dim d: dims left of d leave; ``e = gcd(e, start)``.
- cat on dim d: piece k is the pad of that piece by (offset_k, rest_k); pieces get their own extents.

A site's width is the largest power of two that divides its contiguous inner run (its frontier
read from the innermost dim out, crossing into the next dim only where a dim is whole and a
power of two), is at most 16 bytes, is at most the thread's lanes, and, for inputs, divides the
data pointer's alignment and every stride outside the run (in elements).

Worked examples (float32 unless said):

- ``pad(x[1024], (4, 4))``: out frontier ``[0:1032]`` -> x ``[0:gcd(1032, 4, 4) = 4]`` -> width 4.
  With (2, 2): 2. With (0, 2): ``gcd(1026, 2) = 2``.
- ``pad(x[1024, 1024, 2], middle dim (4, 4))``: frontier ``[1:1032, 2:2]`` -> x ``[1:4, 2:2]``,
  run 8 -> width 4 (16 bytes). With (-4, 4): ``gcd(1024, 4, 4) = 4`` again, where nvFuser gives 2.
- seed RoPE, bf16, x ``[B, nh, T, 32]``, rope_n_elem 8: the output and ``x[..., 8:]`` keep 8
  (``gcd(32, 8)``); the rotated halves ``x[..., 4:8]`` and ``x[..., 0:4]`` sit at offsets 0 and 4
  of an 8-wide cat piece: 4; cos and sin are ``[T, 8]`` broadcast over B and nh: 8. ``x`` is
  reached at its own index (through ``x[..., :8]`` and ``x[..., 8:]``) and at two shifted ones:
  one cached 16-byte load shared by the aligned uses, two direct 8-byte loads for the halves.

Outputs of other shapes are placed in the reference's coordinates by :mod:`.segments`.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

from .. import ir


IndexMap = tuple[tuple[int | None, int], ...]  # per node dim: (reference dim or None, offset)
Box = tuple[tuple[int, int], ...]  # per reference dim: [lo, hi)
Frontier = tuple[tuple[int, int], ...]  # (node dim, projected extent), outermost first


def pow2_factor(n: int) -> int:
    """The largest power of two that divides ``n`` (0 counts as divisible by any)."""
    return n & -n if n else 1 << 30


def gcd_widths(extent: int, *widths: int) -> int:
    return math.gcd(extent, *(abs(w) for w in widths if w))


@dataclass(frozen=True)
class Site:
    """A node evaluated at one index map of a segment's reference coordinates."""

    id: int
    node: str
    index_map: IndexMap
    box: Box
    frontier: Frontier
    operands: tuple[int | None, ...]  # site ids aligned with the node's operands; None: a literal, or never needed
    via: str | None  # the nearest resize node on the way from an output, for reports

    @property
    def aligned(self) -> bool:
        """True when the node is read at the reference's own index (no shift)."""
        return all(offset == 0 for _, offset in self.index_map)


@dataclass(frozen=True)
class Store:
    output: str
    output_index: int
    site: int
    offsets: tuple[int, ...]  # output coordinate = reference coordinate + offset
    box: Box
    frontier: Frontier


@dataclass(frozen=True)
class Segment:
    """One reference shape: the outputs placed in it and every site they need, in topological order."""

    shape: tuple[int, ...]
    sites: tuple[Site, ...]
    stores: tuple[Store, ...]
    row_piece: bool = False  # one piece of rows cut into several segments (see vectorize.segments)


@dataclass(frozen=True)
class Projection:
    """The layout-independent half of the analysis: depends on the kernel only."""

    kernel: ir.Kernel
    segments: tuple[Segment, ...]


# --------------------------------------------------------------------------------------------
# Walking from a node to its operands
# --------------------------------------------------------------------------------------------


def _cut(frontier: Frontier, dim: int) -> Frontier:
    """Drops the frontier's dims left of ``dim``."""
    return tuple((d, e) for d, e in frontier if d >= dim)


def _resize_dim(frontier: Frontier, dim: int, *widths: int) -> Frontier:
    return tuple((d, gcd_widths(e, *widths) if d == dim else e) for d, e in _cut(frontier, dim))


def _shift(index_map: IndexMap, dim: int, delta: int) -> IndexMap:
    return tuple((ref, off + delta) if d == dim else (ref, off) for d, (ref, off) in enumerate(index_map))


def _through_pad(node: ir.Pad, index_map: IndexMap, frontier: Frontier):
    for d, (lo, hi) in enumerate(node.widths):
        if lo or hi:
            frontier = _resize_dim(frontier, d, lo, hi if hi > 0 else 0)
            index_map = _shift(index_map, d, -lo)
    return index_map, frontier


def _through_slice(node: ir.Slice, operand: ir.Node, index_map: IndexMap, frontier: Frontier):
    for d, (start, end) in enumerate(zip(node.start, node.end)):
        if start or end != operand.type.shape[d]:
            frontier = _resize_dim(frontier, d, start)
            index_map = _shift(index_map, d, start)
    return index_map, frontier


def _through_broadcast(node: ir.Broadcast, operand: ir.Node, index_map: IndexMap, frontier: Frontier):
    kept = {}
    for i, d in enumerate(node.broadcast_dims):
        if operand.type.shape[i] == node.type.shape[d]:
            kept[d] = i
    expanded = [d for d, size in enumerate(node.type.shape) if d not in kept and size != 1]
    if expanded:
        frontier = _cut(frontier, max(expanded) + 1)
    frontier = tuple((kept[d], e) for d, e in frontier if d in kept)
    operand_map = tuple(
        index_map[d] if operand.type.shape[i] == node.type.shape[d] else (None, 0)
        for i, d in enumerate(node.broadcast_dims)
    )
    return operand_map, frontier


def reduced_points(node: ir.Reduce, operand: ir.Node) -> list[tuple[int, ...]]:
    """The coordinates along the reduced dims that a sum adds up, in its order."""
    return list(itertools.product(*(range(operand.type.shape[d]) for d in node.dims)))


def _through_reduce(node: ir.Reduce, operand: ir.Node, index_map: IndexMap, frontier: Frontier):
    """Yields the operand's index map and frontier at each point the sum adds: a reduced dim's
    coordinate is a constant there, so the frontier keeps only dims right of the last one wider than 1."""
    kept = [d for d in range(operand.type.rank) if d not in node.dims]
    wide = [d for d in node.dims if operand.type.shape[d] > 1]
    position = {d: i for i, d in enumerate(kept)}
    op_frontier = [(kept[out_dim], e) for out_dim, e in frontier]
    if op_frontier:  # reduced dims of size 1 inside the frontier keep it contiguous
        op_frontier += [(d, 1) for d in node.dims if d > op_frontier[0][0] and d not in wide]
    op_frontier = tuple(sorted(op_frontier))
    if wide:
        op_frontier = _cut(op_frontier, max(wide) + 1)
    for point in reduced_points(node, operand):
        at = dict(zip(node.dims, point))
        op_map = tuple((None, at[d]) if d in at else index_map[position[d]] for d in range(operand.type.rank))
        yield op_map, op_frontier


def operand_edges(kernel: ir.Kernel, node: ir.Node, index_map: IndexMap, frontier: Frontier):
    """Yields ``(operand position, operand name, index map, frontier)`` for each tensor operand."""
    if isinstance(node, ir.Elementwise):
        for k, operand in enumerate(node.operands):
            if isinstance(operand, str):
                yield k, operand, index_map, frontier
    elif isinstance(node, ir.Cast):
        yield 0, node.operand, index_map, frontier
    elif isinstance(node, ir.Broadcast):
        yield 0, node.operand, *_through_broadcast(node, kernel.node(node.operand), index_map, frontier)
    elif isinstance(node, ir.Pad):
        yield 0, node.operand, *_through_pad(node, index_map, frontier)
    elif isinstance(node, ir.Slice):
        yield 0, node.operand, *_through_slice(node, kernel.node(node.operand), index_map, frontier)
    elif isinstance(node, ir.Cat):
        offset, total = 0, node.type.shape[node.dim]
        for k, piece in enumerate(node.operands):
            size = kernel.node(piece).type.shape[node.dim]
            if size:
                piece_frontier = _resize_dim(frontier, node.dim, offset, total - offset - size)
                yield k, piece, _shift(index_map, node.dim, -offset), piece_frontier
            offset += size
    elif isinstance(node, ir.Reduce):
        through = _through_reduce(node, kernel.node(node.operand), index_map, frontier)
        for k, (op_map, op_frontier) in enumerate(through):
            yield k, node.operand, op_map, op_frontier
    elif not isinstance(node, ir.LOADS):
        raise TypeError(f"no projection rule for {type(node).__name__}")


# --------------------------------------------------------------------------------------------
# Boxes and frontier merges
# --------------------------------------------------------------------------------------------


def bounded(box: Box, index_map: IndexMap, shape: tuple[int, ...]) -> Box:
    """Intersects ``box`` with the reference coordinates at which the node's index is in bounds: empty
    where a constant coordinate is out of them (a pad's or a cat's operand at a point the pad fills or another
    piece covers, as a sum over a padded dim reads it: never loaded)."""
    limits = list(box)
    for (ref, offset), size in zip(index_map, shape):
        if ref is not None:
            lo, hi = limits[ref]
            limits[ref] = (max(lo, -offset), min(hi, size - offset))
        elif not 0 <= offset < size:
            return tuple((0, 0) for _ in box)
    return tuple(limits)


def is_empty(box: Box) -> bool:
    return any(hi <= lo for lo, hi in box)


def hull(a: Box, b: Box) -> Box:
    if is_empty(a):
        return b
    if is_empty(b):
        return a
    return tuple((min(la, lb), max(ha, hb)) for (la, ha), (lb, hb) in zip(a, b))


def merge_frontiers(a: Frontier, b: Frontier) -> Frontier:
    """The common trailing dims, each with the gcd of both extents."""
    eb = dict(b)
    common = []
    for d, e in reversed(a):
        if d not in eb:
            break
        common.append((d, math.gcd(e, eb[d])))
    return tuple(reversed(common))


def inner_run(frontier: Frontier, shape: tuple[int, ...], strides: tuple[int, ...] | None = None) -> tuple[int, set]:
    """The power-of-two run of contiguous elements the frontier allows, and the dims it spans.

    Walks from the innermost dim out; crosses into the next dim only across a whole,
    power-of-two dim and, where ``strides`` are given, only where memory stays contiguous.
    """
    run, spanned, expected_stride = 1, set(), 1
    rank = len(shape)
    for d, e in reversed(frontier):
        if d != rank - 1 - len(spanned):
            break
        if strides is not None and shape[d] != 1 and strides[d] != expected_stride:
            break
        run *= pow2_factor(e) if e else 1
        spanned.add(d)
        if e != shape[d] or e & (e - 1):
            break
        expected_stride *= shape[d]
    return run, spanned


def full_frontier(shape: tuple[int, ...]) -> Frontier:
    return tuple(enumerate(shape))


def lane_capacity(shape: tuple[int, ...]) -> int:
    """The most lanes a thread can own in a tensor of ``shape`` with compile-time lane coordinates."""
    return inner_run(full_frontier(shape), shape)[0] if shape else 1


@dataclass
class _Pending:
    box: Box
    frontier: Frontier
    via: str | None


@dataclass
class _Walk:
    """Accumulates sites from the outputs back to the inputs, in reverse topological order."""

    kernel: ir.Kernel
    ref_shape: tuple[int, ...]
    pending: dict[str, dict[IndexMap, _Pending]] = field(default_factory=dict)

    def reach(self, name: str, index_map: IndexMap, box: Box, frontier: Frontier, via: str | None) -> None:
        node = self.kernel.node(name)
        box = bounded(box, index_map, node.type.shape)
        at = self.pending.setdefault(name, {})
        if index_map in at:
            seen = at[index_map]
            seen.box = hull(seen.box, box)
            seen.frontier = merge_frontiers(seen.frontier, frontier)
        else:
            at[index_map] = _Pending(box, frontier, via)

    def run(self) -> tuple[Site, ...]:
        order = [*self.kernel.inputs, *self.kernel.nodes]
        ids: dict[tuple[str, IndexMap], int] = {}
        visited = []
        for node in reversed(order):
            for index_map, state in self.pending.get(node.name, {}).items():
                visited.append((node, index_map, state))
                if is_empty(state.box):
                    continue
                via = node.name if isinstance(node, ir.RESIZE_NODES) else state.via
                for _, operand, op_map, op_frontier in operand_edges(self.kernel, node, index_map, state.frontier):
                    self.reach(operand, op_map, state.box, op_frontier, via)
        sites = []
        for node, index_map, state in reversed(visited):
            if is_empty(state.box):
                continue
            operands = self._operand_sites(node, index_map, state.frontier, ids)
            site = Site(len(sites), node.name, index_map, state.box, state.frontier, operands, state.via)
            ids[(node.name, index_map)] = site.id
            sites.append(site)
        return tuple(sites)

    def _operand_sites(self, node, index_map, frontier, ids):
        """Site ids aligned with the node's operands; None for literals and for pieces never needed."""
        operands = getattr(node, "operands", None)
        if isinstance(node, ir.Reduce):  # one site per point summed
            operands = reduced_points(node, self.kernel.node(node.operand))
        operands = [None] * (len(operands) if operands is not None else len(node.operand_names()))
        for k, operand, op_map, _ in operand_edges(self.kernel, node, index_map, frontier):
            operands[k] = ids.get((operand, op_map))
        return tuple(operands)


