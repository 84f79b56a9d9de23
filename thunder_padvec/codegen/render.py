"""Renders a vector plan and its launch parameters as one CUDA C++ kernel.

The walker visits each segment's sites in topological order; every site becomes a register
array of ``lanes`` values (``s<id>``), filled by a small render function for its kind of node.
Input sites are loaded with their planned vector width under the site's box guard; pads and
cats select lane by lane; slices and broadcasts only move indices, so they emit no code.
The source names nothing from the trace, so structurally equal regions share binaries.
"""

from __future__ import annotations

import math
from dataclasses import replace

from .. import ir
from ..schedule import LaunchParams
from ..vectorize import Site, SegmentPlan, Store, VectorPlan
from . import scalar

IDX = "padvec_idx"


class _Segment:
    """Rendering state of one segment: the plan, and C++ expressions for coordinates."""

    def __init__(self, plan: VectorPlan, seg: SegmentPlan):
        self.kernel, self.layouts, self.seg = plan.kernel, plan.layouts, seg
        self.shape = seg.segment.shape
        self.sites = seg.segment.sites

    def lane_coord(self, ref_dim: int) -> str:
        """The reference coordinate along ``ref_dim`` of lane ``l`` of this thread."""
        inner = math.prod(self.shape[ref_dim + 1:])
        if inner >= self.seg.lanes:
            return f"c{ref_dim}"
        step = "l" if inner == 1 else f"(l / {inner})"
        if self.seg.lanes // inner > self.shape[ref_dim]:
            step = f"({step} % {self.shape[ref_dim]})"
        return f"(c{ref_dim} + {step})"

    def node_coord(self, site: Site, dim: int) -> str | int:
        """The node's coordinate along ``dim`` at lane ``l``; an int where it is constant."""
        ref, offset = site.index_map[dim]
        if ref is None:
            return offset
        return self.lane_coord(ref) + (f" + {offset}" if offset else "")

    def box_guard(self, box) -> str:
        terms = []
        for ref_dim, (lo, hi) in enumerate(box):
            coord = self.lane_coord(ref_dim)
            if lo > 0:
                terms.append(f"{coord} >= {lo}")
            if hi < self.shape[ref_dim]:
                terms.append(f"{coord} < {hi}")
        return " && ".join(terms) or "true"

    def dtype(self, site_id: int) -> ir.DType:
        return self.kernel.node(self.sites[site_id].node).type.dtype


def _lanes_loop(lanes: int, body: str, step: int = 1) -> list[str]:
    return [
        "#pragma unroll",
        f"for (int l = 0; l < {lanes}; l += {step}) {{",
        f"  {body}",
        "}",
    ]


def _declare(site: Site, node: ir.Node, lanes: int) -> str:
    return f"alignas(16) {scalar.CTYPE[node.type.dtype]} s{site.id}[{lanes}];"


# --------------------------------------------------------------------------------------------
# One render function per kind of node
# --------------------------------------------------------------------------------------------


def _render_input(r: _Segment, site: Site, node: ir.Input, width: int) -> list[str]:
    layout = r.layouts[node.index]
    terms = []
    for dim, (size, stride) in enumerate(zip(node.type.shape, layout.strides)):
        coord = r.node_coord(site, dim)
        if size > 1 and stride and coord != 0:
            terms.append(f"({coord}) * {stride}")
    address = f"args.in{node.index} + ({' + '.join(terms) or '0'})"
    guard = r.box_guard(site.box)
    load = f"padvec_load<{width}>(&s{site.id}[l], {address});"
    body = load if guard == "true" else f"if ({guard}) {load} else padvec_fill_zero<{width}>(&s{site.id}[l]);"
    return [_declare(site, node, r.seg.lanes), *_lanes_loop(r.seg.lanes, body, width)]


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
        scalar.literal(n, want) if src is None else scalar.to_compute(f"s{o}[l]", src, want)
        for n, o, src, want in zip(node.operands, site.operands, sources, reads)
    ]
    value = scalar.from_compute(scalar.math_expr(node.op, args, compute), result, node.type.dtype)
    return [_declare(site, node, r.seg.lanes), *_lanes_loop(r.seg.lanes, f"s{site.id}[l] = {value};")]


def _render_cast(r: _Segment, site: Site, node: ir.Cast) -> list[str]:
    source = r.dtype(site.operands[0])
    value = scalar.cast(f"s{site.operands[0]}[l]", source, node.type.dtype)
    return [_declare(site, node, r.seg.lanes), *_lanes_loop(r.seg.lanes, f"s{site.id}[l] = {value};")]


def _render_pad(r: _Segment, site: Site, node: ir.Pad) -> list[str]:
    fill = scalar.literal(node.value, node.type.dtype)
    operand = site.operands[0]
    terms = []
    for dim, (lo, hi) in enumerate(node.widths):
        coord = r.node_coord(site, dim)
        size_in = node.type.shape[dim] - lo - hi
        if isinstance(coord, int):
            if not 0 <= coord - lo < size_in:
                operand = None
            continue
        if lo > 0:
            terms.append(f"({coord}) >= {lo}")
        if hi > 0:
            terms.append(f"({coord}) < {lo + size_in}")
    if operand is None:
        value = fill
    else:
        value = f"({' && '.join(terms)}) ? s{operand}[l] : {fill}" if terms else f"s{operand}[l]"
    return [_declare(site, node, r.seg.lanes), *_lanes_loop(r.seg.lanes, f"s{site.id}[l] = {value};")]


def _render_cat(r: _Segment, site: Site, node: ir.Cat) -> list[str]:
    coord = r.node_coord(site, node.dim)
    live, end = [], 0
    for operand, piece in zip(site.operands, node.operands):
        end += r.kernel.node(piece).type.shape[node.dim]
        if operand is not None:
            live.append((operand, end))
    value = f"s{live[-1][0]}[l]"
    for operand, piece_end in reversed(live[:-1]):
        value = f"({coord}) < {piece_end} ? s{operand}[l] : ({value})"
    return [_declare(site, node, r.seg.lanes), *_lanes_loop(r.seg.lanes, f"s{site.id}[l] = {value};")]


def _render_store(r: _Segment, store: Store, width: int) -> list[str]:
    node = r.kernel.node(store.output)
    shape = node.type.shape
    if shape == r.shape and not any(store.offsets):
        address = "base + l"
    else:
        strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]
        terms = [
            f"({r.lane_coord(d)}{f' + {p}' if p else ''}) * {stride}"
            for d, (p, stride, size) in enumerate(zip(store.offsets, strides, shape))
            if size > 1
        ]
        address = " + ".join(terms) or "0"
    guard = r.box_guard(store.box)
    write = f"padvec_store<{width}>(args.out{store.output_index} + ({address}), &s{store.site}[l]);"
    return _lanes_loop(r.seg.lanes, write if guard == "true" else f"if ({guard}) {write}", width)


_RENDERERS = {
    ir.Elementwise: _render_elementwise,
    ir.Cast: _render_cast,
    ir.Pad: _render_pad,
    ir.Cat: _render_cat,
}


# --------------------------------------------------------------------------------------------
# The walker
# --------------------------------------------------------------------------------------------


def _coordinates(shape: tuple[int, ...], lanes: int) -> list[str]:
    lines = [f"const {IDX} base = group * {lanes};", f"{IDX} rest = base;"]
    for d in reversed(range(len(shape))):
        if d == 0:
            lines.append(f"const {IDX} c0 = rest;")
        elif shape[d] == 1:
            lines.append(f"const {IDX} c{d} = 0;")
        else:
            lines += [f"const {IDX} c{d} = rest % {shape[d]};", f"rest /= {shape[d]};"]
    lines.append("(void)rest;")
    return lines


def _render_segment(index: int, plan: VectorPlan, seg: SegmentPlan) -> list[str]:
    kernel = plan.kernel
    r = _Segment(plan, seg)
    names: dict[int, int] = {}  # site id -> id of the site whose registers hold its value
    body = _coordinates(seg.segment.shape, seg.lanes)
    for site, width in zip(seg.segment.sites, seg.widths):
        node = kernel.node(site.node)
        site = replace(site, operands=tuple(names.get(o, o) for o in site.operands))
        if isinstance(node, (ir.Slice, ir.Broadcast)):  # views: their operand's registers hold their value
            names[site.id] = site.operands[0]
        elif isinstance(node, ir.Input):
            body += _render_input(r, site, node, width)
        else:
            body += _RENDERERS[type(node)](r, site, node)
    for store, width in zip(seg.segment.stores, seg.store_widths):
        store = replace(store, site=names.get(store.site, store.site))
        body += _render_store(r, store, width)
    head = f"PADVEC_FN void padvec_segment{index}(const padvec_args& args, const {IDX} group) {{"
    return [head, *("  " + line for line in body), "}", ""]


def _args_struct(kernel: ir.Kernel) -> list[str]:
    lines = ["struct padvec_args {"]
    lines += [f"  const {scalar.CTYPE[i.type.dtype]}* __restrict__ in{i.index};" for i in kernel.inputs]
    lines += [
        f"  {scalar.CTYPE[kernel.node(o).type.dtype]}* __restrict__ out{k};" for k, o in enumerate(kernel.outputs)
    ]
    return [*lines, "};", ""]


def _entry(params: LaunchParams) -> list[str]:
    lines = [
        f"extern \"C\" __global__ void __launch_bounds__({params.block}) padvec_kernel(const padvec_args args) {{",
        "  const unsigned int block = blockIdx.x;",
    ]
    for i, seg in enumerate(params.segments):
        keyword = "if" if i == 0 else "} else if"
        lines += [
            f"  {keyword} (block < {seg.first_block + seg.blocks}u) {{",
            f"    const {IDX} group = ({IDX})(block - {seg.first_block}u) * {params.block} + threadIdx.x;",
            f"    if (group < {seg.groups}) padvec_segment{i}(args, group);",
        ]
    if params.segments:
        lines.append("  }")
    return [*lines, "}"]


def render(plan: VectorPlan, params: LaunchParams) -> str:
    """The kernel's source, without a prelude."""
    kernel = plan.kernel
    lines = [f"typedef {'int' if params.index_bits == 32 else 'long long'} {IDX};", ""]
    lines += _args_struct(kernel)
    for i, seg in enumerate(plan.segments):
        lines += _render_segment(i, plan, seg)
    lines += _entry(params)
    return "\n".join(lines) + "\n"
