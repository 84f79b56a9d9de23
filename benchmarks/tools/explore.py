"""Kernel-shape experiments on one GPU: padvec's RoPE kernels under several tunings, beside the copy
roofline and torch.compile, in one run. Prints one row per configuration and tuning."""

from __future__ import annotations

import sys

import thunder_padvec  # noqa: F401
import thunder
import torch

from thunder_padvec import configs, padvec, schedule
from thunder_padvec.examples import litgpt_rope, rope_inputs, rope_one_entry
from thunder_padvec.timing import copy_roofline_ms, gbps, graph_median_ms

TUNINGS = [(512, 1 << 18), (512, 1 << 19), (512, 1 << 30)]  # (max_row_bytes, min_threads)
PICK = sys.argv[1:] or [c.id for c in configs.ALL]


def main() -> None:
    rows = []
    for cfg in [c for c in configs.ALL if c.id in PICK]:
        for dtype in ([torch.bfloat16, torch.float32] if cfg.name == "seed" else [torch.bfloat16]):
            x, cos, sin = rope_inputs(cfg.batch, cfg.n_head, cfg.seq, cfg.head_size, cfg.rope_n_elem, dtype, "cuda")
            fn = rope_one_entry if cfg.name == "seed" else litgpt_rope
            n = cfg.rope_n_elem
            expected = fn(x, cos, sin, n)
            io = x.nbytes + cos.nbytes + sin.nbytes + expected.nbytes
            copy = copy_roofline_ms(io)
            torch._dynamo.reset()
            compiled = torch.compile(fn, dynamic=False)
            compiled(x, cos, sin, n)
            compile_ms = graph_median_ms(lambda: compiled(x, cos, sin, n))
            label = f"{cfg.id}/{str(dtype)[6:]}"
            rows.append((label, "torch.compile", compile_ms, io, copy))
            for max_row, min_threads in TUNINGS:
                schedule.TUNING.max_row_bytes, schedule.TUNING.min_threads = max_row, min_threads
                jitted = thunder.jit(fn, executors=[padvec])
                out = jitted(x, cos, sin, n)
                assert torch.equal(out, expected), label
                rows.append((label, f"padvec row{max_row} t{min_threads.bit_length() - 1}", graph_median_ms(lambda: jitted(x, cos, sin, n)), io, copy))
            rows.append((label, "copy", copy, io, copy))
            print_rows(rows[-len(TUNINGS) - 2:])
            sys.stdout.flush()


def print_rows(rows) -> None:
    for label, name, ms, io, copy in rows:
        print(f"{label:24s} {name:22s} {ms:8.4f} ms {gbps(io, ms):6.0f} GB/s {copy / ms:6.1%} of copy")


if __name__ == "__main__":
    main()
