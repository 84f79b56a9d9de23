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

Outputs of a shape other than the reference's join its segment when they can be *placed* in
the reference's coordinates (shifted by constant offsets) through an input both read; then the
input is loaded once for both (``relu(x)`` beside ``pad(x)``). Other outputs start segments of
their own, launched by the same kernel.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from . import ir

MAX_VECTOR_BYTES = 16

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
    elif not isinstance(node, ir.Input):
        raise TypeError(f"no projection rule for {type(node).__name__}")


# --------------------------------------------------------------------------------------------
# Boxes and frontier merges
# --------------------------------------------------------------------------------------------


def bounded(box: Box, index_map: IndexMap, shape: tuple[int, ...]) -> Box:
    """Intersects ``box`` with the reference coordinates at which the node's index is in bounds."""
    limits = list(box)
    for (ref, offset), size in zip(index_map, shape):
        if ref is not None:
            lo, hi = limits[ref]
            limits[ref] = (max(lo, -offset), min(hi, size - offset))
        elif size == 0:
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
        operands = [None] * (len(operands) if operands is not None else len(node.operand_names()))
        for k, operand, op_map, _ in operand_edges(self.kernel, node, index_map, frontier):
            operands[k] = ids.get((operand, op_map))
        return tuple(operands)


# --------------------------------------------------------------------------------------------
# Segments: a reference output and the outputs placed in its coordinates
# --------------------------------------------------------------------------------------------


def _identity(rank: int) -> IndexMap:
    return tuple((d, 0) for d in range(rank))


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


def project(kernel: ir.Kernel) -> Projection:
    """Groups the outputs into segments and projects each segment's reference onto every node."""
    remaining = list(dict.fromkeys(kernel.outputs))
    segments = []
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


# --------------------------------------------------------------------------------------------
# Widths: the layout-dependent half
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """What the analysis needs to know of a runtime tensor: strides (in elements) and pointer alignment (bytes)."""

    strides: tuple[int, ...]
    alignment: int


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def _largest_pow2_at_most(n: int) -> int:
    return 1 << (max(n, 1).bit_length() - 1)


def width_of(node: ir.Node, frontier: Frontier, lanes: int, layout: Layout | None = None) -> int:
    """The vector width of a site of ``node`` (an input when ``layout`` is given)."""
    shape, itemsize = node.type.shape, node.type.dtype.itemsize
    strides = layout.strides if layout is not None else None
    run, spanned = inner_run(frontier, shape, strides)
    width = min(_largest_pow2_at_most(run), MAX_VECTOR_BYTES // itemsize, lanes)
    if layout is not None:
        width = min(width, max(layout.alignment // itemsize, 1))
        for d, (size, stride) in enumerate(zip(shape, layout.strides)):
            if d not in spanned and size > 1:
                width = min(width, pow2_factor(stride))
    return max(width, 1)


@dataclass(frozen=True)
class SegmentPlan:
    segment: Segment
    lanes: int  # consecutive reference elements a thread owns
    widths: tuple[int, ...]  # per site: the load width of inputs, the projected width of other nodes
    store_widths: tuple[int, ...]  # per store


@dataclass(frozen=True)
class VectorPlan:
    projection: Projection
    layouts: tuple[Layout, ...]  # per kernel input
    output_alignments: tuple[int, ...]
    segments: tuple[SegmentPlan, ...]

    @property
    def kernel(self) -> ir.Kernel:
        return self.projection.kernel


def segment_lanes(kernel: ir.Kernel, segment: Segment) -> int:
    itemsizes = [kernel.node(s.output).type.dtype.itemsize for s in segment.stores]
    return min(lane_capacity(segment.shape), MAX_VECTOR_BYTES // min(itemsizes))


def plan(projection: Projection, layouts: tuple[Layout, ...], output_alignments: tuple[int, ...]) -> VectorPlan:
    kernel = projection.kernel
    by_input = {i.name: layout for i, layout in zip(kernel.inputs, layouts)}
    segment_plans = []
    for segment in projection.segments:
        lanes = segment_lanes(kernel, segment)
        widths = tuple(
            width_of(kernel.node(s.node), s.frontier, lanes, by_input.get(s.node)) for s in segment.sites
        )
        store_widths = []
        for store in segment.stores:
            node = kernel.node(store.output)
            layout = Layout(contiguous_strides(node.type.shape), output_alignments[store.output_index])
            store_widths.append(width_of(node, store.frontier, lanes, layout))
        segment_plans.append(SegmentPlan(segment, lanes, widths, tuple(store_widths)))
    return VectorPlan(projection, tuple(layouts), tuple(output_alignments), tuple(segment_plans))
