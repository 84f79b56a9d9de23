"""``explain(jitted_fn)``: what padvec decided for each of its fusions in the last call."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from . import codegen, ir
from .fusion import Fallback, PadvecFusion, Specialization, WithPrologue, _sms, waves
from .schedule import LaunchParams
from .vectorize import Frontier, VectorPlan
from .vectorize.gathers import Window, gathers
from .vectorize.plan import step_distance


@dataclass(frozen=True)
class Access:
    """One way a tensor is touched by the kernel."""

    tensor: str  # its name in the trace
    role: str  # "input", "output" or the kind of resize node ("slice", "pad", "cat")
    via: str  # the resize node on the way from an output, for inputs
    projected_extent: int  # the contiguous inner elements the analysis projected onto it
    width: int  # elements per vector access
    access: str  # "cached": one global load shared by the aligned uses; "direct": a shifted global load;
    #              "exchanged": a chunk another lane of the warp loaded as its own (steps side by side);
    #              "reloaded": such a chunk loaded again by the lane (teams that do not fit a warp);
    #              "gathered": moved from the registers of a full load of the same input that holds its
    #              elements (GPT-J's strided halves of x, from x's own vector; see vectorize.gathers);
    #              "window": moved from a vector load the kernel adds, whose elements the lanes of this and
    #              of other narrow loads of the input read (GPT-J's backward's sin at even and odd features);
    #              "staged": rows copied between global and shared memory (or registers), coalesced (an
    #              input's one read, an output's one write); "shared": a read of a row staged in shared
    #              memory; "register": of a row staged in registers; "store"; "-" for resize nodes


@dataclass(frozen=True)
class Resources:
    """What the driver says of the kernel as loaded, for its launch's block (a GPU only)."""

    registers: int  # per thread
    local_bytes: int  # local memory per thread: spills, or arrays the compiler did not keep in registers
    blocks_per_sm: int  # blocks of the launch's size an SM holds at once
    waves: float  # the grid over what all SMs hold at once

    def __str__(self) -> str:
        spills = f", {self.local_bytes} bytes of local memory a thread" if self.local_bytes else ""
        blocks = f"{self.blocks_per_sm} block{'s' if self.blocks_per_sm != 1 else ''}"
        return (f"{self.registers} registers a thread{spills}, {blocks} per SM, "
                f"{self.waves:.2f} waves")


def _resources(spec: Specialization) -> Resources | None:
    """The driver's figures for ``spec``'s kernel; ``None`` in CPU emulation or where the driver can't say."""
    resources = getattr(spec.module, "resources", None)
    if resources is None or spec.device.type != "cuda" or not spec.params.grid:
        return None
    try:
        registers, local, blocks = resources(spec.params.block)
        return Resources(registers, local, blocks, waves(spec.params.grid, blocks, _sms(spec.device)))
    except Exception:  # a report never fails on what the driver would not say (nor on a kernel no SM holds)
        return None


@dataclass
class FusionReport:
    name: str
    trace: str  # "forward" or "backward"
    ops: list[str]
    accesses: list[Access]
    launch: LaunchParams | None
    source: str
    source_path: Path | None
    kernel: ir.Kernel
    widths: dict[str, int] = field(default_factory=dict)
    plan: VectorPlan | None = None  # the vector plan of the last call's specialization
    output_orders: dict[str, tuple[int, ...]] = field(default_factory=dict)  # outputs allocated permuted
    choice: str = ""  # where launch variants were measured: their times and the pick (see runtime.tune)
    replanned: str = ""  # where the kernel was planned again (one row a thread, wider teams), what that weighed
    prologue: str = ""  # symbols of the region run in PyTorch before the kernel (fusion.WithPrologue)
    copied: tuple[str, ...] = ()  # inputs copied row-major before the kernel (their views don't fold their strides)
    resources: Resources | None = None  # registers, local memory, blocks per SM and waves (a GPU only)

    @property
    def decisions(self) -> list[str]:
        """What the first call on a GPU measured or weighed for the kernel, and what of the region runs in
        PyTorch before it, a line each."""
        return ([f"launch variants: {self.choice}"] if self.choice else []) + (
            [f"planned again: {self.replanned}"] if self.replanned else []) + (
            [f"run in PyTorch before the kernel: {self.prologue}"] if self.prologue else []) + (
            [f"copied row-major before the kernel (views that don't fold their strides): {', '.join(self.copied)}"]
            if self.copied else [])

    @property
    def token_tiles(self) -> tuple[int, ...]:
        """Per segment: tokens a tile of its rows takes along each head in turn (0: rows in their own order)."""
        if self.plan is None or self.launch is None:
            return ()
        return tuple(codegen.token_tile(self.plan, seg, self.launch) for seg in self.plan.segments)

    @property
    def segments(self) -> list[str]:
        """How the threads cover each segment of the plan, a line each."""
        if self.plan is None:
            return []
        return [f"segment {i}: {seg.mapping}" + _tiles_said(tile)
                for i, (seg, tile) in enumerate(zip(self.plan.segments, self.token_tiles))]

    def __str__(self) -> str:
        head = [f"{self.name} ({self.trace}): {len(self.ops)} ops: {', '.join(self.ops)}"]
        if self.launch is None:
            return head[0] + f"\n  ({self.source or 'not run yet'})"
        head.append(f"  launch: {self.launch}")
        if self.resources is not None:
            head.append(f"  resources: {self.resources}")
        head += [f"  {line}" for line in self.decisions]
        head += [f"  {line}" for line in self.segments]
        head += [f"  output {name} allocated so that its permute {order} is contiguous"
                 for name, order in self.output_orders.items()]
        head.append(f"  source: {self.source_path}")
        cols = ("tensor", "role", "via", "projected", "width", "access")
        rows = [cols] + [
            (a.tensor, a.role, a.via, str(a.projected_extent), str(a.width), a.access) for a in self.accesses
        ]
        sizes = [max(len(r[i]) for r in rows) for i in range(len(cols))]
        table = ["  " + "  ".join(c.ljust(s) for c, s in zip(r, sizes)).rstrip() for r in rows]
        table.insert(1, "  " + "  ".join("-" * s for s in sizes))
        return "\n".join(head + table)


    def __repr__(self) -> str:
        return f"<FusionReport {self.name} ({self.trace}): {len(self.ops)} ops>"

    def _repr_markdown_(self) -> str:
        """The report as a notebook shows it: the launch, the plan per segment, the accesses as a table."""
        lines = [f"**{self.name}** ({self.trace}): {len(self.ops)} ops", ""]
        if self.launch is None:
            return "\n".join(lines + [self.source or "not run yet"])
        lines.append(f"launch: `{self.launch}`")
        if self.resources is not None:
            lines.append(f"resources: {self.resources}")
        lines += self.decisions
        lines += [f"- {line}" for line in self.segments]
        lines += ["", "| tensor | role | via | projected | width | access |", "|---|---|---|---|---|---|"]
        lines += [f"| {a.tensor} | {a.role} | {a.via} | {a.projected_extent} | {a.width} | {a.access} |"
                  for a in self.accesses]
        return "\n".join(lines)

    @property
    def kernel_source(self) -> str:
        """The generated kernel without the prelude every kernel shares."""
        start = self.source.find("typedef int padvec_idx")
        if start < 0:
            start = self.source.find("typedef long long padvec_idx")
        end = self.source.find("// thunder_padvec host launcher")
        return self.source[max(start, 0): end if end > 0 else None]


def _tiles_said(tile: int) -> str:
    """What a segment's line adds about the order of its rows (``codegen.token_tile``)."""
    if tile == 1:
        return ", rows a token of every head in turn (they lie apart along the tokens: the launch variant tokens first)"
    if tile:
        return f", rows in tiles of {tile} tokens across the heads (a row ends inside a 128-byte line)"
    return ""


def _extent(frontier: Frontier) -> int:
    return math.prod(e for _, e in frontier)


def _accesses(kernel: ir.Kernel, spec: Specialization) -> list[Access]:
    rows = []
    for seg in spec.plan.segments:
        gathered = gathers(spec.plan, seg)
        for staging in seg.staged:
            role = "output" if staging.output else "input"
            rows.append(Access(staging.tensor, role, "", staging.cols, staging.width, "staged"))
        for site, width in zip(seg.segment.sites, seg.widths):
            node = kernel.node(site.node)
            if isinstance(node, ir.LOADS):
                staged = "register" if seg.in_registers else "shared"
                kind = staged if seg.staging(node.name) else "cached" if site.aligned else "direct"
                if seg.lane_steps > 1 and kind == "direct" and step_distance(seg, site):
                    kind = "reloaded" if seg.reloads else "exchanged"
                if site.id in gathered:
                    kind = "window" if any(isinstance(s, Window) for s, _ in gathered[site.id]) else "gathered"
                rows.append(Access(node.name, "input", site.via or "", _extent(site.frontier), width, kind))
            elif isinstance(node, ir.RESIZE_NODES):
                role = type(node).__name__.lower()
                rows.append(Access(node.name, role, "", _extent(site.frontier), width, "-"))
        for store, width in zip(seg.segment.stores, seg.store_widths):
            if not seg.staging(store.output, output=True):
                rows.append(Access(store.output, "output", "", _extent(store.frontier), width, "store"))
    return rows


def _widths(accesses: list[Access]) -> dict[str, int]:
    """Per tensor: the global access that serves its aligned uses (a cached load, a staged copy)
    where it has one, else its narrowest access."""
    narrowest: dict[str, int] = {}
    serving: dict[str, int] = {}
    for a in accesses:
        narrowest[a.tensor] = min(narrowest.get(a.tensor, a.width), a.width)
        if a.access in ("cached", "staged"):
            serving[a.tensor] = min(serving.get(a.tensor, a.width), a.width)
    return {**narrowest, **serving}


def report(fusion: PadvecFusion, bsym, trace: str) -> FusionReport:
    spec = fusion.last
    ops = [b.sym.name for b in bsym.subsymbols]
    outer = (bsym._call_ctx or {}).get(bsym.sym.name)
    prologue = ", ".join(outer.ops) if isinstance(outer, WithPrologue) else ""
    if spec is None or isinstance(spec, Fallback):
        note = "" if spec is None else f"runs in PyTorch: {spec.error}"
        return FusionReport(fusion.name, trace, ops, [], None, note, None, fusion.kernel)
    accesses = _accesses(fusion.kernel, spec)
    orders = {out: order for out, order in zip(fusion.kernel.outputs, fusion.output_orders) if order is not None}
    return FusionReport(
        fusion.name, trace, ops, accesses, spec.params, spec.source, spec.source_path, fusion.kernel, _widths(accesses),
        spec.plan, orders, str(spec.choice or ""), spec.replanned, prologue,
        tuple(fusion.kernel.inputs[i].name for i in spec.copied), _resources(spec),
    )


def fusions(trace, prologues: bool = True) -> list[tuple[PadvecFusion, object]]:
    """The padvec fusions of an execution trace, with their bound symbols; with ``prologues``, also
    those behind a PyTorch prologue (:class:`~thunder_padvec.fusion.WithPrologue`: the bound symbol's
    inputs and outputs are then not the kernel's)."""
    found = []
    for bsym in trace.bound_symbols:
        fn = (bsym._call_ctx or {}).get(bsym.sym.name) if bsym.sym.is_fusion else None
        if prologues and isinstance(fn, WithPrologue):
            fn = fn.fusion
        if isinstance(fn, PadvecFusion):
            found.append((fn, bsym))
    return found


def explain(jitted_fn) -> list[FusionReport]:
    """One report per padvec fusion of ``jitted_fn``'s last call: forward, then backward."""
    import thunder

    reports = []
    for label, getter in (("forward", thunder.last_traces), ("backward", thunder.last_backward_traces)):
        try:
            traces = getter(jitted_fn)
        except Exception:  # no call yet, or no backward
            traces = None
        if traces:
            reports += [report(fn, bsym, label) for fn, bsym in fusions(traces[-1])]
    return reports
