"""What padvec's kernels for the suite's cases hold, read without a GPU: launch, registers, spills and waves.

    THUNDER_PADVEC_EMULATE=1 python benchmarks/tools/kernel_resources.py Llama-2-7b-b2-rope-bfloat16-fwd \\
        pythia-160m-b2-qkv_split_rope-bfloat16-fwd --set STAGED_WARPS=4 --min-blocks 6

Each case is traced on CPU tensors of the suite's shapes (emulation claims them; the plan is the one a
GPU with the same strides gets, its layout decisions do not depend on the device), every fusion's CUDA
source is rendered and compiled by NVRTC for ``--arch`` with ``--ptxas-options=-v``. Blocks per SM come
from the registers (in units of 256 a warp) and the SM's registers and threads; waves are blocks over
``--sms`` times that. ``--min-blocks N`` adds the build with ``__launch_bounds__(block, N)``; ``--set``
takes knobs as ``explore.py`` does, ``--fusions`` limits them to the fusions named (``padvec1``: a fwd+bwd
case's backward). "as built" is the default build; "first call" the build a GPU's first call keeps
after the choices it makes from the registers (``fusion._fit_registers``, modelled here with
``schedule.fit_blocks``; ``fusion._without_word_pairs``; ``fusion._with_one_row``;
``fusion._with_wider_teams``, for ``--sms`` SMs), from ptxas's figures.
The measured choice of the evict_last hints (``runtime.tune``) is not made here.

``--sass`` adds, for the first call's build, its SASS instructions (NVRTC's cubin read by ``nvdisasm``, on
the PATH or from the ``nvidia-cuda-nvdisasm`` wheel, a dev dependency), in all and for each segment alone
(the kernel built with the dispatcher's calls of the other segments taken out), with the commonest
opcodes: where a kernel's instructions go, without a GPU.

    THUNDER_PADVEC_EMULATE=1 python benchmarks/tools/kernel_resources.py \\
        Llama-3-8B-b1-qkv_split_rope-bfloat16-fwd+bwd --fusions padvec1 --sass
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import functools
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import thunder_padvec
import thunder

from explore import _apply, _apply_to, _restore  # the knobs (this folder)
from thunder_padvec import codegen, fusion, schedule, vectorize
from thunder_padvec.bench.cases import build, cases, with_backward
from thunder_padvec.explain import explain
from thunder_padvec.runtime import nvrtc

REGISTERS_PER_SM, THREADS_PER_SM, BLOCKS_PER_SM = 65536, 2048, 32  # the H200's (sm_90)


def ptxas(source: str, arch: str) -> tuple[int, int]:
    """``(registers per thread, spill-store bytes)`` of ``source``'s kernel."""
    lib = nvrtc._nvrtc()
    program = nvrtc._check(lib.nvrtcCreateProgram(source.encode(), b"padvec.cu", 0, [], []), "nvrtcCreateProgram")
    options = [f"--gpu-architecture={arch}".encode(), *(o.encode() for o in nvrtc.OPTIONS), b"--ptxas-options=-v"]
    lib.nvrtcCompileProgram(program, len(options), options)
    log = nvrtc._log(lib, program)
    lib.nvrtcDestroyProgram(program)
    registers, spills = re.search(r"Used (\d+) registers", log), re.search(r"(\d+) bytes spill stores", log)
    if registers is None:  # the source did not compile: say why instead of failing on the missing count
        first = next((line for line in log.splitlines() if "error" in line), log.strip()[:200])
        raise RuntimeError(f"ptxas gave no register count: {first}")
    return int(registers.group(1)), int(spills.group(1)) if spills else 0


def nvdisasm() -> str:
    """The path of ``nvdisasm``: on the PATH, else the ``nvidia-cuda-nvdisasm`` wheel's."""
    found = shutil.which("nvdisasm")
    if found is None:
        try:
            import nvidia  # the namespace package NVIDIA's wheels install into
        except ImportError:
            nvidia = None
        roots = list(getattr(nvidia, "__path__", []))
        found = next((str(p) for root in roots for p in sorted(Path(root).glob("*/bin/nvdisasm"))), None)
    if found is None:
        raise SystemExit("--sass needs nvdisasm: on the PATH, or pip install nvidia-cuda-nvdisasm")
    return found


INSTRUCTION = re.compile(r"^\s+/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)")
SEGMENT_CALL = re.compile(r"padvec_segment(\d+)<[^>]*>\([^;]*\);")


def sass(source: str, arch: str) -> collections.Counter:
    """The SASS opcodes of ``source``'s kernel compiled for ``arch``, by count (the NOPs padding the code
    left out; an opcode without its modifiers: ``LDG.E.128`` counts as ``LDG``)."""
    cubin = nvrtc.compile_cubin(source, arch)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "kernel.cubin"
        path.write_bytes(cubin)
        text = subprocess.run([nvdisasm(), "-c", str(path)], capture_output=True, text=True, check=True).stdout
    found = (INSTRUCTION.match(line) for line in text.splitlines())
    return collections.Counter(m.group(1) for m in found if m and m.group(1) != "NOP")


def segment_sources(source: str) -> dict[int, str]:
    """Each segment's kernel alone, by segment: ``source`` with the dispatcher's calls of the other segments
    taken out (a segment's code is inlined into the one kernel, so its own count is read from a build of
    it alone)."""
    segments = sorted({int(i) for i in SEGMENT_CALL.findall(source)})
    return {i: SEGMENT_CALL.sub(lambda m, i=i: m.group(0) if int(m.group(1)) == i else "(void)0;", source)
            for i in segments}


def _sass_line(label: str, counts: collections.Counter) -> str:
    common = ", ".join(f"{op} {n}" for op, n in counts.most_common(8))
    return f"    {label}: {sum(counts.values())} SASS instructions ({common})"


def blocks_per_sm(registers: int, block: int) -> int:
    per_warp = -(-registers * 32 // 256) * 256
    return min(REGISTERS_PER_SM // (per_warp * -(-block // 32)), THREADS_PER_SM // block, BLOCKS_PER_SM)


class Compiled:
    """A build's registers and spills from ptxas, standing in for a loaded module (``resources``)."""

    def __init__(self, source: str, arch: str):
        self.registers, self.spills = ptxas(source, arch)

    def resources(self, block: int) -> tuple[int, int, int]:
        return self.registers, self.spills, blocks_per_sm(self.registers, block)


def _load(plan, params, source: str, arch: str):
    """``fusion._load_cuda`` without a GPU: the build, fitted with ``__launch_bounds__`` where
    ``schedule.fit_blocks`` asks for one more block per SM and the fitted build gets it without spilling more."""
    module = Compiled(source, arch)
    registers, spills, blocks = module.resources(params.block)
    want = schedule.fit_blocks(registers, params.block, blocks, REGISTERS_PER_SM, THREADS_PER_SM,
                               params.register_slack)
    if schedule.TUNING.fit_registers and not params.min_blocks and want:
        fitted = dataclasses.replace(params, min_blocks=want)
        fitted_source = codegen.device_source(codegen.render(plan, fitted))
        other = Compiled(fitted_source, arch)
        if other.resources(params.block)[2] > blocks and other.spills <= spills:
            return fitted, fitted_source, None, other
    return params, source, None, module


def _few(build) -> bool:
    """``fusion._few_blocks`` for the H200's SM."""
    params, _, _, module = build
    return module.resources(params.block)[2] * params.block < THREADS_PER_SM // 2


def _fitted(plan, params, source: str, arch: str):
    """``PadvecFusion._fitted_build`` without a GPU."""
    build = _load(plan, params, source, arch)
    if params.word_pairs and _few(build):
        build = fusion._without_word_pairs(plan, build, functools.partial(_load, arch=arch))
    return build


def first_call(plan, params, arch: str, sms: int):
    """``(plan, build)`` as ``PadvecFusion._build_cuda`` keeps them, from ptxas's figures."""
    build = _fitted(plan, params, codegen.device_source(codegen.render(plan, params)), arch)
    tuning, load = schedule.TUNING, functools.partial(_fitted, arch=arch)

    def planned(team_scale: int):
        return vectorize.plan(plan.projection, plan.layouts, plan.output_alignments, tuning.max_row_bytes,
                              tuning.min_threads, plan.output_strides, tuning.register_rows, 1, team_scale)
    if tuning.one_row_fit and _few(build):
        plan, build, _ = fusion._with_one_row(plan, build, lambda: planned(tuning.team_scale), load, params)
    if tuning.wave_fit:
        plan, build, _ = fusion._with_wider_teams(plan, build, lambda: planned(2 * tuning.team_scale), load, params,
                                                  sms)
    return plan, build


def _line(case_id: str, name: str, label: str, launch, module, sms: int) -> str:
    registers, spills, per_sm = module.resources(launch.block)
    return (f"{case_id} {name} {label}: grid {launch.grid} x {launch.block}, {registers} registers, "
            f"{spills} B spilled, {per_sm} blocks per SM, {launch.grid / (sms * per_sm):.2f} waves")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("cases", nargs="+")
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--sms", type=int, default=132)
    parser.add_argument("--min-blocks", type=int, nargs="*", default=[])
    parser.add_argument("--set", default="", help="knobs, as a variant of explore.py: key=value,...")
    parser.add_argument("--fusions", nargs="+", metavar="NAME", help="the knobs apply only to these fusions")
    parser.add_argument("--sass", action="store_true", help="the first call's build's SASS instructions, in all "
                        "and by segment (needs nvdisasm)")
    args = parser.parse_args()
    thunder_padvec.set_emulation(True)
    _apply_to(args.set, args.fusions)
    by_id = {c.id: c for c in cases()}
    for case_id in args.cases:
        fn, inputs, _, _, cotangents = build(by_id[case_id], device="cpu")
        jitted = thunder.jit(fn, executors=[thunder_padvec.padvec])
        (jitted if cotangents is None else with_backward(jitted, cotangents))(*inputs)
        for report in explain(jitted):
            plan = report.plan
            if plan is None:  # a fusion that runs in PyTorch
                print(f"{case_id} {report.name}: {report.source}")
                continue
            scoped = _apply(args.set) if args.fusions and report.name in args.fusions else []
            try:
                params = schedule.schedule(plan)  # as the fusion built it: under its knobs
                kept_plan, (kept, kept_source, _, kept_module) = first_call(plan, params, args.arch, args.sms)
            finally:
                _restore(scoped)
            for bounds in [0, *args.min_blocks]:
                launch = dataclasses.replace(params, min_blocks=bounds)
                module = Compiled(codegen.device_source(codegen.render(plan, launch)), args.arch)
                print(_line(case_id, report.name, f"bounds {bounds}" if bounds else "as built", launch, module,
                            args.sms))
            print("   ", "; ".join(s.mapping for s in plan.segments))
            changes = [f"registers for {kept.min_blocks} blocks per SM"] if kept.min_blocks else []
            changes += [] if kept.word_pairs or not params.word_pairs else ["no word pairs"]
            for field, change in (("rows_per_thread", "one row a thread"),
                                  ("threads_per_row", "twice the threads a row")):
                changes += [change] if [getattr(s, field) for s in plan.segments] != [
                    getattr(s, field) for s in kept_plan.segments] else []
            print(_line(case_id, report.name, f"first call ({', '.join(changes) or 'as built'})", kept, kept_module,
                        args.sms))
            if args.sass:
                print(_sass_line("the kernel", sass(kept_source, args.arch)))
                alone = segment_sources(kept_source)
                for i, source in alone.items() if len(alone) > 1 else ():
                    print(_sass_line(f"segment {i} alone ({kept_plan.segments[i].mapping})", sass(source, args.arch)))


if __name__ == "__main__":
    main()
