"""Command line: ``python -m thunder_padvec demo``."""

from __future__ import annotations

import argparse
import sys

import thunder_padvec  # noqa: F401  (applies the compat shim before Thunder is imported)


def _demo(args: argparse.Namespace) -> int:
    import thunder
    import torch

    from . import examples, explain, padvec, set_emulation

    on_gpu = torch.cuda.is_available() and not args.cpu
    device = "cuda" if on_gpu else "cpu"
    if not on_gpu:
        set_emulation(True)
    shape = dict(examples.SEED_SHAPE) if on_gpu else dict(batch=2, heads=4, seq=64, head_size=32, rope_n_elem=8)
    dtype = getattr(torch, args.dtype)
    print(f"seed RoPE {shape} {args.dtype} on {device}" + ("" if on_gpu else " (no GPU: CPU emulation)"))

    x, cos, sin = examples.rope_inputs(**shape, dtype=dtype, device=device)
    n = shape["rope_n_elem"]
    jitted = thunder.jit(examples.rope_one_entry, executors=[padvec])
    out = jitted(x, cos, sin, n)
    expected = examples.rope_one_entry(x, cos, sin, n)
    exact = torch.equal(out, expected)
    diff = (out.float() - expected.float()).abs().max().item()
    print(f"matches eager: {'bit for bit' if exact else f'max abs difference {diff:g}'}")

    reports = explain(jitted)
    print(f"padvec fusions: {len(reports)}")
    for report in reports:
        print(report)
    if on_gpu:
        _timing_row(jitted, x, cos, sin, n, out)
    return 0 if exact or diff <= 1e-2 else 1


def _timing_row(jitted, x, cos, sin, n, out) -> None:
    from . import examples, timing

    io_bytes = x.nbytes + cos.nbytes + sin.nbytes + out.nbytes
    eager_ms = timing.median_ms(lambda: examples.rope_one_entry(x, cos, sin, n))
    padvec_ms = timing.median_ms(lambda: jitted(x, cos, sin, n))
    copy_ms = timing.copy_roofline_ms(io_bytes)
    print(f"{'':10s} {'ms':>8s} {'GB/s':>8s} {'of copy':>8s}")
    for name, ms in (("eager", eager_ms), ("padvec", padvec_ms), ("copy", copy_ms)):
        print(f"{name:10s} {ms:8.4f} {timing.gbps(io_bytes, ms):8.0f} {copy_ms / ms:8.1%}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m thunder_padvec", description=thunder_padvec.__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="the seed's RoPE through thunder.jit with padvec, checked against eager")
    demo.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    demo.add_argument("--cpu", action="store_true", help="use CPU emulation even where a GPU is present")
    demo.set_defaults(run=_demo)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
