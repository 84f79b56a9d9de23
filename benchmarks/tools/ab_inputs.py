"""Same kernels, two ways of making the inputs, alternating: is a difference in the data or the run?"""
import sys

import thunder_padvec
import thunder
import torch
from thunder_padvec import configs
from thunder_padvec.examples import litgpt_rope, rope_inputs
from thunder_padvec.timing import copy_roofline_ms, graph_median_ms

for cfg in [c for c in configs.ALL if c.id in sys.argv[1:]]:
    n = cfg.rope_n_elem
    x, cos, sin = rope_inputs(cfg.batch, cfg.n_head, cfg.seq, cfg.head_size, n, torch.bfloat16, "cuda")
    halves = [torch.randn(cfg.seq, n // 2, device="cuda").to(torch.bfloat16).repeat(1, 2) for _ in range(2)]
    io = 2 * x.nbytes + 2 * cos.nbytes
    copy = copy_roofline_ms(io)
    for label, c, s in [("random", cos, sin), ("halves", *halves), ("random", cos, sin), ("halves", *halves)]:
        for name, fn in [("padvec", thunder.jit(litgpt_rope, executors=[thunder_padvec.padvec])),
                         ("torch.compile", torch.compile(litgpt_rope, dynamic=False))]:
            fn(x, c, s, n)
            ms = graph_median_ms(lambda: fn(x, c, s, n))
            print(f"{cfg.id:18s} {label:7s} {name:14s} {ms * 1000:7.1f} us {copy / ms:6.1%}")
