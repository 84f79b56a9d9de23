"""Would summing a group's key gradients before RoPE's backward pay on the grouped-query qkv fwd+bwd?

    python benchmarks/tools/sumfirst_probe.py --cases Llama-3-8B-b1-qkv_split_rope-bfloat16-fwd+bwd
    THUNDER_PADVEC_EMULATE=1 python benchmarks/tools/sumfirst_probe.py --emulate  # the gradients, no GPU

LitGPT's prologue (``examples.qkv_split_rope``) expands k to the group's heads and then applies RoPE, so
Thunder's backward takes RoPE's backward of each head's gradient and sums the group's heads after: the k
piece of padvec's backward kernel does 4 heads' arithmetic for each row it writes (Llama-3-8B and
Mistral-7B). RoPE is linear and its cos and sin are the same for every head, so the sum can come first.
The same program with RoPE on k before the expand (``rope_then_expand`` below: equal in exact
arithmetic) gets that order from Thunder's autodiff, with no change to padvec. Each case's fwd+bwd is
timed (CUDA-graph replay, L2 flushed) as written and so reordered, each with padvec and with
torch.compile, beside the copies of each pass's bytes; each gradient is compared with the written
program's in eager, and the elements outside bf16 tolerance are counted (the reordered program rounds
at other steps, so a few differ by a bf16 step). The probe measures whether the reorder is worth
teaching padvec; it does not change what padvec does.

On an H100 (2026-12-07, ``results/2026-12-07-sumfirst/``) it was not: the reordered backward kernel
(40 registers against 80, 805 SASS instructions against 2173) was 1.2-1.4% faster, its forward
1.3-2.1% slower, and fwd+bwd within 1.7 µs of the written program's on all four rows.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools

import thunder_padvec
import torch

from thunder_padvec.bench.cases import backward_bytes, build, cases, executor, with_backward
from thunder_padvec.bench.measure import kernels
from thunder_padvec.examples import litgpt_rope, qkv_split_rope
from thunder_padvec.timing import copies_ms, graph_median_ms

DEFAULT_CASES = [f"{m}-b{b}-qkv_split_rope-bfloat16-fwd+bwd" for m in ("Llama-3-8B", "Mistral-7B") for b in (1, 2)]


def rope_then_expand(qkv, cos, sin, n_head: int, n_query_groups: int, head_size: int, rope_n_elem: int):
    """``examples.qkv_split_rope`` with RoPE on k before k is expanded to the group's heads."""
    B, T, _ = qkv.shape
    q_per_kv = n_head // n_query_groups
    qkv = qkv.view(B, T, n_query_groups, q_per_kv + 2, head_size).permute(0, 2, 3, 1, 4)
    q, k, v = qkv.split((q_per_kv, 1, 1), dim=2)
    k = litgpt_rope(k.reshape(B, n_query_groups, T, head_size), cos, sin, rope_n_elem)
    k = k.view(B, n_query_groups, 1, T, head_size).expand(B, n_query_groups, q_per_kv, T, head_size)
    v = v.expand(B, n_query_groups, q_per_kv, T, head_size)
    q = litgpt_rope(q.reshape(B, -1, T, head_size), cos, sin, rope_n_elem)
    return q, k.reshape(B, -1, T, head_size), v.reshape(B, -1, T, head_size)


def programs(case):
    c = case.config
    kwargs = dict(n_head=c.n_head, n_query_groups=c.n_query_groups, head_size=c.head_size,
                  rope_n_elem=c.rope_n_elem)
    return {"as written": functools.partial(qkv_split_rope, **kwargs),
            "rope then expand": functools.partial(rope_then_expand, **kwargs)}


def _outside(got, expected) -> int:
    """How many elements of the gradients ``got`` lie outside the suite's bf16 tolerance of ``expected``."""
    return sum(int((~torch.isclose(g.float(), e.float(), rtol=2e-2, atol=8e-2)).sum()) for g, e in zip(got, expected))


def emulate() -> bool:
    """Both programs' gradients through padvec on the CPU at a short sequence, against the written
    program's in eager."""
    thunder_padvec.set_emulation(True)
    ok = True
    for case in (c for c in cases() if c.id in DEFAULT_CASES[::2]):
        small = dataclasses.replace(case, config=dataclasses.replace(case.config, batch=1, seq=16))
        _, args, expected, _, cotangents = build(small, torch.Generator().manual_seed(0), device="cpu")
        for label, fn in programs(small).items():
            same = _outside(with_backward(executor("padvec", small, fn), cotangents)(*args), expected) == 0
            same_eager = _outside(with_backward(fn, cotangents)(*args), expected) == 0
            ok &= same and same_eager
            print(f"{small.id} {label}: padvec's gradient {'matches' if same else 'DIFFERS FROM'} eager's as written"
                  f" (eager's of this program {'matches' if same_eager else 'DIFFERS'})")
    return ok


def probe(case_ids: list[str]) -> None:
    by_id = {c.id: c for c in cases()}
    for case_id in case_ids:
        case = by_id[case_id]
        _, args, expected, io, cotangents = build(case, torch.Generator().manual_seed(0))
        backward = backward_bytes(args, cotangents)
        per_pass = copies_ms((io - backward, backward))
        print(f"{case_id}: copies of each pass's bytes {per_pass * 1e3:.1f} us")
        for label, fn in programs(case).items():
            for name in ("padvec", "torch.compile"):
                jitted = executor(name, case, fn)
                step = with_backward(jitted, cotangents)
                got = step(*args)
                far = _outside(got, expected)
                worst = max(float((g.float() - e.float()).abs().max()) for g, e in zip(got, expected))
                ms = graph_median_ms(lambda: step(*args))
                print(f"  {label:16s} {name:13s} {ms * 1e3:8.1f} us  ({per_pass / ms:.1%} of the per-pass copies); "
                      f"gradient against eager's as written: {far} elements outside bf16 tolerance, "
                      f"largest difference {worst:.3g}")
                if name == "padvec":
                    for line in kernels(jitted):
                        print("     ", line)
        print(f"  copies again     {copies_ms((io - backward, backward)) * 1e3:8.1f} us")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", nargs="+", default=DEFAULT_CASES)
    parser.add_argument("--emulate", action="store_true")
    args = parser.parse_args()
    if args.emulate:
        raise SystemExit(0 if emulate() else 1)
    probe(args.cases)


if __name__ == "__main__":
    main()
