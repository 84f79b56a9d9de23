"""How fast do the qkv form's layout ops alone run: the same reads and writes as the forward, without RoPE?

    python benchmarks/tools/layout_probe.py Llama-3-8B-b1-qkv_split_rope-bfloat16-fwd \\
        Mistral-7B-b1-qkv_split_rope-bfloat16-fwd

For each qkv_split_rope forward case this times, the L2 flushed before each replay, the case's program
(view, permute, split, expand, reshape and RoPE on q and k) and its layout alone (the same view, permute,
split, expand and reshape, every output negated, so that each is written: q, and k and v expanded to every
head, read from the same strided places of qkv and written to the same places of the outputs; padvec claims
no region of layout ops alone), each under padvec,
torch.compile and eager, against the copy of each one's own minimal bytes. If the layout alone falls short
of the copy as far as padvec's forward does, what the forward lacks is the layout's (its many strided read
and write streams), not RoPE's arithmetic or loads of cos and sin.
"""

from __future__ import annotations

import argparse

import thunder_padvec
import thunder
import torch

from thunder_padvec.bench.cases import build, cases, minimal_io_bytes
from thunder_padvec.bench.measure import kernels
from thunder_padvec.timing import copy_roofline_ms, graph_median_ms


def layout_only(config):
    """The qkv form's layout ops of ``config``, every output negated (no RoPE)."""
    def fn(qkv, cos, sin):
        B, T, _ = qkv.shape
        q_per_kv = config.n_head // config.n_query_groups
        parts = qkv.view(B, T, config.n_query_groups, q_per_kv + 2, config.head_size).permute(0, 2, 3, 1, 4)
        q, k, v = parts.split((q_per_kv, 1, 1), dim=2)
        if config.n_query_groups != config.n_head:
            k = k.expand(B, config.n_query_groups, q_per_kv, T, config.head_size)
            v = v.expand(B, config.n_query_groups, q_per_kv, T, config.head_size)
        return tuple(-t.reshape(B, -1, T, config.head_size) for t in (q, k, v))

    return fn


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("cases", nargs="+")
    args = parser.parse_args()
    by_id = {c.id: c for c in cases()}
    for case_id in args.cases:
        case = by_id[case_id]
        fn, inputs, _, _, _ = build(case, torch.Generator().manual_seed(0))
        for label, program in (("rope", fn), ("layout", layout_only(case.config))):
            outputs = program(*inputs)
            read = inputs if label == "rope" else inputs[:1]  # the layout reads no cos, sin
            nbytes = minimal_io_bytes(read, outputs)
            copy = copy_roofline_ms(nbytes)
            print(f"{case_id} {label}: {nbytes / 1e6:.1f} MB, copy {copy * 1e3:.1f} us")
            torch._dynamo.reset()
            compiled = torch.compile(program, dynamic=False)
            jitted = thunder.jit(program, executors=[thunder_padvec.padvec])
            for name, run in (("padvec", jitted), ("torch.compile", compiled), ("eager", program)):
                for got, want in zip(run(*inputs), outputs):
                    torch.testing.assert_close(got, want, atol=0.05, rtol=0.02)
                ms = graph_median_ms(lambda: run(*inputs))
                print(f"    {name:16s} {ms * 1e3:8.1f} us  {copy / ms:6.1%} of the copy")
            for line in kernels(jitted):
                print(f"      {line}")
            print(f"    {'copy again':16s} {copy_roofline_ms(nbytes) * 1e3:8.1f} us")


if __name__ == "__main__":
    main()
