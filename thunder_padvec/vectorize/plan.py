"""The layout-dependent half of the analysis: lanes per thread, vector widths, register reuse.

Lanes. A thread owns ``lanes`` consecutive reference elements, handled in chunks of ``chunk``
lanes (one 16-byte vector of the narrowest output). Where a row (the innermost dim) is at most
``max_row_bytes``, a thread owns one whole row: every coordinate along the row is then a
compile-time constant, so the selects of pads and cats on that dim fold away, and a shifted
read of an input within the row (``cat(-x2, x1)`` of halves of ``x``) comes from the registers
of the row's own load instead of memory. Otherwise a thread owns one 16-byte vector of the
reference (lanes may then span several short rows).

Widths. A site's width is the largest power of two that divides its contiguous inner run, is at
most 16 bytes and at most a chunk, and for inputs divides the pointer's alignment and every
stride outside the run (in elements).
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import ir
from .projection import Frontier, Projection, Segment, Site, inner_run, lane_capacity, pow2_factor

MAX_VECTOR_BYTES = 16
MAX_ROW_BYTES = 512


@dataclass(frozen=True)
class Layout:
    """What the analysis needs to know of a runtime tensor: strides (in elements) and pointer alignment (bytes)."""

    strides: tuple[int, ...]
    alignment: int


@dataclass(frozen=True)
class Reuse:
    """Input site ``site`` is served from registers: its lane ``l`` is lane ``l + shift`` of ``source``."""

    site: int
    source: int
    shift: int


@dataclass(frozen=True)
class SegmentPlan:
    segment: Segment
    lanes: int  # consecutive reference elements a thread owns
    chunk: int  # lanes handled together; every width divides it
    widths: tuple[int, ...]  # per site: the load width of inputs, the projected width of other nodes
    store_widths: tuple[int, ...]  # per store
    reuses: tuple[Reuse, ...]

    @property
    def whole_rows(self) -> bool:
        return bool(self.segment.shape) and self.lanes == self.segment.shape[-1]

    def reuse_of(self, site_id: int) -> Reuse | None:
        return next((r for r in self.reuses if r.site == site_id), None)


@dataclass(frozen=True)
class VectorPlan:
    projection: Projection
    layouts: tuple[Layout, ...]  # per kernel input
    output_alignments: tuple[int, ...]
    segments: tuple[SegmentPlan, ...]

    @property
    def kernel(self) -> ir.Kernel:
        return self.projection.kernel


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def _largest_pow2_at_most(n: int) -> int:
    return 1 << (max(n, 1).bit_length() - 1)


def width_of(node: ir.Node, frontier: Frontier, chunk: int, layout: Layout | None = None) -> int:
    """The vector width of a site of ``node`` (an input or an output when ``layout`` is given)."""
    shape, itemsize = node.type.shape, node.type.dtype.itemsize
    strides = layout.strides if layout is not None else None
    run, spanned = inner_run(frontier, shape, strides)
    width = min(_largest_pow2_at_most(run), MAX_VECTOR_BYTES // itemsize, chunk)
    if layout is not None:
        width = min(width, max(layout.alignment // itemsize, 1))
        for d, (size, stride) in enumerate(zip(shape, layout.strides)):
            if d not in spanned and size > 1:
                width = min(width, pow2_factor(stride))
    return max(width, 1)


def choose_lanes(shape: tuple[int, ...], store_itemsizes: list[int], max_row_bytes: int) -> tuple[int, int]:
    """``(lanes, chunk)`` for a segment of this reference shape."""
    chunk = MAX_VECTOR_BYTES // min(store_itemsizes)
    row = shape[-1] if shape else 1
    if shape and chunk <= row and row * max(store_itemsizes) <= max_row_bytes:
        return row, min(chunk, pow2_factor(row))
    lanes = min(lane_capacity(shape), chunk)
    return lanes, lanes


def _same_but_last(a: Site, b: Site, last: int) -> int | None:
    """The offset by which ``a`` is shifted from ``b`` along the row, if that is all that differs."""
    shift = None
    for (ref_a, off_a), (ref_b, off_b) in zip(a.index_map, b.index_map):
        if ref_a != ref_b:
            return None
        if ref_a == last:
            shift = off_a - off_b
        elif off_a != off_b:
            return None
    return shift


def _reuse(site: Site, source: Site, lanes: int) -> Reuse | None:
    last = len(site.box) - 1
    shift = _same_but_last(site, source, last)
    if shift is None:
        return None
    for d, ((lo, hi), (src_lo, src_hi)) in enumerate(zip(site.box, source.box)):
        if d != last and not (src_lo <= lo and hi <= src_hi):
            return None
    lo, hi = max(site.box[last][0], 0), min(site.box[last][1], lanes)
    src_lo, src_hi = max(source.box[last][0], 0), min(source.box[last][1], lanes)
    if src_lo <= lo + shift and hi + shift <= src_hi:
        return Reuse(site.id, source.id, shift)
    return None


def _reuses(kernel: ir.Kernel, seg: SegmentPlan) -> tuple[Reuse, ...]:
    """Input sites whose values another site of the same input already holds in registers."""
    if not seg.whole_rows:
        return ()
    inputs = [s for s in seg.segment.sites if isinstance(kernel.node(s.node), ir.Input)]
    sources = sorted(inputs, key=lambda s: not s.aligned)  # aligned (cached) loads serve first
    found, served = [], set()
    for site in inputs:
        for source in sources:
            if source.node != site.node or source.id == site.id or source.id in served:
                continue
            reuse = _reuse(site, source, seg.lanes)
            if reuse is not None:
                found.append(reuse)
                served.add(site.id)
                break
    return tuple(found)


def plan(projection: Projection, layouts: tuple[Layout, ...], output_alignments: tuple[int, ...],
         max_row_bytes: int = MAX_ROW_BYTES) -> VectorPlan:
    kernel = projection.kernel
    by_input = {i.name: layout for i, layout in zip(kernel.inputs, layouts)}
    segment_plans = []
    for segment in projection.segments:
        outputs = [kernel.node(s.output) for s in segment.stores]
        lanes, chunk = choose_lanes(segment.shape, [o.type.dtype.itemsize for o in outputs], max_row_bytes)
        widths = tuple(
            width_of(kernel.node(s.node), s.frontier, chunk, by_input.get(s.node)) for s in segment.sites
        )
        store_widths = tuple(
            width_of(node, store.frontier, chunk,
                     Layout(contiguous_strides(node.type.shape), output_alignments[store.output_index]))
            for node, store in zip(outputs, segment.stores)
        )
        seg = SegmentPlan(segment, lanes, chunk, widths, store_widths, ())
        segment_plans.append(SegmentPlan(segment, lanes, chunk, widths, store_widths, _reuses(kernel, seg)))
    return VectorPlan(projection, tuple(layouts), tuple(output_alignments), tuple(segment_plans))
