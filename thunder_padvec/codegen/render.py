"""Renders a vector plan and its launch parameters as one CUDA C++ kernel.

A thread owns ``lanes`` reference elements and walks them in chunks of ``chunk`` lanes. Every site
is a chunk-local register array (``T s<id>[chunk]``) filled by a small render function for its
kind of node; inside the lane loops ``j`` is the lane within the chunk and ``l`` the lane within
the thread. Slices and broadcasts only move indices, so they emit no code.

The kernel runs in three phases separated by barriers: staged inputs are copied into shared
memory (0), the arithmetic runs and fills staged outputs (1), staged outputs are copied out (2).
Where no warp splits rows (one column group), each warp stages its own 32 rows and the barriers
are ``__syncwarp()``: the warps of a block then load, compute and store independently, so that an
SM overlaps the phases of its warps; otherwise a block's tile is shared and they are
``__syncthreads()``. Rows staged in registers (a chunk per thread) need no barriers: the dispatcher
loads each thread's chunk of the staged inputs into a register buffer, runs the chunk's code, and
stores the staged outputs' chunk, so that a warp's global accesses are single coalesced instructions
and only the arithmetic between them branches on the chunk. In staged row mode the segment's code
is a template on the column group ``G`` the warp computes, so that the coordinates of every lane are
compile-time constants. In tiled row mode
a thread's first column ``col`` is a run-time value, but every branch along the row is uniform over
the threads sharing the row, so predicates read the compile-time column ``l`` of the thread's slab
and addresses the true column ``col + l``. ``padvec_run(phase, ...)`` holds each phase's work, so
that the host emulator can run the phases one after another for every thread of a block. The source names
nothing from the trace, so structurally equal regions share binaries.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace

from .. import ir
from ..schedule import LaunchParams, SegmentLaunch
from ..vectorize import SegmentPlan, Site, Staging, Store, VectorPlan
from ..vectorize.gathers import Window, gathers
from ..vectorize.plan import WARP, shared_by_rows, step_distance, whole_lines
from . import scalar

IDX = "padvec_idx"
NEG_FLIP = True  # a 16-bit x negated through float and rounded back: its sign bit flipped (see _negated_16_bit)
FLOAT_TWINS = True  # a 16-bit value that widens to a float the chunk already holds is read as that float (_twin)
UIDX = "padvec_uidx"  # for what is never negative (a thread's place in the grid): cheaper division


@dataclass
class _Segment:
    """Rendering state of one segment: the plan, and C++ expressions for coordinates and registers."""

    plan: VectorPlan
    seg: SegmentPlan
    params: LaunchParams
    names: dict = field(default_factory=dict)  # site id -> id of the site whose registers hold its value
    # Tiled row mode: the step being rendered (its first column, and the guard of a partial step), and
    # the global loads of all steps, hoisted in front of them and shared between equal addresses.
    step_column: int | None = None
    row: int | None = None  # the thread's row (of ``rows_per_thread``) being rendered
    step_guard: str = ""
    loads: dict = field(default_factory=dict)  # (address, guard, width) -> register array
    hoisted: list = field(default_factory=list)
    prefetches: list = field(default_factory=list)  # the hoisted loads' lines asked of the L2 first (params.prefetch)
    # Steps side by side (``seg.lane_steps``): rendering them, and per own-chunk load the steps whose
    # lanes load it as their own chunk and the distances to the owners that other lanes take it from.
    lane_step: bool = False
    owners: dict = field(default_factory=dict)  # own load key -> the steps whose lanes load it
    twins: dict = field(default_factory=dict)  # 16-bit site id -> float array holding its exact value (_twin)
    exchanges: dict = field(default_factory=dict)  # own load key -> {distance: (register, direct address)}
    gathers: dict = field(default_factory=dict)  # site id -> per lane (source site or window, lane): vectorize.gathers
    early: set = field(default_factory=set)  # source loads of gathers rendered ahead of their turn in this chunk
    windows: set = field(default_factory=set)  # the windows rendered in this chunk

    @property
    def shape(self) -> tuple[int, ...]:
        return self.seg.segment.shape

    def site(self, site_id: int) -> Site:
        return self.seg.segment.sites[site_id]

    def dtype(self, site_id: int) -> ir.DType:
        return self.plan.kernel.node(self.site(site_id).node).type.dtype

    def reg(self, site_id: int, j: str = "j") -> str:
        """The register of ``site_id`` at lane ``j`` of the chunk."""
        return f"s{self.names.get(site_id, site_id)}[{j}]"

    def lane_coord(self, ref_dim: int, predicate: bool = False) -> str:
        """The reference coordinate along ``ref_dim`` of lane ``l`` of this thread; for a
        ``predicate``, in tiled row mode, the column within the slab (a compile-time constant)."""
        if predicate and self.seg.tiled and ref_dim == len(self.shape) - 1:
            return "l"
        if ref_dim == self.seg.row_dim and self.row is not None:
            return f"c{ref_dim}_{self.row}"
        inner = math.prod(self.shape[ref_dim + 1:])
        if inner >= self.seg.lanes:
            return f"c{ref_dim}"
        step = "l" if inner == 1 else f"(l / {inner})"
        if self.seg.lanes // inner > self.shape[ref_dim]:
            step = f"(({step}) % {self.shape[ref_dim]})"
        return f"(c{ref_dim} + {step})"

    def node_coord(self, site: Site, dim: int, predicate: bool = False, lane: int | None = None,
                   column: str | None = None) -> str | int:
        """The node's coordinate along ``dim`` at lane ``l`` (or at the compile-time column ``lane``
        of a tiled step, or at the run-time ``column`` of a lane's own chunk); an int where it is constant."""
        ref, offset = site.index_map[dim]
        if ref is None:
            return offset
        last = len(self.shape) - 1
        if column is not None and ref == last:
            return f"c{last} + {column}"
        if lane is not None and ref == last:
            return lane + offset if predicate else f"c{last} + {lane + offset}"
        return self.lane_coord(ref, predicate) + (f" + {offset}" if offset else "")

    def predicate_coord(self, site: Site, dim: int, bound: int) -> str | int:
        """The node's coordinate along ``dim`` for a comparison with ``bound``. In tiled row mode a
        chunk starts at a multiple of the chunk (``c``): where ``bound`` minus the coordinate's offset
        along the row is one too, all of the chunk's lanes fall on the same side of it, and the chunk's
        first column answers for them (one comparison a chunk where ``c`` is a run-time value, as in
        steps side by side, instead of one a lane)."""
        coord = self.node_coord(site, dim, predicate=True)
        ref, offset = site.index_map[dim]
        if (isinstance(coord, str) and self.seg.tiled and ref == len(self.shape) - 1
                and (bound - offset) % self.seg.chunk == 0):
            return f"c + {offset}" if offset else "c"
        return coord

    def box_guard(self, box) -> str:
        terms = []
        for ref_dim, (lo, hi) in enumerate(box):
            coord = self.lane_coord(ref_dim, predicate=True)
            if lo > 0:
                terms.append(f"{coord} >= {lo}")
            if hi < self.shape[ref_dim]:
                terms.append(f"{coord} < {hi}")
        return " && ".join(terms) or "true"


def _loop(size: int, step: int, body: list[str]) -> list[str]:
    return [
        "#pragma unroll",
        f"for (int j = 0; j < {size}; j += {step}) {{",
        "  const int l = c + j;",
        *("  " + line for line in body),
        "}",
    ]


def _declare(r: _Segment, site: Site) -> str:
    node = r.plan.kernel.node(site.node)
    return f"alignas(16) {scalar.CTYPE[node.type.dtype]} s{site.id}[{r.seg.chunk}];"


def _per_lane(r: _Segment, site: Site, value: str) -> list[str]:
    return [_declare(r, site), *_loop(r.seg.chunk, 1, [f"s{site.id}[j] = {value};"])]


def _as_compute(r: _Segment, operand: int, source: ir.DType, want: ir.DType, j: str = "j") -> str:
    """An operand's register at lane ``j`` read as ``want``: a 16-bit value with a float twin
    (``_twin``) as that float, which is the same number without the widening."""
    twin = r.twins.get(operand) if want == ir.DType.float32 else None
    return f"{twin}[{j}]" if twin else scalar.to_compute(r.reg(operand, j), source, want)


def _twin(r: _Segment, site: Site, value: str) -> list[str]:
    """Declares ``t<site>``, the float that the 16-bit value of ``site`` widens to, computed as
    ``value`` (of lane ``j``) from float registers the chunk holds. A RoPE's ``cat((-x2, x1))`` as
    traced rounds ``-float(x2)`` to 16 bits, selects, and widens again: with twins the select takes
    ``-float(x2)`` and ``float(x1)`` as they are, and where x1 and x2 are the same registers (steps
    side by side) the compiler widens once. Exact: the rounding it skips changes nothing. Unused
    twins cost nothing (the compiler drops them)."""
    r.twins[site.id] = f"t{site.id}"
    return [f"alignas(16) float t{site.id}[{r.seg.chunk}];", *_loop(r.seg.chunk, 1, [f"t{site.id}[j] = {value};"])]


def _staged_row(staging: Staging) -> str:
    """The name of the thread's row of a staged tensor in shared memory."""
    return f"{'so' if staging.output else 'si'}{staging.index}"


def _read_once(r: _Segment, site: Site, node: ir.Node) -> bool:
    """Whether the segment reads each element of this input once: every dim of the reference that
    has extent reaches it, and no dim of its memory is broadcast (stride 0)."""
    used = {ref for ref, _ in site.index_map if ref is not None}
    if any(n > 1 and d not in used for d, n in enumerate(r.shape)):
        return False
    parts = r.plan.layout_of(node).parts(node.type.shape)
    return all(stride != 0 for dim in parts for extent, stride in dim if extent > 1)


KEEP_MAX_BYTES = 8 << 20  # inputs read again are kept in the L2 only up to this size (cos and sin)
KEEP_ONCE = True  # inputs read once (x, q, the cotangents) are loaded with the evict_last policy too


def _load_op(params: LaunchParams, once: bool, node: ir.Node) -> str:
    """The copy from global memory, where the launch asks for hints: streaming for data read once
    (``load_hints``), else with an L2 evict_last policy (``keep_hints``): inputs read once
    (``KEEP_ONCE``, unless the launch's ``keep_once`` is off) and small inputs read again (up to
    ``KEEP_MAX_BYTES``: cos and sin, not a grouped-query qkv's shared keys and values). On the H200,
    with the L2 full of dirty lines, loading x with the policy made LitGPT's RoPE forward 3-5% faster
    and the seed's 5% (as Triton's kernels load the halves of x they read twice), and a kernel reading
    the outputs next no slower (``benchmarks/results/2026-12-03-keep-once/``); but phi-2's forward 7%
    slower, with fewer warps active under ncu (``benchmarks/NOTES.md``, "Teams that fill their slots")."""
    if once:
        if params.load_hints:
            return "padvec_load_once"
        return "padvec_load_keep" if KEEP_ONCE and params.keep_once and params.keep_hints else "padvec_load"
    small = node.type.numel * node.type.dtype.itemsize <= KEEP_MAX_BYTES
    return "padvec_load_keep" if params.keep_hints and small else "padvec_load"


def _store_op(params: LaunchParams) -> str:
    return "padvec_store_once" if params.store_hints else "padvec_store"


# --------------------------------------------------------------------------------------------
# One render function per kind of site
# --------------------------------------------------------------------------------------------


def _global_address(r: _Segment, site: Site, node: ir.Node, lane: int | None = None, column: str | None = None) -> str:
    """The address of a site's lane of an input or of a view (its dims' components, see vectorize.views)."""
    layout = r.plan.layout_of(node)
    source = r.plan.kernel.node(node.operand) if isinstance(node, ir.View) else node
    components = layout.parts(node.type.shape)
    terms = [str(layout.offset)] if layout.offset else []
    for dim, parts in enumerate(components):
        coord = r.node_coord(site, dim, lane=lane, column=column)
        if coord == 0:
            continue
        if _row_invariant(r, site, dim, parts):  # the thread's rows read one row of this input
            coord = f"c{r.seg.row_dim}_0"
        inner = math.prod(e for e, _ in parts)
        for k, (extent, stride) in enumerate(parts):
            inner //= extent
            if extent == 1 or not stride:
                continue
            digit = f"({coord})" if inner == 1 else f"(({coord}) / {inner})"
            if k:
                digit = f"({digit} % {extent})"
            terms.append(f"{digit} * {stride}")
    return f"args.in{source.index} + ({' + '.join(terms) or '0'})"


def _row_invariant(r: _Segment, site: Site, dim: int, parts) -> bool:
    """Whether a view's coordinate along ``dim`` addresses the same element for all of the thread's
    rows: its innermost component is broadcast (stride 0) over a multiple of ``rows_per_thread``
    (the heads of grouped-query attention that share a key), so the rows share their loads."""
    ref, offset = site.index_map[dim]
    return r.row is not None and ref == r.seg.row_dim and shared_by_rows(offset, parts, r.seg.rows_per_thread)


def _render_hoisted_load(r: _Segment, site: Site, node: ir.Node, width: int) -> list[str]:
    """A tiled step's load: each vector comes from a register array loaded in front of all steps,
    one per distinct address, so that a row's aligned and shifted reads share their loads."""
    lines = [_declare(r, site)]
    lo, hi = site.box[-1]
    rows_guard = r.box_guard(site.box[:-1] + ((0, r.shape[-1]),))
    guard = " && ".join(g for g in (r.step_guard, rows_guard) if g and g != "true") or "true"
    ctype = scalar.CTYPE[node.type.dtype]
    for j in range(0, r.seg.chunk, width):
        lane = r.step_column + j
        if not lo <= lane < hi:  # not needed at this step (the code that reads it is folded away)
            lines.append(f"padvec_fill_zero<{width}>(&s{site.id}[{j}]);")
            continue
        address = _global_address(r, site, node, lane)
        key = (address, guard, width)
        if key not in r.loads:
            reg = r.loads[key] = f"g{len(r.loads)}"
            op = _load_op(r.params, _read_once(r, site, node), node)
            load = f"{op}<{width}>({reg}, {address});"
            r.hoisted += [f"alignas(16) {ctype} {reg}[{width}];",
                          load if guard == "true" else f"if ({guard}) {load} else padvec_fill_zero<{width}>({reg});"]
            if r.params.prefetch:
                fetch = f"padvec_prefetch<{'true' if op == 'padvec_load_keep' else 'false'}>({address});"
                r.prefetches.append(fetch if guard == "true" else f"if ({guard}) {fetch}")
        lines.append(f"padvec_load<{width}>(&s{site.id}[{j}], {r.loads[key]});")
    return lines


def _render_own_load(r: _Segment, site: Site, node: ir.Node, width: int) -> list[str]:
    """A load of steps taken side by side: the lanes ``d`` teams along (``step_distance``) load the
    chunk as their own, at ``own``, their step's first column; the lane takes it from them (see
    ``_own_loads``)."""
    seg = r.seg
    distance = step_distance(seg, site)
    if distance is None:  # no step reads it (the code that would is selected away)
        zeros = (f"padvec_fill_zero<{width}>(&s{site.id}[{j}]);" for j in range(0, seg.chunk, width))
        return [_declare(r, site), *zeros]
    guard = r.box_guard(site.box[:-1] + ((0, r.shape[-1]),))
    key = (_global_address(r, site, node, column="own"), guard, width)
    if key not in r.loads:
        r.loads[key] = f"g{len(r.loads)}"
        r.owners[key], r.exchanges[key] = set(), {}
        r.hoisted.append((key, site, node))
    lo, hi = site.box[-1]
    n = seg.lane_steps
    r.owners[key].update((k + distance) % n for k, (first, _) in enumerate(seg.steps) if lo <= first * seg.chunk < hi)
    reg = r.loads[key]
    if distance:
        reg = f"{reg}_{distance}"
        r.exchanges[key][distance] = (reg, _global_address(r, site, node, column=f"own{distance}"))
    return [_declare(r, site), f"padvec_load<{width}>(&s{site.id}[0], {reg});"]


EXCHANGE = True  # steps side by side take the other steps' chunks with warp shuffles; off: loaded again (experiments)


def _own_loads(r: _Segment) -> list[str]:
    """The own-chunk loads of steps taken side by side, then the exchanges: a lane's register of
    another step's chunk is the owner's, read with ``__shfl_sync`` (every lane of the warp takes part:
    the segment's blocks hold whole teams of rows, see ``vectorize.plan.lane_steps``). The host runs a block's
    threads one after another and loads those chunks again instead, as the lanes do where the teams do
    not fit a warp (``seg.reloads``, ``vectorize.plan.lane_steps``)."""
    seg = r.seg

    def owned(load: str, key, team: str, reg: str) -> str:
        """``load`` where team ``team`` owns the chunk and the guard holds, zeros elsewhere (where the
        address may lie past the input's rows)."""
        owners, (_, guard, width) = sorted(r.owners[key]), key
        terms = [" || ".join(f"{team} == {m}" for m in owners)] if len(owners) < seg.lane_steps else []
        terms += [guard] if guard != "true" else []
        condition = " && ".join(f"({t})" if "||" in t else t for t in terms)
        return f"if ({condition}) {load} else padvec_fill_zero<{width}>({reg});" if condition else load

    lines = []
    for key, site, node in r.hoisted:
        (address, _, width), reg = key, r.loads[key]
        load = f"{_load_op(r.params, _read_once(r, site, node), node)}<{width}>({reg}, {address});"
        lines += [f"alignas(16) {scalar.CTYPE[node.type.dtype]} {reg}[{width}];", owned(load, key, "step", reg)]
    reload = seg.reloads or not EXCHANGE
    for key, site, node in r.hoisted:
        (_, _, width), reg = key, r.loads[key]
        ctype = scalar.CTYPE[node.type.dtype]
        op = _load_op(r.params, _read_once(r, site, node), node) if reload else "padvec_load"
        for distance, (other, address) in sorted(r.exchanges[key].items()):
            load = owned(f"{op}<{width}>({other}, {address});", key, f"(step + {distance}) % {seg.lane_steps}", other)
            lines.append(f"alignas(16) {ctype} {other}[{width}];")
            if reload:
                lines.append(load)
                continue
            source = f"((step + {distance}) % {seg.lane_steps}) * {seg.threads_per_row} + col / {seg.chunk}"
            lines += ["#ifdef __CUDA_ARCH__", f"padvec_exchange<{width}>({other}, {reg}, {source}, {seg.team});",
                      "#else", load, "#endif"]
    return lines


def _render_load(r: _Segment, site: Site, node: ir.Node, width: int) -> list[str]:
    if r.lane_step:
        return _render_own_load(r, site, node, width)
    if r.step_column is not None:
        return _render_hoisted_load(r, site, node, width)
    staging = r.seg.staging(node.name)
    if staging is not None:  # the row is in shared memory; only the row's own bounds matter
        column = r.node_coord(site, node.type.rank - 1)
        own = " - c" if r.seg.in_registers else ""  # registers hold the chunk's columns alone
        address = f"{_staged_row(staging)} + ({column} - {staging.col_lo}{own})"
        box = tuple((0, n) for n in r.shape[:-1]) + site.box[-1:]
    else:
        address = _global_address(r, site, node)
        box = site.box
    guard = r.box_guard(box)
    op = "padvec_load" if staging is not None else _load_op(r.params, _read_once(r, site, node), node)
    load = f"{op}<{width}>(&s{site.id}[j], {address});"
    body = load if guard == "true" else f"if ({guard}) {load} else padvec_fill_zero<{width}>(&s{site.id}[j]);"
    return [_declare(r, site), *_loop(r.seg.chunk, width, [body])]


def _lane_guard(r: _Segment, site: Site, j: int) -> str:
    """A lanes-mode load's guard at lane ``j`` of the chunk."""
    guard = r.box_guard(site.box)
    return guard if guard == "true" else re.sub(r"\bl\b", f"(c + {j})", guard)


def _render_window(r: _Segment, window: Window) -> list[str]:
    """A window (``vectorize.gathers``), loaded where the lanes it serves need it: under the guard of one of
    them, which is theirs along the dims that move with the thread and holds along the others."""
    site = r.site(window.anchor[0])
    node = r.plan.kernel.node(site.node)
    name, ok = f"w{window.index}", _lane_guard(r, r.site(window.guard[0]), window.guard[1])
    load = (f"{{ const int l = c + {window.anchor[1]}; {_load_op(r.params, _read_once(r, site, node), node)}"
            f"<{window.width}>({name}, {_global_address(r, site, node)}); }}")
    lines = [f"alignas(16) {scalar.CTYPE[node.type.dtype]} {name}[{window.width}];"]
    return lines + [load if ok == "true" else f"if ({ok}) {load} else padvec_fill_zero<{window.width}>({name});"]


def _gather(r: _Segment, site: Site) -> list[str]:
    """A narrow load's lanes moved from the registers that hold them (``vectorize.gathers``): a full load's
    or a window's, lane by lane under the load's own guard."""
    guard = r.box_guard(site.box)
    lines = [_declare(r, site)]
    for j, (source, k) in enumerate(r.gathers[site.id]):
        register = f"w{source.index}" if isinstance(source, Window) else f"s{source}"
        move = f"s{site.id}[{j}] = {register}[{k}];"
        if guard == "true":
            lines.append(move)
        else:
            fill = f"padvec_fill_zero<1>(&s{site.id}[{j}]);"
            lines.append(f"{{ const int l = c + {j}; if ({guard}) {move} else {fill} }}")
    return lines


def _render_elementwise(r: _Segment, site: Site, node: ir.Elementwise) -> list[str]:
    sources = [r.dtype(o) if isinstance(n, str) else None for n, o in zip(node.operands, site.operands)]
    if node.op == "where":
        compute = result = node.type.dtype
        reads = [ir.DType.bool, compute, compute]
    else:
        operand_dtype = next((d for d in sources if d is not None), node.type.dtype)
        predicate = node.op in ir.COMPARISONS or node.op in ir.UNARY_PREDICATES
        compute = scalar.compute_type(operand_dtype if predicate else node.type.dtype)
        result = ir.DType.bool if predicate else compute
        reads = [compute] * len(node.operands)
    args = [
        scalar.literal(n, want) if src is None else _as_compute(r, o, src, want)
        for n, o, src, want in zip(node.operands, site.operands, sources, reads)
    ]
    value = scalar.from_compute(scalar.math_expr(node.op, args, compute), result, node.type.dtype)
    return _per_lane(r, site, value)


def _negated_16_bit(r: _Segment, site: Site, node: ir.Cast) -> str | None:
    """The register of ``x`` where this cast rounds ``-float(x)`` back to ``x``'s 16-bit type (a
    RoPE's ``cat((-x2, x1))`` as traced): exact, so the same as flipping ``x``'s sign bit; else None."""
    (operand,) = site.operands
    neg = r.site(operand)
    neg_node = r.plan.kernel.node(neg.node)
    if not (isinstance(neg_node, ir.Elementwise) and neg_node.op == "neg" and r.dtype(operand) == ir.DType.float32):
        return None
    (inner,) = neg.operands
    inner = r.names.get(inner, inner)
    widen = r.site(inner)
    if not isinstance(r.plan.kernel.node(widen.node), ir.Cast) or r.dtype(inner) != ir.DType.float32:
        return None
    (x,) = widen.operands
    return r.reg(x) if r.dtype(r.names.get(x, x)) == node.type.dtype else None


def _render_cast(r: _Segment, site: Site, node: ir.Cast) -> list[str]:
    (operand,) = site.operands
    source, target = r.dtype(operand), node.type.dtype
    if source == target:  # a copy (a convert to the type it has)
        return _per_lane(r, site, r.reg(operand))
    if target == ir.DType.float32 and operand in r.twins:  # widening a value whose float the chunk holds
        return _per_lane(r, site, f"{r.twins[operand]}[j]")
    if r.params.word_pairs and (source, target) == (ir.DType.bfloat16, ir.DType.float32) and not r.seg.chunk % 2:
        return [_declare(r, site), *_loop(r.seg.chunk, 2, [f"padvec_widen_bf16x2(&s{site.id}[j], &{r.reg(operand)});"])]
    x = _negated_16_bit(r, site, node) if target in scalar.PACK_PAIR else None
    twin = _twin(r, site, r.reg(operand)) if FLOAT_TWINS and x is not None else []  # -float(x), exact
    if NEG_FLIP and x is not None:
        return twin + _per_lane(r, site, f"padvec_flip_sign({x})")
    pack = scalar.PACK_PAIR.get(target)
    if pack is None or r.seg.chunk % 2:
        return twin + _per_lane(r, site, scalar.cast(r.reg(operand), source, target))
    # Two lanes at a time: one conversion instruction rounds a pair on the GPU.
    lo = _as_compute(r, operand, source, ir.DType.float32)
    hi = _as_compute(r, operand, source, ir.DType.float32, "j + 1")
    pack += "" if r.params.word_pairs else "<false>"
    return twin + [_declare(r, site), *_loop(r.seg.chunk, 2, [f"{pack}(&s{site.id}[j], {lo}, {hi});"])]


def _render_reduce(r: _Segment, site: Site, node: ir.Reduce) -> list[str]:
    """The sum of its points' registers (one site each), in order, in the compute type."""
    compute = scalar.compute_type(node.type.dtype)
    value = scalar.literal(0, compute)
    for k, operand in enumerate(o for o in site.operands if o is not None):
        term = _as_compute(r, operand, r.dtype(operand), compute)
        value = term if k == 0 else f"({value} + {term})"
    return _per_lane(r, site, scalar.from_compute(value, compute, node.type.dtype))


def _render_pad(r: _Segment, site: Site, node: ir.Pad) -> list[str]:
    fill = scalar.literal(node.value, node.type.dtype)
    (operand,) = site.operands
    terms = []
    for dim, (lo, hi) in enumerate(node.widths):
        coord = r.node_coord(site, dim, predicate=True)
        size_in = node.type.shape[dim] - lo - hi
        if isinstance(coord, int):
            if not 0 <= coord - lo < size_in:
                operand = None
            continue
        if lo > 0:
            terms.append(f"({r.predicate_coord(site, dim, lo)}) >= {lo}")
        if hi > 0:
            terms.append(f"({r.predicate_coord(site, dim, lo + size_in)}) < {lo + size_in}")
    if operand is None:
        value = fill
    else:
        value = f"({' && '.join(terms)}) ? {r.reg(operand)} : {fill}" if terms else r.reg(operand)
    lines = _per_lane(r, site, value)
    if operand in r.twins and node.value == 0 and math.copysign(1.0, node.value) > 0:  # +0 widens to +0.0f
        zero = scalar.literal(0, ir.DType.float32)
        lines += _twin(r, site, f"({' && '.join(terms)}) ? {r.twins[operand]}[j] : {zero}" if terms
                       else f"{r.twins[operand]}[j]")
    return lines


def _render_cat(r: _Segment, site: Site, node: ir.Cat) -> list[str]:
    live, end = [], 0
    for operand, piece in zip(site.operands, node.operands):
        end += r.plan.kernel.node(piece).type.shape[node.dim]
        if operand is not None:
            live.append((operand, end))
    def select(read):
        value = read(live[-1][0])
        for operand, piece_end in reversed(live[:-1]):
            coord = r.predicate_coord(site, node.dim, piece_end)
            value = f"({coord}) < {piece_end} ? {read(operand)} : ({value})"
        return value

    lines = _per_lane(r, site, select(r.reg))
    if any(o in r.twins for o, _ in live) and node.type.dtype in scalar.PACK_PAIR:
        lines += _twin(r, site, select(lambda o: _as_compute(r, o, r.dtype(o), ir.DType.float32)))
    return lines


def _render_store(r: _Segment, store: Store, width: int) -> list[str]:
    node = r.plan.kernel.node(store.output)
    shape = node.type.shape
    staging = r.seg.staging(store.output, output=True)
    if staging is not None:
        destination = f"{_staged_row(staging)} + {'j' if r.seg.in_registers else 'l'}"
    elif (shape == r.shape and not any(store.offsets) and r.seg.rows_per_thread == 1
          and r.plan.output_contiguous(store.output_index)):
        column = f"c{len(shape) - 1} + " if r.seg.tiled else ""
        destination = f"args.out{store.output_index} + (base + {column}l)"
    else:
        strides = r.plan.output_layout(store.output_index).strides
        terms = [
            f"({r.lane_coord(d)}{f' + {p}' if p else ''}) * {stride}"
            for d, (p, stride, size) in enumerate(zip(store.offsets, strides, shape))
            if size > 1
        ]
        destination = f"args.out{store.output_index} + ({' + '.join(terms) or '0'})"
    guard = r.box_guard(store.box)
    op = "padvec_store" if staging is not None else _store_op(r.params)
    write = f"{op}<{width}>({destination}, &{r.reg(store.site)});"
    return _loop(r.seg.chunk, width, [write if guard == "true" else f"if ({guard}) {write}"])


_RENDERERS = {
    ir.Elementwise: _render_elementwise,
    ir.Cast: _render_cast,
    ir.Pad: _render_pad,
    ir.Cat: _render_cat,
    ir.Reduce: _render_reduce,
}


# --------------------------------------------------------------------------------------------
# The walker
# --------------------------------------------------------------------------------------------


TOKEN_TILES = 4  # tokens a tile of rows takes along each head in turn, where a row ends inside a line (_token_tiles)
ALL_TOKEN_TILES = False  # ... in every segment that can renumber its rows (experiments)


def _rows_apart_along_tokens(plan: VectorPlan, seg: SegmentPlan, split_lines: bool = False) -> bool:
    """Whether the segment reads or writes a tensor whose rows (the last dim) lie apart along the tokens (the
    dim before it): heads inner to tokens, as qkv holds them. With ``split_lines``, only rows that end inside
    a 128-byte line (Phi-3-mini's rows of 192 bytes): the line a row ends in is the next head's row's first,
    which other threads take."""
    shape, kernel = seg.segment.shape, plan.kernel
    if len(shape) < 3:  # no heads beside the tokens
        return False
    tokens, features = len(shape) - 2, len(shape) - 1

    def apart(token_stride: int, feature_stride: int, row: int, itemsize: int) -> bool:
        return feature_stride == 1 and token_stride != row and not (split_lines and whole_lines((row,), itemsize))

    for store in seg.segment.stores:
        node = kernel.node(store.output)
        strides = plan.output_layout(store.output_index).strides
        if len(strides) == len(shape) and apart(strides[tokens], strides[features], node.type.shape[features],
                                                node.type.dtype.itemsize):
            return True
    for site in seg.segment.sites:
        node = kernel.node(site.node)
        if not isinstance(node, (ir.Input, ir.View)):
            continue
        dims = {ref: d for d, (ref, _) in enumerate(site.index_map) if ref is not None}
        if tokens not in dims or features not in dims:
            continue
        parts = plan.layout_of(node).parts(node.type.shape)
        token_stride, feature_stride = _inner_stride(parts[dims[tokens]]), _inner_stride(parts[dims[features]])
        if None not in (token_stride, feature_stride) and apart(token_stride, feature_stride,
                                                                node.type.shape[dims[features]],
                                                                node.type.dtype.itemsize):
            return True
    return False


def _inner_stride(parts: tuple) -> int | None:
    """The stride of a dim's innermost component that has extent (a view's dim may have none: extent 1)."""
    return next((stride for extent, stride in reversed(parts) if extent > 1), None)


def _token_tiles(seg: SegmentPlan, shape: tuple[int, ...], tile: int) -> list[str]:
    """``group`` renumbered so that consecutive groups take ``tile`` rows along the last row dim (tokens)
    of one plane (the dims before it: heads), then the same rows of the next plane, and only then the next
    rows: the threads in flight then read and write every plane near the same tokens, and the two halves of
    a line that two heads' rows share are written (or read) close in time. Nothing where ``tile`` is 0 or
    does not divide the tokens; rows staged in shared memory or registers keep their order."""
    if not tile or seg.in_shared_memory or seg.in_registers or len(shape) < 3:
        return []
    if not seg.whole_rows and shape[-1] % seg.lanes:
        return []
    per_row = 1 if seg.whole_rows else shape[-1] // seg.lanes
    tokens, planes = shape[-2], math.prod(shape[:-2])
    if tokens % tile or tokens == tile or planes == 1:
        return []
    line, span = tokens * per_row, tile * per_row  # groups along one plane's tokens, and in one tile of them
    return [
        f"const {IDX} tile = group / {planes * span}, in_tile = group % {planes * span};",
        f"const {IDX} tiled = in_tile / {span} * {line} + tile * {span} + in_tile % {span};",
    ]


def token_tile(plan: VectorPlan, seg: SegmentPlan, params: LaunchParams) -> int:
    """Tokens a tile of the segment's rows takes along each head in turn (``_token_tiles``), 0 where its rows
    keep their order: tiles of ``TOKEN_TILES`` where a row ends inside a line and rows lie apart along the
    tokens (``_rows_apart_along_tokens``), not where pieces of cut rows interleave (phi-2's qkv form: its
    fwd+bwd 2-4% slower with tiles on an H100), nor where the renumbering does not apply. Tiles of one token
    wherever rows lie apart along the tokens in the launch variant ``params.tokens_first`` (on an H100 the
    grouped-query qkv forwards 0.8-1.5% faster so with lanes that reload, backwards of whole-line rows
    0.4-1.5% slower: the first call times it, ``runtime.tune``)."""
    if params.tokens_first and _rows_apart_along_tokens(plan, seg):
        tile = 1
    else:
        split = not params.interleave and _rows_apart_along_tokens(plan, seg, split_lines=True)
        tile = TOKEN_TILES if ALL_TOKEN_TILES or split else 0
    return tile if _token_tiles(seg, _thread_shape(seg), tile) else 0


def _thread_shape(seg: SegmentPlan) -> tuple[int, ...]:
    """The segment's shape as its threads cover it: the row dim divided by the rows a thread takes."""
    shape, d, rows = seg.segment.shape, seg.row_dim, seg.rows_per_thread
    return shape if rows <= 1 else shape[:d] + (shape[d] // rows,) + shape[d + 1:]


def _coordinates(seg: SegmentPlan, tile: int = 0) -> list[str]:
    """The thread's coordinates in the segment, from its ``group`` (renumbered in tiles of ``tile`` tokens)."""
    shape, lanes = seg.segment.shape, seg.lanes
    if seg.rows_per_thread > 1:  # the thread's rows are rows_per_thread apart along row_dim
        d, rows = seg.row_dim, seg.rows_per_thread
        single = replace(seg, rows_per_thread=1, segment=replace(seg.segment, shape=_thread_shape(seg)))
        lines = _coordinates(single, tile)
        return lines + [f"const {IDX} c{d}_{i} = c{d} * {rows} + {i};" for i in range(rows)]
    lines = _token_tiles(seg, shape, tile)
    group = "tiled" if lines else "group"
    lines.append(f"const {IDX} base = {group} * {lanes};")
    rest = "base"
    if seg.whole_rows:  # a thread owns one whole row, from column ``col`` on (0 but in tiled mode)
        lines.append(f"const {IDX} c{len(shape) - 1} = col;")
        shape, rest = shape[:-1], group
    lines.append(f"{IDX} rest = {rest};")
    for d in reversed(range(len(shape))):
        if d == 0:
            lines.append(f"const {IDX} c0 = rest;")
        elif shape[d] == 1:
            lines.append(f"const {IDX} c{d} = 0;")
        else:
            lines += [f"const {IDX} c{d} = rest % {shape[d]};", f"rest /= {shape[d]};"]
    lines.append("(void)rest;")
    return lines


def _staged_rows(seg: SegmentPlan, kernel: ir.Kernel) -> list[str]:
    lines = []
    for s in seg.staged:
        ctype = scalar.CTYPE[kernel.node(s.tensor).type.dtype]
        qualifier = "" if s.output else "const "
        lines.append(f"{qualifier}{ctype}* {_staged_row(s)} = reinterpret_cast<{qualifier}{ctype}*>("
                     f"smem + {s.smem_offset} + tile_row * {s.pitch});")
    return lines


def _render_chunk(r: _Segment) -> list[str]:
    """The code of one chunk of lanes: a site's registers after another's, then the stores."""
    kernel, seg = r.plan.kernel, r.seg
    r.names, r.twins, r.early, r.windows = {}, {}, set(), set()
    widths = dict(zip((site.id for site in seg.segment.sites), seg.widths))
    chunk = []
    for site, width in zip(seg.segment.sites, seg.widths):
        node = kernel.node(site.node)
        site = replace(site, operands=tuple(r.names.get(o, o) for o in site.operands))
        if isinstance(node, (ir.Slice, ir.Broadcast)):  # views: their operand's registers hold their value
            r.names[site.id] = site.operands[0]
        elif site.id in r.early:
            continue
        elif site.id in r.gathers:
            for source in dict.fromkeys(source for source, _ in r.gathers[site.id]):
                if isinstance(source, Window):
                    if source.index not in r.windows:
                        r.windows.add(source.index)
                        chunk += _render_window(r, source)
                elif source > site.id and source not in r.early:  # its registers are needed now
                    r.early.add(source)
                    chunk += _render_load(r, r.site(source), kernel.node(r.site(source).node), widths[source])
            chunk += _gather(r, site)
        elif isinstance(node, ir.LOADS):
            chunk += _render_load(r, site, node, width)
        else:
            chunk += _RENDERERS[type(node)](r, site, node)
    for store, width in zip(seg.segment.stores, seg.store_widths):
        chunk += _render_store(r, store, width)
    return chunk


def _render_segment(index: int, plan: VectorPlan, seg: SegmentPlan, params: LaunchParams) -> list[str]:
    r = _Segment(plan, seg, params, gathers=gathers(plan, seg))
    body = _coordinates(seg, token_tile(plan, seg, params)) + _staged_rows(seg, plan.kernel)
    if seg.lane_steps > 1:  # tiled, its steps side by side
        body += _render_lane_steps(r)
    elif seg.tiled:  # one block per row and step: its first column, and the threads that take part
        steps = []  # threads past the busiest step returned early: only narrower steps need a guard
        for row in range(seg.rows_per_thread):
            r.row = row if seg.rows_per_thread > 1 else None
            for first, chunks in seg.steps:
                r.step_column = first * seg.chunk
                r.step_guard = f"col < {chunks * seg.chunk}" if chunks < seg.busy_threads else ""
                inner = ["  " + line for line in _render_chunk(r)]
                if r.step_guard:
                    inner = [f"  if ({r.step_guard}) {{", *("  " + line for line in inner), "  }"]
                steps += ["{", f"  const int c = {r.step_column};", *inner, "}"]
        body += r.prefetches + r.hoisted + steps
    else:
        chunk = _render_chunk(r)
        span = seg.columns(0)
        width = span.stop - span.start
        body += [
            "#pragma unroll",
            f"for (int c = G * {width}; c < (G + 1) * {width} && c < {seg.lanes}; c += {seg.chunk}) {{",
            *("  " + line for line in chunk),
            "}",
        ]
    head = (f"template <int G> PADVEC_FN void padvec_segment{index}(const padvec_args& args, const {IDX} group, "
            f"unsigned char* smem, const int tile_row, const int col) {{")
    return [head, *("  " + line for line in body), "}", ""]


def _render_lane_steps(r: _Segment) -> list[str]:
    """Steps side by side: lane ``col / chunk`` of team ``step`` runs the row's code at column
    ``own``, its step's first column, a run-time value (the pieces' selects are made per chunk, see
    ``_Segment.predicate_coord``). Where the lanes reload, the dispatcher passes the step (``tile_row``)."""
    seg = r.seg
    team_columns = seg.threads_per_row * seg.chunk
    step = "tile_row" if seg.reloads else f"(int)(threadIdx.x / {seg.threads_per_row}) % {seg.lane_steps}"
    head = [f"const int step = {step};", f"const int own = step * {team_columns};"]
    head += [f"const int own{d} = ((step + {d}) % {seg.lane_steps}) * {team_columns};"
             for d in range(1, seg.lane_steps)]
    r.lane_step = True
    rows = []
    for row in range(seg.rows_per_thread):
        r.row = row if seg.rows_per_thread > 1 else None
        rows += ["{", "  const int c = own;", *("  " + line for line in _render_chunk(r)), "}"]
    return head + _own_loads(r) + rows


def warp_tiles(seg: SegmentPlan, params: LaunchParams) -> bool:
    """Staged row mode in which each warp stages its own 32 rows (no warp splits a row)."""
    return params.warp_tiles and seg.in_shared_memory and seg.column_groups == 1


def _register_rows(index: int, seg: SegmentPlan, kernel: ir.Kernel, local: str, groups: int,
                   params: LaunchParams) -> list[str]:
    """The dispatcher's code for rows staged in registers: the thread's chunk of each staged input
    loaded (consecutive threads on consecutive vectors) for each of its ``repeats`` rows, then each
    row's chunk code, then its staged outputs' chunks stored."""
    k, repeats = seg.column_groups, seg.repeats
    passes = seg.tile_rows // repeats  # rows the block's threads cover at once
    size = sum(s.pitch for s in seg.staged)
    lines = [f"const int column_group = (int)(threadIdx.x % {k});",
             f"const {IDX} row0 = ({IDX}){local} * {seg.tile_rows} + threadIdx.x / {k};"]
    loads, runs, stores = [], [], []
    for r in range(repeats):
        group, regs = f"row0 + {r * passes}", f"regs{r}"
        lines.append(f"alignas(16) unsigned char {regs}[{size}];")
        for s in seg.staged:
            ctype = scalar.CTYPE[kernel.node(s.tensor).type.dtype]
            width = min(s.width, seg.chunk)
            row = f"reinterpret_cast<{ctype}*>({regs} + {s.smem_offset})"
            tensor = f"args.{'out' if s.output else 'in'}{s.index}"
            for j in range(0, seg.chunk, width):
                memory = f"{tensor} + ({s.base} + ({group}) * {s.row_stride} + column_group * {seg.chunk} + {j})"
                load = _load_op(params, s.row_stride != 0, kernel.node(s.tensor))
                access = (f"{_store_op(params)}<{width}>({memory}, {row} + {j});" if s.output
                          else f"{load}<{width}>({row} + {j}, {memory});")
                (stores if s.output else loads).append(f"if ({group} < {groups}) {access}")
        cases = [f"  case {g}: padvec_segment{index}<{g}>(args, {group}, {regs}, 0, 0); break;" for g in range(k)]
        runs += [f"if ({group} < {groups}) {{", "  switch (column_group) {", *("  " + c for c in cases), "  }", "}"]
    body = lines + loads + runs + stores
    return ["    if (phase == 1) {", *("      " + line for line in body), "    }"]


def _render_staging(index: int, seg: SegmentPlan, kernel: ir.Kernel, output: bool, params: LaunchParams) -> list[str]:
    """Copies the tile of staged rows in (phase 0) or out (phase 2), the block's or, with warp tiles,
    the warp's: consecutive threads on consecutive vectors, every vector of a thread loaded before
    any is stored, so that the loads of a tile are in flight together."""
    name = f"padvec_stage_{'out' if output else 'in'}{index}"
    body = []
    per_warp = warp_tiles(seg, params)
    tile_rows, threads = (WARP, WARP) if per_warp else (seg.tile_rows, params.block)  # a warp's tile: a row a lane
    thread = f"(int)(threadIdx.x % {WARP})" if per_warp else "(int)threadIdx.x"
    first = f"(int)(threadIdx.x / {WARP}) * {WARP} + " if per_warp else ""
    for s in (s for s in seg.staged if s.output == output):
        ctype = scalar.CTYPE[kernel.node(s.tensor).type.dtype]
        per_row = s.cols // s.width
        steps = -(-tile_rows * per_row // threads)
        smem = f"reinterpret_cast<{ctype}*>(smem + {s.smem_offset} + row * {s.pitch}) + vec * {s.width}"
        memory = f"args.{'out' if output else 'in'}{s.index} + ({s.base} + (first_row + row) * {s.row_stride} " \
                 f"+ vec * {s.width})"
        src, dst = (smem, memory) if output else (memory, smem)
        tmp = f"t{s.index}{'o' if output else 'i'}"
        position = [f"const int q = {thread} + {threads} * k;",
                    f"const int row = {first}q / {per_row}, vec = q % {per_row};"]
        load = "padvec_load" if output else _load_op(params, s.row_stride != 0, kernel.node(s.tensor))
        store = _store_op(params) if output else "padvec_store"
        body += [
            f"alignas(16) {ctype} {tmp}[{steps}][{s.width}];",
            "#pragma unroll",
            f"for (int k = 0; k < {steps}; ++k) {{",
            *("  " + line for line in position),
            f"  if (row < rows) {load}<{s.width}>({tmp}[k], {src});",
            "}",
            "#pragma unroll",
            f"for (int k = 0; k < {steps}; ++k) {{",
            *("  " + line for line in position),
            f"  if (row < rows) {store}<{s.width}>({dst}, {tmp}[k]);",
            "}",
        ]
    head = f"PADVEC_FN void {name}(const padvec_args& args, const {IDX} first_row, const int rows, " \
           f"unsigned char* smem) {{"
    return [head, *("  " + line for line in body), "}", ""]


def _args_struct(kernel: ir.Kernel) -> list[str]:
    lines = ["struct padvec_args {"]
    lines += [f"  const {scalar.CTYPE[i.type.dtype]}* __restrict__ in{i.index};" for i in kernel.inputs]
    lines += [
        f"  {scalar.CTYPE[kernel.node(o).type.dtype]}* __restrict__ out{k};" for k, o in enumerate(kernel.outputs)
    ]
    return [*lines, "};", ""]


def _planes(seg: SegmentPlan, launch: SegmentLaunch) -> tuple[int, int] | None:
    """Tiled rows taken several per thread along ``row_dim``: ``(planes, blocks per plane)``, where a
    plane is one coordinate of the dims up to ``row_dim`` (a group of heads) and each block's rows lie in
    one plane; None where they don't."""
    if seg.rows_per_thread == 1:
        return None
    shape = list(seg.segment.shape[:-1])
    shape[seg.row_dim] //= seg.rows_per_thread
    inner = math.prod(shape[seg.row_dim + 1:])
    if inner % seg.tile_rows or launch.groups % inner or launch.groups == inner:
        return None
    return launch.groups // inner, inner // seg.tile_rows


def _interleave(launches: tuple[SegmentLaunch, ...]) -> list[str]:
    """Blocks of the segments interleaved in proportion to their counts, so that segments over the same
    rows (the pieces of a cut row) run side by side: ``seg`` and ``local``, the block's segment and its
    index there. Segment ``s`` against the segments after it, Bresenham's way: of the first ``b + 1``
    blocks still unassigned, ``floor((b + 1) * n_s / rest)`` are segment ``s``'s."""
    lines = ["  unsigned int seg, local;", "  {", "    unsigned int b = block;"]
    rest = sum(launch.blocks for launch in launches)
    for s, launch in enumerate(launches[:-1]):
        n = launch.blocks
        lines += [
            f"    const unsigned int upto{s} = (unsigned int)((unsigned long long)(b + 1u) * {n}ull / {rest}ull);",
            f"    const unsigned int before{s} = (unsigned int)((unsigned long long)b * {n}ull / {rest}ull);",
            f"    if (upto{s} > before{s}) {{ seg = {s}u; local = before{s}; }} else {{",
            f"    b -= upto{s};",
        ]
        rest -= n
    lines += [f"    seg = {len(launches) - 1}u; local = b;", "    " + "}" * (len(launches) - 1), "  }"]
    return lines


def _dispatch(plan: VectorPlan, params: LaunchParams) -> list[str]:
    lines = [
        "PADVEC_FN void padvec_run(const int phase, const padvec_args& args, unsigned char* smem) {",
        "  const unsigned int block = blockIdx.x;",
    ]
    if params.interleave:
        lines += _interleave(params.segments)
    for i, (seg, launch) in enumerate(zip(plan.segments, params.segments)):
        keyword = "if" if i == 0 else "} else if"
        if params.interleave:
            lines.append(f"  {keyword} (seg == {i}u) {{")
            local = "local"
        else:
            lines.append(f"  {keyword} (block < {launch.first_block + launch.blocks}u) {{")
            local = f"(block - {launch.first_block}u)"
        if seg.reloads:  # lane ``i`` of the segment's grid: chunk ``i % team`` of row ``i / team``
            threads, team = seg.threads_per_row, seg.team
            lines += [
                f"    const {UIDX} i = ({UIDX}){local} * {params.block}u + threadIdx.x;",
                f"    const {IDX} group = ({IDX})(i / {team}u);",
                f"    const int col = (int)(i % {threads}u) * {seg.chunk};",
                f"    const int step = (int)(i / {threads}u % {seg.lane_steps}u);",
                f"    if (phase == 1 && group < {launch.groups}) padvec_segment{i}<0>(args, group, smem, step, col);",
            ]
        elif seg.tiled:
            threads, team, tile = seg.threads_per_row, seg.team, seg.tile_rows
            busy = f" && col < {seg.busy_threads * seg.chunk}" if seg.busy_threads < threads else ""
            if params.block % team:  # teams that do not divide the block: the threads past the last sit out
                busy += f" && threadIdx.x < {tile * team}u"
            planes = _planes(seg, launch) if params.plane_order else None
            if planes is None:
                lines.append(f"    const unsigned int tile_index = {local};")
            else:  # consecutive blocks take the same rows of each plane (they share cos and sin)
                n, per_plane = planes
                lines += [f"    const unsigned int b = {local};",
                          f"    const unsigned int tile_index = (b % {n}u) * {per_plane}u + b / {n}u;"]
            lines += [
                f"    const {IDX} group = ({IDX})tile_index * {tile} + threadIdx.x / {team};",
                f"    const int col = (int)(threadIdx.x % {threads}) * {seg.chunk};",
            ]
            lines.append(f"    if (phase == 1 && group < {launch.groups}{busy}) "
                         f"padvec_segment{i}<0>(args, group, smem, 0, col);")
        elif seg.in_registers:
            lines += _register_rows(i, seg, plan.kernel, local, launch.groups, params)
        elif seg.whole_rows:
            k, tile = seg.column_groups, seg.tile_rows
            lines += [
                f"    const {IDX} first_row = ({IDX}){local} * {tile};",
                f"    const int rows = {launch.groups} - first_row < {tile} ? (int)({launch.groups} - first_row)"
                f" : {tile};",
                f"    const int tile_row = (int)(threadIdx.x / 32 / {k}) * 32 + (int)(threadIdx.x % 32);",
                f"    const {IDX} group = first_row + tile_row;",
            ]
            if seg.staged:
                lines.append(f"    if (phase == 0) padvec_stage_in{i}(args, first_row, rows, smem);")
            lines.append("    if (phase == 1 && tile_row < rows) {")
            lines.append(f"      const int column_group = (int)(threadIdx.x / 32) % {k};")
            for g in range(k):
                lines.append(f"      if (column_group == {g}) padvec_segment{i}<{g}>(args, group, smem, tile_row, 0);")
            lines.append("    }")
            if seg.staged:
                lines.append(f"    if (phase == 2) padvec_stage_out{i}(args, first_row, rows, smem);")
        else:
            lines += [
                f"    const {IDX} group = ({IDX}){local} * {params.block} + threadIdx.x;",
                f"    if (phase == 1 && group < {launch.groups}) padvec_segment{i}<0>(args, group, smem, 0, 0);",
            ]
    if params.segments:
        lines.append("  }")
    return [*lines, "}", ""]


def _entry(plan: VectorPlan, params: LaunchParams) -> list[str]:
    bounds = f"{params.block}, {params.min_blocks}" if params.min_blocks else f"{params.block}"
    head = f"extern \"C\" __global__ void __launch_bounds__({bounds}) padvec_kernel(const padvec_args args) {{"
    if not params.smem_bytes:  # nothing staged: the arithmetic phase alone, no barriers
        return [head, "  padvec_run(1, args, nullptr);", "}"]
    staged = [seg for seg in plan.segments if seg.in_shared_memory]
    barrier = "__syncwarp" if all(warp_tiles(seg, params) for seg in staged) else "__syncthreads"
    return [
        head,
        f"  alignas(16) __shared__ unsigned char smem[{params.smem_bytes}];",
        "  padvec_run(0, args, smem);",
        f"  {barrier}();",
        "  padvec_run(1, args, smem);",
        f"  {barrier}();",
        "  padvec_run(2, args, smem);",
        "}",
    ]


def render(plan: VectorPlan, params: LaunchParams) -> str:
    """The kernel's source, without a prelude."""
    kernel = plan.kernel
    lines = [
        f"typedef {'int' if params.index_bits == 32 else 'long long'} {IDX};",
        f"typedef {'unsigned int' if params.index_bits == 32 else 'unsigned long long'} {UIDX};",
        f"#define PADVEC_SMEM_BYTES {max(params.smem_bytes, 16)}",
        "",
    ]
    lines += _args_struct(kernel)
    for i, seg in enumerate(plan.segments):
        lines += _render_segment(i, plan, seg, params)
        if seg.in_shared_memory:
            lines += _render_staging(i, seg, kernel, output=False, params=params)
            lines += _render_staging(i, seg, kernel, output=True, params=params)
    lines += _dispatch(plan, params)
    lines += _entry(plan, params)
    return "\n".join(lines) + "\n"
