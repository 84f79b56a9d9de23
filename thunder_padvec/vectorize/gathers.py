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

Where no load of the kernel holds them, the narrow loads of one input that move alike with the thread
may together read every element of aligned blocks of up to 16 bytes: GPT-J's backward reads sin at the
even and at the odd features of each pair, HF's GPT-J reads its ``repeat_interleave``-d sin and cos one
element for two lanes. Each such block becomes a *window*, one vector load that the kernel adds, and
the lanes move from it. Aligned: the input's pointer, the coefficients of the dims that move with the
thread and the block's first element are multiples of its width. Its elements must be memory the kernel
may read: a lane's load is guarded by its site's box, whose part along the dims that move with the
thread is a run-time condition and whose part along the others a compile-time one (there the lane's
coordinate is a constant). Windows are made only where the run-time part is one condition for all the
lanes of all the loads they serve (the same box along those dims, and no bound of it falls between
two lanes of a chunk for any thread) and each element is read by a lane whose compile-time part holds:
then wherever one lane needs the window every element is needed by some lane, so it is loaded exactly
where that one condition holds, and no lane ever loads its element alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .. import ir
from .plan import SegmentPlan, VectorPlan
from .projection import Site

GATHERS = True  # off: every load reads memory (experiments: `explore.py --variants base: loads:GATHERS=0`)

MAX_WINDOW_BYTES = 16


@dataclass(frozen=True)
class Window:
    """A vector load the kernel adds: ``width`` elements of an input from the address of ``anchor``'s
    lane, read by the lanes of the narrow loads it serves."""

    index: int
    width: int
    anchor: tuple[int, int]  # (site id, lane of the chunk) whose element is the window's first
    guard: tuple[int, int]  # (site id, lane) whose guard holds exactly where the window is needed


Gather = tuple[tuple["int | Window", int], ...]  # per lane of the chunk: (source site id or window, its lane)


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


def _thread_step(seg: SegmentPlan, dim: int) -> int:
    """What a thread's own coordinate along ``dim`` is always a multiple of: the lanes it spans of the dim
    where they start each thread's run (``base = group * lanes``) and the dim's extent is a multiple of them."""
    shape = seg.segment.shape
    inner = math.prod(shape[dim + 1:])
    if inner >= seg.lanes or seg.lanes % inner:
        return 1
    step = seg.lanes // inner
    return step if shape[dim] % step == 0 else 1


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


def _lane_address(seg: SegmentPlan, linear: tuple[int, tuple[int, ...]], lane: int) -> int:
    """The address of a lane without the thread's part, ``K + sum(a[d] * delta[d](lane))``."""
    constant, coefficients = linear
    return constant + sum(a * _lane_delta(seg, d, lane) for d, a in enumerate(coefficients) if a)


def _chunk_starts(seg: SegmentPlan) -> list[int]:
    return [c for g in range(seg.column_groups) for c in seg.columns(g)]


def _lane_map(seg: SegmentPlan, target: tuple[int, tuple[int, ...]], source: tuple[int, tuple[int, ...]]
              ) -> tuple[int, ...] | None:
    """For each lane of a chunk, the lane of the source holding the target's element in every chunk of
    the thread, or None."""
    lane_map = None
    for c in _chunk_starts(seg):
        held = {_lane_address(seg, source, c + j): j for j in reversed(range(seg.chunk))}
        found = tuple(held.get(_lane_address(seg, target, c + j)) for j in range(seg.chunk))
        if None in found or (lane_map is not None and found != lane_map):
            return None
        lane_map = found
    return lane_map


def _fixed_guard(seg: SegmentPlan, site: Site, lane: int) -> bool:
    """The compile-time part of a lane's guard: its box along the dims that do not move with the thread."""
    return all(lo <= _lane_delta(seg, d, lane) < hi for d, (lo, hi) in enumerate(site.box)
               if not _moves_with_thread(seg, d))


def _uniform_guard(seg: SegmentPlan, site: Site) -> bool:
    """Whether the run-time part of a site's guard is one condition for all the lanes of a chunk: along
    each dim that moves with the thread, no bound of the box falls between two of the chunk's lanes, for
    any of the thread's coordinates (multiples of ``_thread_step``)."""
    shape = seg.segment.shape
    for d, (lo, hi) in enumerate(site.box):
        if not _moves_with_thread(seg, d) or (lo <= 0 and hi >= shape[d]):
            continue
        step = _thread_step(seg, d)
        for c in _chunk_starts(seg):
            deltas = [_lane_delta(seg, d, c + j) for j in range(seg.chunk)]
            low, high = min(deltas), max(deltas)
            for bound in (lo, hi):  # a thread at C splits it where C + low < bound <= C + high
                first = max(bound - high, 0)
                if any(C % step == 0 for C in range(first, min(bound - low, shape[d]))):
                    return False
    return True


def _windows(seg: SegmentPlan, sites: list[Site], linear: dict, width: int, first: int
             ) -> dict[int, Gather] | None:
    """The narrow loads ``sites`` (one input, alike along the thread's dims, one run-time guard) served by
    windows of ``width``, numbered from ``first``: where in every chunk their lanes read every element of
    each aligned block they touch, each element by a lane whose compile-time guard holds, the same way in
    every chunk; else None."""
    layout = None
    for c in _chunk_starts(seg):
        readers: dict[int, list[tuple[int, int]]] = {}
        for site in sites:
            for j in range(seg.chunk):
                readers.setdefault(_lane_address(seg, linear[site.id][1:], c + j), []).append((site, j))
        blocks = sorted({address // width for address in readers})
        elements = [readers.get(b * width + k) for b in blocks for k in range(width)]
        if any(element is None or not any(_fixed_guard(seg, site, c + j) for site, j in element)
               for element in elements):
            return None
        windows = []
        for b in blocks:
            guard = next((site.id, j) for site, j in readers[b * width] if _fixed_guard(seg, site, c + j))
            (site, j) = readers[b * width][0]
            lanes = tuple(tuple((site.id, j) for site, j in readers[b * width + k]) for k in range(width))
            windows.append(((site.id, j), guard, lanes))
        if layout is not None and windows != layout:
            return None
        layout = windows
    found: dict[int, list] = {site.id: [None] * seg.chunk for site in sites}
    for i, (anchor, guard, lanes) in enumerate(layout):
        window = Window(first + i, width, anchor, guard)
        for k, element in enumerate(lanes):
            for site, j in element:
                found[site][j] = (window, k)
    return {site: tuple(lanes) for site, lanes in found.items()}


def _aligned(plan: VectorPlan, seg: SegmentPlan, linear: tuple, width: int) -> bool:
    """Whether blocks of ``width`` elements of the input, counted from its pointer, stay aligned for
    every thread: the pointer and each coefficient along the thread's own dims allow it."""
    index, _, coefficients = linear
    itemsize = plan.kernel.inputs[index].type.dtype.itemsize
    return (plan.layouts[index].alignment % (width * itemsize) == 0
            and all(a * _thread_step(seg, d) % width == 0 for d, a in enumerate(coefficients)
                    if _moves_with_thread(seg, d)))


def gathers(plan: VectorPlan, seg: SegmentPlan) -> dict[int, Gather]:
    """The narrow global loads of a segment in lanes mode whose lanes move from registers, site id ->
    per lane (source, lane): from an unguarded load of the same input in the same chunk in vectors of the
    chunk or of 16 bytes, else from windows (see the module's docstring)."""
    if not GATHERS or seg.whole_rows or seg.rows_per_thread != 1 or seg.staged:
        return {}
    kernel = plan.kernel
    loads = [(site, width) for site, width in zip(seg.segment.sites, seg.widths)
             if isinstance(kernel.node(site.node), ir.LOADS)]
    linear = {site.id: _linear_address(plan, seg, site) for site, _ in loads}

    def full(site, width):  # a chunk's vectors as wide as they come, loaded at every lane
        itemsize = kernel.node(site.node).type.dtype.itemsize
        return (width == seg.chunk or width * itemsize >= MAX_WINDOW_BYTES) and _unguarded(seg, site)

    sources = [site for site, width in loads if linear[site.id] is not None and full(site, width)]
    found: dict[int, Gather] = {}
    narrow = [site.id for site, width in loads
              if width < seg.chunk and linear[site.id] is not None and site not in sources]
    for site in narrow:
        index, constant, coefficients = linear[site]
        for source in sources:
            s_index, s_constant, s_coefficients = linear[source.id]
            if s_index != index or any(coefficients[d] != s_coefficients[d] for d in range(len(coefficients))
                                       if _moves_with_thread(seg, d)):
                continue
            lane_map = _lane_map(seg, (constant, coefficients), (s_constant, s_coefficients))
            if lane_map is not None:
                found[site] = tuple((source.id, k) for k in lane_map)
                break
    groups: dict[tuple, list[Site]] = {}  # by input, coefficients and box along the thread's own dims
    for site in narrow:
        site = seg.segment.sites[site]
        if site.id not in found and _uniform_guard(seg, site):
            index, _, coefficients = linear[site.id]
            moving = tuple((a, site.box[d]) for d, a in enumerate(coefficients) if _moves_with_thread(seg, d))
            groups.setdefault((index, moving), []).append(site)
    widths = {site.id: width for site, width in loads}
    windows = 0
    for (index, _), sites in groups.items():
        itemsize = kernel.inputs[index].type.dtype.itemsize
        width = min(MAX_WINDOW_BYTES // itemsize, seg.chunk)
        while width >= 2:
            served = _aligned(plan, seg, linear[sites[0].id], width) and _windows(seg, sites, linear, width, windows)
            if served:
                count = len({w.index for lanes in served.values() for w, _ in lanes})
                if count < sum(seg.chunk // widths[site.id] for site in sites):  # fewer loads than the sites make
                    found.update(served)
                    windows += count
                break
            width //= 2
    return found
