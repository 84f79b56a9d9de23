"""The callable behind a ``padvec<N>`` bound symbol: one region, specialized per runtime layout.

A call allocates the outputs, looks its layout up (the device, each input's strides and pointer
alignment, each output's alignment) and launches the kernel built for it. The first call with a
layout runs the pipeline once: vector plan -> launch parameters -> source -> binary (through the
kernel cache) -> loaded module. A misaligned view thus gets a variant of its own with narrower
vectors, never an error.
"""

from __future__ import annotations

import functools
import logging
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from . import codegen, ir, knobs, vectorize
from .errors import InternalError, LaunchError, PadvecError
from .reshapes import merge_groups
from .runtime import cache, tune
from .runtime.launch import ArgPack
from .schedule import TUNING, LaunchParams, fit_blocks, schedule
from .vectorize.views import fold
from .vectorize.views import steps as slice_steps

log = logging.getLogger("thunder_padvec")

ONE_ROW_BLOCKS = 2  # one row per thread replaces several where it holds at least this many times the blocks per SM
FULL_WAVES = 0.75  # a launch of more than one wave whose waves are less full than this on average ...
WAVE_GAIN = 0.1  # ... takes twice the threads a row where that fills its waves this much more (_with_wider_teams)

TORCH_DTYPES = {
    ir.DType.float64: torch.float64,
    ir.DType.float32: torch.float32,
    ir.DType.float16: torch.float16,
    ir.DType.bfloat16: torch.bfloat16,
    ir.DType.int64: torch.int64,
    ir.DType.int32: torch.int32,
    ir.DType.bool: torch.bool,
}


def alignment(pointer: int) -> int:
    """The largest power of two, up to 16, that divides ``pointer`` (in bytes)."""
    return _ALIGNMENT[pointer & 15]


_ALIGNMENT = [16, 1, 2, 1, 4, 1, 2, 1, 8, 1, 2, 1, 4, 1, 2, 1]


def _current_stream(device: torch.device) -> int:
    return torch.cuda.current_stream(device).cuda_stream


if hasattr(torch._C, "_cuda_getCurrentRawStream"):  # the same handle without a Stream object per call

    def _current_stream(device: torch.device) -> int:  # noqa: F811
        return torch._C._cuda_getCurrentRawStream(device.index)


def _allocator():
    """``(empty_strided on the current CUDA device, the current device's index)`` from PyTorch's C++
    side where this build has both (the allocation TorchInductor's generated code makes: no argument
    parsing, about half of ``torch.empty_strided``'s host time), else None."""
    try:
        return torch._C._dynamo.guards._empty_strided_cuda, torch._C._cuda_getDevice
    except AttributeError:
        return None


_FAST_EMPTY = _allocator()


@functools.cache
def _cuda_target(device: int) -> cache.Target:
    from .runtime import nvrtc

    major, minor = torch.cuda.get_device_capability(device)
    arch = f"sm_{major}{minor}"
    identity = f"{arch} nvrtc {nvrtc.version()} {' '.join(nvrtc.OPTIONS)}"
    return cache.Target("cubin", identity, lambda src, path: nvrtc.compile_cubin(src, arch, path), ".cu")


def _prefetch(sources: list[str], device: int) -> None:
    """Starts compiling ``sources`` for ``device``, a thread each (``cache.prefetch``); a fault here
    only loses the head start: the build that needs a source compiles it (and raises) itself."""
    try:
        cache.prefetch(sources, _cuda_target(device))
    except Exception as err:
        log.debug("no compiles ahead of the builds: %s", err)


@functools.cache
def _host_target() -> cache.Target:
    from . import knobs
    from .runtime import host

    identity = f"{host.compiler_version(knobs.host_cxx())} {' '.join(host.FLAGS)}"
    return cache.Target("host", identity, host.compile_shared_object, ".cpp")


def _fit_registers(plan: vectorize.VectorPlan, params: LaunchParams, module, device: int):
    """``(params, source, path, module)`` of the kernel built again with ``__launch_bounds__`` asking
    for one more block per SM, where a few registers stand in the way (``schedule.fit_blocks``) and the
    new build gets there without spilling; None otherwise."""
    from .runtime.launch import CudaModule

    registers, local, blocks = module.resources(params.block)
    sm = torch.cuda.get_device_properties(device)
    want = fit_blocks(registers, params.block, blocks, sm.regs_per_multiprocessor, sm.max_threads_per_multi_processor,
                      params.register_slack)
    if not want:
        return None
    fitted = replace(params, min_blocks=want)
    source = codegen.device_source(codegen.render(plan, fitted))
    binary, path = cache.binary(source, _cuda_target(device))
    candidate = CudaModule(binary, device)
    _, fitted_local, fitted_blocks = candidate.resources(params.block)
    if fitted_blocks <= blocks or fitted_local > local:
        log.debug("%s: %d registers, %d blocks per SM; no better with __launch_bounds__", path, registers, blocks)
        return None
    return fitted, source, path, candidate


def _few_blocks(build, device: int) -> bool:
    """Whether a build keeps fewer than half the threads an SM holds: the occupancy below which a
    memory-bound kernel's registers are worth weighing (``_without_word_pairs``)."""
    params, _, _, module = build
    _, _, blocks = module.resources(params.block)
    return blocks * params.block < torch.cuda.get_device_properties(device).max_threads_per_multi_processor // 2


def _without_word_pairs(plan: vectorize.VectorPlan, build, load):
    """The kernel built with 16-bit lanes widened and stored one at a time, unless that costs blocks
    per SM or spills more than ``build``, its word-pair build. Word pairs cut instructions (the RoPE
    kernels' by 9 to 24% with NVRTC for sm_90) but hold a pair's word beside its lanes: in the
    Llama-class RoPE backward, 84 to 94 registers instead of 73, 2 blocks of 256 per SM instead of 3
    (or 3 squeezed by ``__launch_bounds__``). On the H200 (``explore-arith.log``) the Llama-class
    forward and backward ran 0.4 to 1.2% slower with word pairs, Mistral-7B's qkv form 4.6% (90.5 us
    against 86.5), while the light forward kernels (at most 63 registers either way) ran up to 4%
    faster (pythia-160m's 7.9 us against 8.2, Phi-3-mini's 29.0 against 29.5): where a kernel is this heavy,
    its registers, not its instructions, set the pace, so a tie in blocks goes to the lighter build."""
    params, source, _, module = build
    plain = replace(params, word_pairs=False)
    plain_source = codegen.device_source(codegen.render(plan, plain))
    if plain_source == source:  # nothing widened or stored in pairs
        return build
    other = load(plan, plain, plain_source)
    _, local, blocks = module.resources(params.block)
    _, other_local, other_blocks = other[3].resources(params.block)
    return other if other_blocks >= blocks and other_local <= local else build


def _replanned_launch(plan: vectorize.VectorPlan, variant: LaunchParams) -> LaunchParams:
    """The launch of a plan made again, with the hints and the row order (tokens first) of ``variant``
    carried over, not what the fit of the first plan's registers made of them (its __launch_bounds__; its
    word pairs, which the new build weighs again for itself)."""
    return replace(schedule(plan), keep_hints=variant.keep_hints, keep_once=variant.keep_once,
                   word_pairs=variant.word_pairs, tokens_first=variant.tokens_first, prefetch=variant.prefetch)


def _load_plan(plan: vectorize.VectorPlan, params: LaunchParams, load):
    """``(build, (registers, local bytes, blocks per SM))``: ``plan`` under ``params``, built by ``load``."""
    build = load(plan, params, codegen.device_source(codegen.render(plan, params)))
    return build, build[3].resources(build[0].block)


def _with_one_row(plan: vectorize.VectorPlan, build, one_row: Callable[[], vectorize.VectorPlan], load,
                  variant: LaunchParams):
    """``(plan, build, note)``: ``plan``, its build and "", or the plan again with one row per tiled thread,
    its build (with the hints of ``variant``, the launch asked for before ``build`` fitted it) and what was
    weighed, where ``plan``'s threads take several rows and one row at least ``ONE_ROW_BLOCKS`` times the
    blocks per SM, without spilling more. Several rows share their loads of cos and sin, but hold the
    registers of each row's other loads. On the H200 (``benchmarks/results/2026-12-04-one-row/``), the
    qkv backward of Llama-2-7b (98 registers, 2 blocks of 256 per SM, with 4 rows; 40 and 6 with one)
    ran 6.6% faster with one row, Phi-3-mini's (90 and 2; 39 and 6) 3.7%; the grouped-query ones of
    Llama-3-8B and Mistral-7B (93 and 2; 80 and 3: their k piece's registers stay) 3.5-3.9% slower."""
    rows = max((seg.rows_per_thread for seg in plan.segments), default=1)
    if rows == 1:
        return plan, build, ""
    params, _, _, module = build
    single = one_row()
    other, (other_registers, other_local, other_blocks) = _load_plan(single, _replanned_launch(single, variant), load)
    registers, local, blocks = module.resources(params.block)
    if other_blocks < ONE_ROW_BLOCKS * blocks or other_local > local:
        return plan, build, ""
    return single, other, (f"one row a thread: {other_registers} registers, {other_blocks} blocks per SM; with "
                           f"{rows} rows a thread, {registers} registers, {blocks} blocks per SM")


def _sms(device: int) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count


def waves(grid: int, blocks_per_sm: int, sms: int) -> float:
    """The waves of a launch of ``grid`` blocks, ``blocks_per_sm`` on each of ``sms`` SMs."""
    return grid / (blocks_per_sm * sms)


def _fullness(launch_waves: float) -> float:
    """How full a launch's waves are on average: 1.0 where it takes whole waves, 0.58 for 1.16 waves."""
    return launch_waves / math.ceil(launch_waves)


def _with_wider_teams(plan: vectorize.VectorPlan, build, wider: Callable[[], vectorize.VectorPlan], load,
                      variant: LaunchParams, sms: int):
    """``(plan, build, note)``: ``plan``, its build and "", or the plan again with twice the threads a row
    (``vectorize.wider_teams``: twice the blocks for the same rows), its build (with the hints of
    ``variant``, as ``_with_one_row``) and what was weighed, where ``plan``'s launch takes more than one
    wave of the GPU's ``sms`` SMs but fills its waves less than ``FULL_WAVES`` on average (a last wave
    mostly idle), its threads take one row each, and the wider teams fill theirs at least ``WAVE_GAIN``
    more without spilling more. On the H200 (``benchmarks/results/2026-12-04-wider-teams/``), pythia-160m's
    qkv forward at batch 2 (768 blocks, 5 per SM: 1.16 waves; teams of 4 threads) ran in 11.9-12.0 µs
    with teams of 8 (2.33 waves) against 13.4-13.5; teams of 8 where the launch fits one wave were
    slower (its batch 1, 0.58 waves, 8.3-8.5 µs against 8.0-8.1; its RoPE forward at batch 2, 0.73
    waves, 8.2 against 7.5-7.6)."""
    params, _, _, module = build
    _, local, blocks = module.resources(params.block)
    if not blocks or not sms:  # no occupancy figure to weigh
        return plan, build, ""
    before = waves(params.grid, blocks, sms)
    if before <= 1 or _fullness(before) >= FULL_WAVES or any(seg.rows_per_thread > 1 for seg in plan.segments):
        return plan, build, ""
    wide = wider()
    wide_params = _replanned_launch(wide, variant)
    if wide_params.grid <= params.grid:  # no team to widen
        return plan, build, ""
    other, (_, other_local, other_blocks) = _load_plan(wide, wide_params, load)
    if not other_blocks:
        return plan, build, ""
    after = waves(other[0].grid, other_blocks, sms)
    if _fullness(after) < _fullness(before) + WAVE_GAIN or other_local > local:
        return plan, build, ""
    return wide, other, (f"twice the threads a row: {other[0].grid} blocks, {other_blocks} per SM, {after:.2f} "
                         f"waves; as planned, {params.grid} blocks, {blocks} per SM, {before:.2f} waves")


def _distinct(items: list, key: Callable) -> list:
    """``items`` without those whose ``key`` an earlier one has (launch variants the kernel does not tell apart)."""
    seen, kept = set(), []
    for item in items:
        if key(item) not in seen:
            seen.add(key(item))
            kept.append(item)
    return kept


def _reloaded_option(plan, reloaded: Callable[[], vectorize.VectorPlan]) -> list:
    """``[(name, plan, params, source)]`` of the plan whose steps side by side take one chunk of one row a
    lane (``vectorize.plan``'s ``all_reloads``), where that changes a segment of ``plan`` that exchanged its
    chunks in the warp or took its steps in turn; none otherwise, or where it can't be planned or rendered
    (an optional variant: the default stands). It too tokens first (``tune.tokens_first``), where the order
    changes the kernel: on an H100 the grouped-query qkv forwards with both 0.8-1.5% faster than the
    default's best variant, with either alone no faster (``benchmarks/NOTES.md``)."""
    try:
        other = reloaded()
        if len(other.segments) != len(plan.segments) or not any(
                o.reloads and not s.reloads for s, o in zip(plan.segments, other.segments)):
            return []
        params = schedule(other)
        name = f"{'keep' if params.keep_hints else 'plain'}, a chunk a lane"
        return [(n, other, p, codegen.device_source(codegen.render(other, p)))
                for n, p in [(name, params)] + tune.tokens_first(name, params)]
    except Exception as err:
        log.debug("no plan whose lanes reload: %s", err)
        return []


@dataclass
class Specialization:
    """One layout's kernel, loaded and ready to launch."""

    plan: vectorize.VectorPlan
    params: LaunchParams
    source: str
    source_path: Path | None
    device: torch.device
    module: object
    pack: ArgPack
    choice: tune.Choice | None = None  # where launch variants were measured (or a decision read back)
    replanned: str = ""  # where the kernel was planned again (one row a thread, wider teams), what that weighed
    copied: tuple[int, ...] = ()  # inputs copied row-major before each launch (``PadvecFusion._unfolded``)

    def run(self, args, outputs, pointers: list[int]) -> list[torch.Tensor]:
        grid, pack = self.params.grid, self.pack
        if not grid:
            return outputs
        if self.copied:
            args = _row_major(args, self.copied)
            pointers = [t.data_ptr() for t in (*args, *outputs)]
        with pack.lock:
            pack.values[: len(pointers)] = pointers
            if self.device.index is not None:
                self.module.launch(grid, self.params.block, pack.params_address, _current_stream(self.device))
            else:
                from .runtime.host import AccessCheck

                check = AccessCheck(args, outputs)
                self.module.launch(grid, self.params.block, pack.address, check)
                fault = check.fault()
                if fault:  # emulation checks every access: on a GPU this would go unseen, or be a race
                    raise InternalError(f"an internal error: the kernel {fault} (CPU emulation); source dumped to "
                                        f"{self.source_path}; please report it with the region's trace")
        return outputs


def _row_major(args, positions: tuple[int, ...]) -> list[torch.Tensor]:
    """``args`` with those at ``positions`` copied row-major."""
    return [a.contiguous() if i in positions else a for i, a in enumerate(args)]


@dataclass
class Fallback:
    """A layout whose kernel could not be built: the region runs in PyTorch instead."""

    error: PadvecError
    run_in_pytorch: Callable

    def run(self, args, outputs, pointers) -> list[torch.Tensor]:
        return list(self.run_in_pytorch(*args))


@dataclass
class WithPrologue:
    """A padvec fusion whose region begins with ops a kernel can't take, run in PyTorch first (their
    results join the kernel's inputs). Another executor's fusion pass can put them there: Thunder's
    ``rematerialize`` runs over the fusions of every executor, and moves a producer fusion's ops into a
    padvec fusion that consumes them where that saves memory traffic. Sources are ``(where, index)``:
    ``where`` is "arg" (the call's arguments), "prologue" or "fusion" (their results)."""

    prologue: Callable
    prologue_args: tuple[int, ...]
    fusion: PadvecFusion
    fusion_args: tuple[tuple[str, int], ...]
    results: tuple[tuple[str, int], ...]
    ops: tuple[str, ...] = ()  # the prologue's symbols, by name

    def __call__(self, *args: torch.Tensor) -> list[torch.Tensor]:
        values = {"arg": args, "prologue": list(self.prologue(*(args[i] for i in self.prologue_args)))}
        values["fusion"] = self.fusion(*(values[where][i] for where, i in self.fusion_args))
        return [values[where][i] for where, i in self.results]


def apply_chain(t: torch.Tensor, chain: tuple) -> torch.Tensor:
    """A view chain run by PyTorch: views where PyTorch makes views (a reshape may copy), as in eager."""
    for op in chain:
        if op[0] == "reshape":
            t = t.reshape(op[1])
        elif op[0] == "permute":
            t = t.permute(op[1])
        elif op[0] == "slice":
            t = t[tuple(slice(lo, hi, step) for lo, hi, step in zip(op[1], op[2], slice_steps(op)))]
        else:  # expand: operand dim i becomes dim broadcast_dims[i]
            shape, dims = op[1], op[2]
            placed = [1] * len(shape)
            for i, d in enumerate(dims):
                placed[d] = t.shape[i]
            t = t.reshape(placed).expand(shape)
    return t


def strides_for_order(shape, order: tuple[int, ...] | None) -> tuple[int, ...]:
    """Strides of a tensor of ``shape`` whose dims, taken in ``order``, are row-major (None: row-major)."""
    order = order or tuple(range(len(shape)))
    placed = vectorize.contiguous_strides(tuple(shape[d] for d in order))
    strides = [0] * len(shape)
    for position, d in enumerate(order):
        strides[d] = placed[position]
    return tuple(strides)


class PadvecFusion:
    """``fallback`` builds a PyTorch callable of the region, used where a kernel can't be built."""

    def __init__(self, kernel: ir.Kernel, name: str, fallback: Callable[[], Callable] | None = None,
                 views: tuple = (), shapes: tuple[tuple[int, ...], ...] | None = None):
        self.kernel, self.name, self._fallback = kernel, name, fallback
        # outputs that are layout ops of inputs, (position, input position, chain), or of another output,
        # (position, ("output", kernel output index), chain)
        self.views = views
        # ``shapes``: the region's shape of each kernel output, where the kernel computes it unmerged (see
        # ``reshapes``); it is allocated in the region's shape and written through a view in the kernel's
        computed = [kernel.node(o).type.shape for o in kernel.outputs]
        shapes = tuple(shapes) if shapes is not None else tuple(computed)
        if len(shapes) != len(computed) or any(  # (an empty output is any empty shape: nothing is written)
                tuple(s) != c and merge_groups(c, tuple(s)) is None and not math.prod(s) == math.prod(c) == 0
                for c, s in zip(computed, shapes)):
            raise ValueError(f"{name}: outputs of shapes {shapes} are not merges of the kernel's {computed}")
        self._merged = tuple(c if tuple(s) != c else None for c, s in zip(computed, shapes))
        self._outputs = [(tuple(shape), TORCH_DTYPES[kernel.node(o).type.dtype])
                         for o, shape in zip(kernel.outputs, shapes)]
        self.output_orders: tuple[tuple[int, ...] | None, ...] = (None,) * len(self._outputs)
        # per output: shape, strides and dtype to allocate (``torch.empty_strided``: the cheapest allocation)
        self._allocations = [(tuple(shape), strides_for_order(shape, None), dtype) for shape, dtype in self._outputs]
        self._specializations: dict[tuple, Specialization | Fallback] = {}
        self.last: Specialization | Fallback | None = None
        self._poison = knobs.poison_outputs()

    def __repr__(self) -> str:
        return f"PadvecFusion({self.name})"

    @functools.cached_property
    def projection(self) -> vectorize.Projection:
        return vectorize.project(self.kernel)

    def set_output_orders(self, orders: tuple[tuple[int, ...] | None, ...]) -> None:
        """Allocates kernel output ``k`` so that ``out.permute(orders[k])`` is contiguous (its one
        consumer permutes it, and a reshape after that permute is then a view, not a copy); None
        keeps row-major. A permutation must keep the innermost dim innermost (the stores' vectors)."""
        if len(orders) != len(self._outputs):
            raise ValueError(f"{self.name}: {len(orders)} output orders for {len(self._outputs)} outputs")
        for order, (shape, _) in zip(orders, self._outputs):
            if order is not None and (sorted(order) != list(range(len(shape))) or order[-1] != len(shape) - 1):
                raise ValueError(f"{self.name}: {order} is not a permutation keeping the last of {len(shape)} dims")
        self.output_orders = tuple(orders)
        self._allocations = [(tuple(shape), strides_for_order(shape, order), dtype)
                             for order, (shape, dtype) in zip(orders, self._outputs)]
        self._specializations.clear()

    def _allocate(self, device: torch.device) -> list[torch.Tensor]:
        # on the current CUDA device (the fast allocation allocates there), else where ``device`` says
        if _FAST_EMPTY is not None and device.type == "cuda" and device.index == _FAST_EMPTY[1]():
            empty = _FAST_EMPTY[0]
            outputs = [empty(shape, strides, dtype) for shape, strides, dtype in self._allocations]
        else:
            outputs = [torch.empty_strided(shape, strides, dtype=dtype, device=device)
                       for shape, strides, dtype in self._allocations]
        if self._poison:
            for out in outputs:
                out.fill_(float("nan") if out.is_floating_point() else True)
        return outputs

    def __call__(self, *args: torch.Tensor) -> list[torch.Tensor]:
        # The hot path of every call: allocate, read pointers and strides, find the specialization.
        try:
            device = args[0].device
            outputs = self._allocate(device)
            pointers = [t.data_ptr() for t in (*args, *outputs)]
            # shape and dtype too: Thunder's prologue checks them, but a fusion called directly must not run a
            # kernel built for other shapes (a new key reaches ``_check_arguments``)
            key = (device, *[(a.stride(), a.shape, a.dtype) for a in args], *[p & 15 for p in pointers])
        except (AttributeError, IndexError):  # not tensors, or none: a TypeError that says which
            self._check_arguments(getattr(args[0], "device", None) if args else None, args)
            raise
        spec = self._specializations.get(key)
        if spec is None:
            spec = self._specializations[key] = self._specialize_or_fall_back(device, args, outputs)
        self.last = spec
        if not self.views or isinstance(spec, Fallback):
            return spec.run(args, outputs, pointers)
        outputs = spec.run(args, outputs, pointers)
        written = tuple(outputs)
        for position, source, chain in self.views:  # of an input, or of an output the kernel writes
            outputs.insert(position, apply_chain(written[source[1]] if isinstance(source, tuple) else args[source],
                                                 chain))
        return outputs

    def _specialize_or_fall_back(self, device, args, outputs) -> Specialization | Fallback:
        self._check_arguments(device, args)
        try:
            copied = self._unfolded(args)
            if not copied:
                return self._specialize(device, args, outputs)
            spec = self._specialize(device, _row_major(args, copied), outputs)
            spec.copied = copied
            log.debug("%s: inputs %s copied row-major before the kernel", self.name, copied)
            return spec
        except Exception as raised:  # padvec's typed errors, or a fault of its own: PyTorch's answer either way
            err = InternalError.wrapping("building the kernel", raised)
            if knobs.strict() or self._fallback is None:
                raise err
            warnings.warn(f"{self.name} runs in PyTorch: {str(err).splitlines()[0]}", RuntimeWarning, stacklevel=3)
            log.debug("%s: %s", self.name, err)
            return Fallback(err, self._fallback())

    def _unfolded(self, args) -> tuple[int, ...]:
        """Positions of the inputs whose strides a view of them (``ir.View``) can't be folded into: a
        slice of a merge of dims that don't lie evenly in memory (``vectorize.views.fold``). Their
        kernel reads a row-major copy (one more read and write of the input), where else the region
        would run in PyTorch; the copy is the specialization's, made again every call."""
        positions = {node.name: i for i, node in enumerate(self.kernel.inputs)}
        unfolded = set()
        for node in self.kernel.nodes:
            if isinstance(node, ir.View) and node.operand in positions:
                arg = args[positions[node.operand]]
                if fold(node.chain, tuple(arg.shape), tuple(arg.stride())) is None:
                    unfolded.add(positions[node.operand])
        return tuple(sorted(unfolded))

    def _check_arguments(self, device: torch.device, args) -> None:
        if len(args) != len(self.kernel.inputs):
            raise TypeError(f"{self.name} takes {len(self.kernel.inputs)} tensors, got {len(args)}")
        for node, arg in zip(self.kernel.inputs, args):
            want = (node.type.shape, TORCH_DTYPES[node.type.dtype], device)
            if not isinstance(arg, torch.Tensor) or (tuple(arg.shape), arg.dtype, arg.device) != want:
                got = (tuple(arg.shape), arg.dtype, arg.device) if isinstance(arg, torch.Tensor) else type(arg)
                raise TypeError(f"{self.name}: input {node.name} should be {want}, got {got}")

    def _specialize(self, device: torch.device, args, outputs) -> Specialization:
        layouts = tuple(vectorize.Layout(tuple(a.stride()), alignment(a.data_ptr())) for a in args)
        out_alignments = tuple(alignment(o.data_ptr()) for o in outputs)
        strides = tuple(tuple(o.view(merged).stride() if merged else o.stride())
                        for o, merged in zip(outputs, self._merged))

        def planned(max_rows: int | None = None, team_scale: int = TUNING.team_scale,
                    all_reloads: bool = False) -> vectorize.VectorPlan:
            return vectorize.plan(self.projection, layouts, out_alignments, TUNING.max_row_bytes, TUNING.min_threads,
                                  strides, TUNING.register_rows, max_rows, team_scale, all_reloads)

        plan = planned()
        params = schedule(plan)
        if device.type == "cuda":
            # planned again once, whichever launch variants ask for it
            return self._specialize_cuda(plan, params, device, args, outputs,
                                         functools.cache(functools.partial(planned, 1)),
                                         functools.cache(functools.partial(planned, 1, 2 * TUNING.team_scale)),
                                         functools.partial(planned, all_reloads=True))
        from .runtime.host import HostModule

        source = codegen.host_source(codegen.render(plan, params))
        binary, path = cache.binary(source, _host_target())
        try:
            module = HostModule(binary)
        except LaunchError as err:
            raise LaunchError(f"{err}; source dumped to {path}") from err
        return Specialization(plan, params, source, path, device, module, ArgPack(len(args) + len(outputs)))

    def _specialize_cuda(self, plan, params: LaunchParams, device: torch.device, args, outputs,
                         one_row: Callable[[], vectorize.VectorPlan] | None = None,
                         wider: Callable[[], vectorize.VectorPlan] | None = None,
                         reloaded: Callable[[], vectorize.VectorPlan] | None = None) -> Specialization:
        """The kernel of ``params``; or, where padvec measures its launch variants (``runtime.tune``), the
        fastest of them on this call's tensors, or the one a decision kept on disk names. ``one_row``:
        the plan again with one row per tiled thread (``_with_one_row``); ``wider``: with one row per
        thread and twice the threads a row (``_with_wider_teams``); ``reloaded``: with the lanes of steps
        side by side taking a chunk each and loading the others' again, timed as a variant of its own
        where it changes a segment (``_reloaded_option``)."""
        measured = TUNING.tune_hints and knobs.tune() and tune.may_time(device)
        options = [(name, plan, p, codegen.device_source(codegen.render(plan, p)))
                   for name, p in (tune.variants(params) if measured else [(None, params)])]
        if measured and reloaded is not None and TUNING.reload_variant:
            options += _reloaded_option(plan, reloaded)
        options = _distinct(options, lambda option: option[3])
        key = chosen = None
        if len(options) > 1:
            key = tune.decision_key([source for *_, source in options], device)
            chosen = tune.remembered(key, [name for name, *_ in options])
            if chosen is not None:
                options = [o for o in options if o[0] == chosen]
            else:  # the variants compile side by side while the default builds here
                _prefetch([source for *_, source in options[1:]], device.index)
        built = []
        for name, variant_plan, variant, source in options:
            replans = {"one_row": one_row, "wider": wider} if variant_plan is plan else {}
            try:
                built.append((name, self._build_cuda(variant_plan, variant, source, device, len(args) + len(outputs),
                                                     **replans)))
            except PadvecError as err:
                if not built:  # the default must build
                    raise
                log.debug("%s: variant %s not built: %s", self.name, name, err)
        built = _distinct(built, lambda b: b[1].source)  # variants planned again alike
        if len(built) == 1:
            spec = built[0][1]
            if chosen is not None:
                spec.choice = tune.Choice(chosen)
            return spec
        pointers = [t.data_ptr() for t in (*args, *outputs)]
        rounds = tune.measure([(name, functools.partial(spec.run, args, outputs, pointers)) for name, spec in built],
                              device)
        if rounds is None:  # no memory for the flush: the default, not remembered
            return built[0][1]
        chosen = tune.pick(rounds)
        cache.write_note(key, chosen)
        spec = dict(built)[chosen]
        spec.choice = tune.Choice.measured(chosen, rounds)
        log.debug("%s: %s", self.name, spec.choice)
        return spec

    def _build_cuda(self, plan, params: LaunchParams, source: str, device: torch.device, arguments: int,
                    one_row: Callable[[], vectorize.VectorPlan] | None = None,
                    wider: Callable[[], vectorize.VectorPlan] | None = None) -> Specialization:
        """``source`` (of ``plan`` and ``params``) compiled and loaded (``_fitted_build``); where it keeps
        few blocks per SM with several rows per thread, planned again with one (``_with_one_row``); where
        its last wave is mostly idle, planned again with twice the threads a row (``_with_wider_teams``)."""
        build = self._fitted_build(plan, params, source, device.index)
        load = functools.partial(self._fitted_build, device=device.index)
        notes = []
        if one_row is not None and TUNING.one_row_fit and _few_blocks(build, device.index):
            try:
                plan, build, note = _with_one_row(plan, build, one_row, load, params)
                notes.append(note)
            except PadvecError as err:  # the first build stands
                log.debug("%s: no build with one row per thread: %s", self.name, err)
        if wider is not None and TUNING.wave_fit:
            try:
                plan, build, note = _with_wider_teams(plan, build, wider, load, params, _sms(device.index))
                notes.append(note)
            except PadvecError as err:  # the build so far stands
                log.debug("%s: no build with wider teams: %s", self.name, err)
        params, source, path, module = build
        return Specialization(plan, params, source, path, device, module, ArgPack(arguments),
                              replanned="; ".join(filter(None, notes)))

    def _fitted_build(self, plan, params: LaunchParams, source: str, device: int):
        """``(params, source, path, module)``: ``source`` compiled and loaded, built again to fit where it
        pays, and built without word pairs where they cost a block per SM (``_without_word_pairs``)."""
        build = self._load_cuda(plan, params, source, device)
        if params.word_pairs and _few_blocks(build, device):
            try:
                build = _without_word_pairs(plan, build, functools.partial(self._load_cuda, device=device))
            except PadvecError as err:  # the first build stands
                log.debug("%s: no build without word pairs: %s", self.name, err)
        return build

    def _load_cuda(self, plan, params: LaunchParams, source: str, device: int):
        """``(params, source, path, module)``: ``source`` compiled and loaded, built again with
        ``__launch_bounds__`` where a few registers stand in the way of one more block per SM."""
        from .runtime.launch import CudaModule

        binary, path = cache.binary(source, _cuda_target(device))
        try:
            module = CudaModule(binary, device)
        except LaunchError as err:
            raise LaunchError(f"{err}; source dumped to {path}") from err
        if TUNING.fit_registers and not params.min_blocks:
            try:
                fitted = _fit_registers(plan, params, module, device)
            except PadvecError as err:  # the first build stands
                log.debug("%s: no build with __launch_bounds__: %s", self.name, err)
                fitted = None
            if fitted is not None:
                return fitted
        return params, source, path, module
