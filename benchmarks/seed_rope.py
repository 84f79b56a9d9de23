"""The seed's RoPE on one GPU: padvec against eager, torch.compile and Thunder's defaults, with the
copy roofline of the same bytes timed in the same run.

    python benchmarks/seed_rope.py [--batch 256 512] [--dtype bfloat16] [--json out.json]
"""

from __future__ import annotations

import argparse
import json

import thunder_padvec  # noqa: F401  (before thunder)
import thunder
import torch

from thunder_padvec import padvec
from thunder_padvec.examples import SEED_SHAPE, rope_inputs, rope_one_entry
from thunder_padvec.timing import copy_roofline_ms, gbps, median_ms


def _executors(n: int):
    yield "eager", lambda x, c, s: rope_one_entry(x, c, s, n)
    torch._dynamo.reset()
    compiled = torch.compile(rope_one_entry, dynamic=False)
    yield "torch.compile", lambda x, c, s: compiled(x, c, s, n)
    default = thunder.jit(rope_one_entry)
    yield "thunder", lambda x, c, s: default(x, c, s, n)
    jitted = thunder.jit(rope_one_entry, executors=[padvec])
    yield "padvec", lambda x, c, s: jitted(x, c, s, n)


def run(batch: int, dtype: torch.dtype) -> list[dict]:
    shape = {**SEED_SHAPE, "batch": batch}
    x, cos, sin = rope_inputs(**shape, dtype=dtype, device="cuda")
    n = shape["rope_n_elem"]
    expected = rope_one_entry(x, cos, sin, n)
    io_bytes = x.nbytes + cos.nbytes + sin.nbytes + expected.nbytes
    rows = []
    for name, fn in _executors(n):
        out = fn(x, cos, sin)
        if name == "padvec":  # the same rounding steps as eager: bit for bit
            assert torch.equal(out, expected)
        else:  # torch.compile keeps float32 intermediates
            torch.testing.assert_close(out, expected, rtol=0.02, atol=0.07)
        rows.append({"executor": name, "median_ms": median_ms(lambda: fn(x, cos, sin))})
    rows.append({"executor": "copy", "median_ms": copy_roofline_ms(io_bytes)})
    copy_ms = rows[-1]["median_ms"]
    compile_ms = next(r["median_ms"] for r in rows if r["executor"] == "torch.compile")
    for r in rows:
        r.update(config=f"seed-b{batch}", dtype=str(dtype).removeprefix("torch."), io_bytes=io_bytes,
                 gbps=gbps(io_bytes, r["median_ms"]), roofline_fraction=copy_ms / r["median_ms"],
                 speedup_vs_compile=compile_ms / r["median_ms"])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, nargs="+", default=[256, 512])
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--json")
    args = parser.parse_args()
    rows = []
    for batch in args.batch:
        rows += run(batch, getattr(torch, args.dtype))
    print(f"{'config':10s} {'executor':14s} {'ms':>8s} {'GB/s':>7s} {'copy%':>6s} {'vs compile':>10s}")
    for r in rows:
        print(f"{r['config']:10s} {r['executor']:14s} {r['median_ms']:8.4f} {r['gbps']:7.0f} "
              f"{r['roofline_fraction']:6.1%} {r['speedup_vs_compile']:9.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
