"""How fast can the GPU move a pass's bytes when it reads and writes them in unequal parts?

    python benchmarks/tools/mix_probe.py Llama-3-8B-b1-qkv_split_rope-bfloat16-fwd+bwd \\
        Mistral-7B-b1-qkv_split_rope-bfloat16-fwd+bwd

The copy roofline reads and writes equal halves. A grouped-query qkv forward reads qkv once and writes q
and k, v expanded to every head: about twice what it reads; its backward reads the three cotangents and
writes qkv's gradient: about half. For each pass of each case this times, the L2 flushed before each
replay, the copy of the pass's bytes and a kernel of the pass's mix of the same size class: ``k`` times
the bytes written as read (a broadcast along a middle dim made contiguous) or ``k`` times the bytes
read as written (a sum over a middle dim of ``k``), ``k`` the pass's ratio rounded, in eager and under
torch.compile, and as a calibration an equal-halves kernel of torch.compile (``x + 1``). Prints each
one's share of the copy of its own bytes.
"""

from __future__ import annotations

import argparse

import thunder_padvec  # noqa: F401
import torch

from thunder_padvec.bench.cases import backward_bytes, build, cases
from thunder_padvec.timing import copy_roofline_ms, graph_median_ms

COLS = 128  # elements of the rows the mix kernels broadcast or sum


def passes(case_id: str) -> list[tuple[str, int, int]]:
    """``(name, bytes read, bytes written)`` of each pass of a suite case (minimal IO, as the suite counts)."""
    (case,) = [c for c in cases() if c.id == case_id]
    _, args, outputs, io, cotangents = build(case, torch.Generator().manual_seed(0))
    read = sum(a.nbytes for a in args)
    found = [("fwd", read, (io - backward_bytes(args, cotangents) if cotangents else io) - read)]
    if cotangents:
        x = args[0]
        found.append(("bwd", backward_bytes(args, cotangents) - x.nbytes, x.nbytes))
    return found


def _mix(read: int, write: int):
    """``(label, fn, bytes)``: a kernel of about ``read`` to ``write`` in its ratio rounded."""
    if write >= read:
        k = max(1, round(write / read))
        src = torch.randn(write // k // 2 // COLS, 1, COLS, device="cuda").bfloat16()
        if k == 1:  # contiguous() of a view that is already contiguous runs no kernel
            return "1:1 clone", lambda t: t.clone(), src, src.nbytes * 2
        return f"1:{k} broadcast", lambda t: t.expand(-1, k, -1).contiguous(), src, src.nbytes * (1 + k)
    k = max(1, round(read / write))
    src = torch.randn(read // 2 // COLS // k, k, COLS, device="cuda").bfloat16()
    return f"{k}:1 sum", lambda t: t.sum(1), src, src.nbytes * (1 + 1 / k)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("cases", nargs="+")
    args = parser.parse_args()
    for case_id in args.cases:
        for name, read, write in passes(case_id):
            label, fn, src, nbytes = _mix(read, write)
            copy = copy_roofline_ms(int(nbytes))
            torch._dynamo.reset()
            compiled = torch.compile(fn, dynamic=False)
            plus = torch.compile(lambda t: t + 1, dynamic=False)
            flat = torch.randn(int(nbytes) // 4, device="cuda").bfloat16()
            rows = [("eager " + label, graph_median_ms(lambda: fn(src))),
                    ("torch.compile " + label, graph_median_ms(lambda: compiled(src))),
                    ("torch.compile 1:1 x + 1", graph_median_ms(lambda: plus(flat)))]
            print(f"{case_id} {name}: reads {read / 1e6:.1f} MB, writes {write / 1e6:.1f} MB; "
                  f"mix kernels of {nbytes / 1e6:.1f} MB, copy {copy * 1e3:.1f} us")
            for label_, ms in rows:
                print(f"    {label_:32s} {ms * 1e3:8.1f} us  {copy / ms:6.1%} of the copy")


if __name__ == "__main__":
    main()
