"""Does a kernel's distance from the copy follow how its blocks fill the GPU's last wave?

    python benchmarks/tools/wave_probe.py --heads 32 --head-size 128 --rope 128 --seqs 1024:8192:512 \\
        --variants base: b128:block=128

Times, for each sequence length, the copy of the case's bytes, torch.compile and padvec (under each
variant, as in ``explore.py``) on LitGPT's RoPE form, and prints padvec's blocks, registers, blocks per
SM and waves (blocks over the SMs' slots): if the partly filled last wave costs time, padvec's share of
the copy dips where the waves' fractional part is small.
"""

from __future__ import annotations

import argparse
import functools

from explore import _apply, _restore

import thunder_padvec
import thunder
import torch

from thunder_padvec import configs
from thunder_padvec.bench.cases import Case, build, with_backward
from thunder_padvec.timing import copy_roofline_ms, graph_median_ms


def _wrap(f, cotangents):
    return f if cotangents is None else with_backward(f, cotangents)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--groups", type=int, default=0, help="query groups (0: as many as heads)")
    parser.add_argument("--head-size", type=int, default=128)
    parser.add_argument("--rope", type=int, default=128)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--form", default="rope")
    parser.add_argument("--pass", dest="pass_", default="fwd")
    parser.add_argument("--seqs", default="1024:8192:512", help="first:last:step")
    parser.add_argument("--variants", nargs="+", default=["base:"])
    args = parser.parse_args()
    first, last, step = map(int, args.seqs.split(":"))
    for seq in range(first, last + 1, step):
        cfg = configs.RopeConfig("sweep", args.batch, args.heads, args.groups or args.heads, args.head_size,
                                 args.rope, seq)
        case = Case(cfg, args.form, "bfloat16", args.pass_)
        fn, inputs, _, io, cotangents = build(case, torch.Generator().manual_seed(0))
        wrap = functools.partial(_wrap, cotangents=cotangents)
        copy = copy_roofline_ms(io)
        torch._dynamo.reset()
        compiled = wrap(torch.compile(fn, dynamic=False))
        compiled(*inputs)
        compiled_ms = graph_median_ms(functools.partial(compiled, *inputs))
        line = f"T {seq:5d}  copy {copy * 1e3:7.1f} us  torch.compile {copy / compiled_ms:6.1%}"
        for variant in args.variants:
            name, _, settings = variant.partition(":")
            old = _apply(settings)
            try:
                jit = thunder.jit(fn, executors=[thunder_padvec.padvec])
                jitted = wrap(jit)
                jitted(*inputs)
                ms = graph_median_ms(functools.partial(jitted, *inputs))
                shapes = []
                for report in thunder_padvec.explain(jit):
                    r = report.resources
                    shapes.append(f"{report.launch.grid}x{report.launch.block} {r.registers}r {r.blocks_per_sm}/SM "
                                  f"{r.waves:5.2f}w")
                line += f"  | {name} {copy / ms:6.1%} " + " ".join(shapes)
            finally:
                _restore(old)
        print(line, flush=True)


if __name__ == "__main__":
    main()
