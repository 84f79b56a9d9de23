"""What padvec's kernels for the suite's cases hold, read without a GPU: launch, registers, spills and waves.

    THUNDER_PADVEC_EMULATE=1 python benchmarks/tools/kernel_resources.py Llama-2-7b-b2-rope-bfloat16-fwd \\
        pythia-160m-b2-qkv_split_rope-bfloat16-fwd --set STAGED_WARPS=4 --min-blocks 6

Each case is traced on CPU tensors of the suite's shapes (emulation claims them; the plan is the one a
GPU with the same strides gets, its layout decisions do not depend on the device), every fusion's CUDA
source is rendered and compiled by NVRTC for ``--arch`` with ``--ptxas-options=-v``. Blocks per SM come
from the registers (in units of 256 a warp) and the SM's registers and threads; waves are blocks over
``--sms`` times that. ``--min-blocks N`` adds the build with ``__launch_bounds__(block, N)``; ``--set``
takes knobs as ``explore.py`` does, ``--fusions`` limits them to the fusions named (``padvec1``: a fwd+bwd
case's backward). The measured choices a GPU makes on the first call (evict_last
hints, ``fusion._fit_registers``, ``fusion._without_word_pairs``) are not made here: this is the default
build, before them.
"""

from __future__ import annotations

import argparse
import dataclasses
import re

import thunder_padvec
import thunder

from explore import _apply, _apply_to, _restore  # the knobs (this folder)
from thunder_padvec import codegen, schedule
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
    return int(registers.group(1)), int(spills.group(1)) if spills else 0


def blocks_per_sm(registers: int, block: int) -> int:
    per_warp = -(-registers * 32 // 256) * 256
    return min(REGISTERS_PER_SM // (per_warp * -(-block // 32)), THREADS_PER_SM // block, BLOCKS_PER_SM)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("cases", nargs="+")
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--sms", type=int, default=132)
    parser.add_argument("--min-blocks", type=int, nargs="*", default=[])
    parser.add_argument("--set", default="", help="knobs, as a variant of explore.py: key=value,...")
    parser.add_argument("--fusions", nargs="+", metavar="NAME", help="the knobs apply only to these fusions")
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
            params = schedule.schedule(plan)  # as the fusion built it: under its knobs
            _restore(scoped)
            for bounds in [0, *args.min_blocks]:
                launch = dataclasses.replace(params, min_blocks=bounds)
                registers, spills = ptxas(codegen.device_source(codegen.render(plan, launch)), args.arch)
                per_sm = blocks_per_sm(registers, launch.block)
                label = f"bounds {bounds}" if bounds else "as built"
                print(f"{case_id} {report.name} {label}: grid {launch.grid} x {launch.block}, {registers} registers, "
                      f"{spills} B spilled, {per_sm} blocks per SM, {launch.grid / (args.sms * per_sm):.2f} waves")
            print("   ", "; ".join(s.mapping for s in plan.segments))


if __name__ == "__main__":
    main()
