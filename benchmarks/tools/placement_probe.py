"""Does an executor's device time depend on where its buffers lie, or on how the L2 is flushed?

    python benchmarks/tools/placement_probe.py --case Llama-2-7b-b1-rope-bfloat16-fwd --shifts 0 2 4 6 8 10 12 14

Builds padvec and torch.compile once per case. For each shift (MiB), a filler of that size is allocated
(and kept) before CUDA graphs of both are captured afresh, so the graphs' outputs land elsewhere; each
graph is then timed twice, the L2 flushed before every replay by the suite's flush (``timing.l2_flush``:
the kernel starts with the flush's dirty lines in the L2) and by reading 256 MiB after the same reset of
lines kept by evict_last policies (a clean L2). The copy
roofline is timed both ways as well. Prints one row per shift and executor.
"""

from __future__ import annotations

import argparse
import thunder_padvec  # noqa: F401
import torch

from thunder_padvec.bench.cases import build, cases, executor, with_backward
from thunder_padvec.runtime.launch import reset_persisting_l2
from thunder_padvec.timing import L2_FLUSH_BYTES, l2_flush, median_ms


def _graph(fn):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--case", nargs="+", required=True)
    parser.add_argument("--shifts", nargs="+", type=int, default=[0, 2, 4, 6, 8])
    parser.add_argument("--executors", nargs="+", default=["padvec", "torch.compile"])
    args = parser.parse_args()
    scratch = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    scratch.fill_(1)
    flushes = {"dirty": l2_flush(),
               "clean": lambda: (reset_persisting_l2(scratch.device.index), scratch.sum(dtype=torch.int32))}
    by_id = {c.id: c for c in cases()}
    for case_id in args.case:
        case = by_id[case_id]
        fn, inputs, _, io, cotangents = build(case, torch.Generator().manual_seed(0))
        runs = {}
        for name in args.executors:
            f = executor(name, case, fn)
            runs[name] = f if cotangents is None else with_backward(f, cotangents)
        src = torch.empty(io // 2, dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        print(f"{case_id}: x at {inputs[0].data_ptr() % (1 << 30):#x} (mod 1 GiB)", flush=True)
        fillers = []
        for shift in args.shifts:
            fillers.append(torch.empty(max(shift << 20, 1), dtype=torch.uint8, device="cuda"))
            row = [f"  shift {shift:3d} MiB"]
            for name, flush in flushes.items():
                copy = median_ms(lambda: dst.copy_(src), flush=flush)
                row.append(f"{name}: copy {copy * 1000:7.1f}")
                for exe, run in runs.items():
                    ms = median_ms(_graph(lambda: run(*inputs)).replay, flush=flush)
                    row.append(f"{exe} {ms * 1000:7.1f} ({copy / ms:6.1%})")
            print("  ".join(row), flush=True)
        del fillers, runs
        torch._dynamo.reset()
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
