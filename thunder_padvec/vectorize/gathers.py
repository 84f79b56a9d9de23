"""Narrow loads served from a wider load's registers.

GPT-J-style rotary reads x three ways: whole, in 16-byte vectors, and through its strided halves
``x[..., ::2]`` and ``x[..., 1::2]``, whose lanes are two elements apart in memory, so that the widths
give them one element a load. Every element a lane of a half reads is one that a lane of x's own vector
in the same chunk already holds (lane ``j`` of ``x[..., ::2]`` reads what lane ``j & ~1`` of x holds),
so those loads become register moves: a *gather* from the source load's registers.

The proof is exact, not sampled. A thread of a segment in lanes mode owns ``lanes`` consecutive
reference elements; the coordinate of lane ``l`` along reference dim ``d`` is ``C[d] + delta[d](l)``,
``C`` the thread's own coordinates (run-time) and ``delta`` a compile-time function of the lane (as
``codegen.render`` writes it). Where every dim of a load's view that moves with the reference is one
component read without a division or a remainder, its address is linear:
``K + sum(a[d] * (C[d] + delta[d](l)))``. Two loads of the same input hold the same element at lanes
``l`` and ``l'`` of every thread where their coefficients ``a`` agree on every dim along which ``C``
can be non-zero, and ``K + sum(a[d] * delta[d](l))`` agrees: integers compared at planning time. The
source must be loaded at every lane (no guard), so its registers hold memory, never a fill.
"""

from __future__ import annotations

import math

from .. import ir
from .plan import SegmentPlan, VectorPlan
from .projection import Site

ENABLED = True  # off: every load reads memory (experiments)

Gather = tuple[int, tuple[int, ...]]  # (source site id, the source's lane for each lane of the chunk)


def _lane_delta(seg: SegmentPlan, dim: int, lane: int) -> int:
    """The compile-time part of lane ``lane``'s reference coordinate along ``dim`` (``lane_coord``)."""
    shape = seg.segment.shape
    inner = math.prod(shape[dim + 1:])
    if inner >= seg.lanes:
        return 0
    step = lane // inner
    return step % shape[dim] if seg.lanes // inner > shape[dim] else step


def _moves_with_thread(seg: SegmentPlan, dim: int) -> bool:
    """Whether a thread's own coordinate along ``dim`` can be non-zero: not where every thread's
    lanes start at a multiple of the dim's whole extent (``base = group * lanes``)."""
    shape = seg.segment.shape
    return shape[dim] > 1 and seg.lanes % (math.prod(shape[dim + 1:]) * shape[dim]) != 0


def _linear_address(plan: VectorPlan, seg: SegmentPlan, site: Site) -> tuple[int, int, tuple[int, ...]] | None:
    """``(input index, K, a)``: the site's address as ``K + sum(a[d] * coordinate d)``, or None where
    a dim that moves with the reference is read through a division or a remainder."""
    kernel = plan.kernel
    node = kernel.node(site.node)
    source = kernel.node(node.operand) if isinstance(node, ir.View) else node
    layout = plan.layout_of(node)
    constant, coefficients = layout.offset, [0] * len(seg.segment.shape)
    for dim, parts in enumerate(layout.parts(node.type.shape)):
        ref, offset = site.index_map[dim]
        inner = math.prod(e for e, _ in parts)
        terms = []  # (component index, inner extent, extent, stride) of the components that address memory
        for k, (extent, stride) in enumerate(parts):
            inner //= extent
            if extent != 1 and stride:
                terms.append((k, inner, extent, stride))
        if ref is None:  # one coordinate for every lane of every thread
            if offset < 0:
                return None
            constant += sum((offset // i if k == 0 else offset // i % e) * s for k, i, e, s in terms)
            continue
        if not terms:
            continue
        if len(terms) > 1 or terms[0][:2] != (0, 1):
            return None
        stride = terms[0][3]
        constant += stride * offset
        coefficients[ref] += stride
    return source.index, constant, tuple(coefficients)


def _unguarded(seg: SegmentPlan, site: Site) -> bool:
    return all(lo <= 0 and hi >= n for (lo, hi), n in zip(site.box, seg.segment.shape))


def _lane_map(seg: SegmentPlan, target: tuple[int, tuple[int, ...]], source: tuple[int, tuple[int, ...]]
              ) -> tuple[int, ...] | None:
    """For each lane of a chunk, the lane of the source holding the target's element in every chunk of
    the thread, or None."""
    rank = len(seg.segment.shape)

    def lane_address(linear, lane):
        constant, coefficients = linear
        return constant + sum(coefficients[d] * _lane_delta(seg, d, lane) for d in range(rank))

    lane_map = None
    starts = [c for g in range(seg.column_groups) for c in seg.columns(g)]
    for c in starts:
        held = {}
        for j in reversed(range(seg.chunk)):
            held[lane_address(source, c + j)] = j
        found = tuple(held.get(lane_address(target, c + j)) for j in range(seg.chunk))
        if None in found or (lane_map is not None and found != lane_map):
            return None
        lane_map = found
    return lane_map


def gathers(plan: VectorPlan, seg: SegmentPlan) -> dict[int, Gather]:
    """The narrow global loads of a segment in lanes mode that a full-chunk, unguarded load of the
    same input in the same chunk serves, site id -> (source site id, lane map)."""
    if not ENABLED or seg.whole_rows or seg.rows_per_thread != 1 or seg.staged:
        return {}
    kernel = plan.kernel
    loads = [(site, width) for site, width in zip(seg.segment.sites, seg.widths)
             if isinstance(kernel.node(site.node), ir.LOADS)]
    linear = {site.id: _linear_address(plan, seg, site) for site, _ in loads}
    sources = [site for site, width in loads
               if width == seg.chunk and linear[site.id] is not None and _unguarded(seg, site)]
    found = {}
    for site, width in loads:
        if width == seg.chunk or linear[site.id] is None:
            continue
        index, constant, coefficients = linear[site.id]
        for source in sources:
            s_index, s_constant, s_coefficients = linear[source.id]
            if s_index != index or any(coefficients[d] != s_coefficients[d] for d in range(len(coefficients))
                                       if _moves_with_thread(seg, d)):
                continue
            lane_map = _lane_map(seg, (constant, coefficients), (s_constant, s_coefficients))
            if lane_map is not None:
                found[site.id] = (source.id, lane_map)
                break
    return found
