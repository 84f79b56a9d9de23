"""Does an executor's device time depend on what ran before it in the same process?

    python benchmarks/tools/order_probe.py --case seed-b256-rope-bfloat16-fwd+bwd \\
        --order padvec eager torch.compile thunder padvec padvec:empty_cache

Each entry builds its executor afresh and measures it the suite's way (``bench.measure``); an entry
``name:empty_cache`` empties PyTorch's caching allocator first; an entry ``burn:S`` keeps the GPU busy
with matrix products for S seconds (the heat of a long suite run). Prints one row per entry with the
device time, the caching allocator's reserved bytes and the number of its segments, and the GPU's SM
clock, temperature and power as nvidia-smi reports them after the entry.
"""

from __future__ import annotations

import argparse
import subprocess
import time

import thunder_padvec  # noqa: F401
import torch

from thunder_padvec.bench.cases import cases
from thunder_padvec.bench.measure import Built, measure


def _gpu_state() -> str:
    try:
        query = "--query-gpu=clocks.sm,temperature.gpu,power.draw"
        return subprocess.run(["nvidia-smi", query, "--format=csv,noheader"], capture_output=True, text=True,
                              timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError) as err:
        return f"nvidia-smi: {err}"


def _burn(seconds: float) -> None:
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(20):
            a @ a
        torch.cuda.synchronize()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--case", nargs="+", required=True)
    parser.add_argument("--order", nargs="+", required=True)
    args = parser.parse_args()
    by_id = {c.id: c for c in cases()}
    for case_id in args.case:
        built = Built(by_id[case_id])
        print(f"{case_id}: copy {built.copy_ms * 1000:.1f} us")
        for entry in args.order:
            name, _, option = entry.partition(":")
            if name == "burn":
                _burn(float(option))
                print(f"  {entry:24s} {_gpu_state()}", flush=True)
                continue
            if option == "empty_cache":
                torch.cuda.empty_cache()
            record, _ = measure(built, name)
            stats = torch.cuda.memory_stats()
            print(f"  {entry:24s} {record['median_ms'] * 1000:8.1f} us {record['roofline_fraction']:6.1%} of copy"
                  f"  reserved {stats['reserved_bytes.all.current'] / 2**30:6.2f} GiB"
                  f"  segments {stats['segment.all.current']}  {_gpu_state()}", flush=True)
        del built
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
