"""Runs padvec's RoPE kernel of the named configurations twice each, for ncu to measure; with
``--peer``, torch.compile's kernels of the same call as well (ncu's kernel filter picks them)."""
import sys

import thunder_padvec
import thunder
import torch
from thunder_padvec import configs
from thunder_padvec.examples import litgpt_rope, rope_inputs, rope_one_entry

for cfg in [c for c in configs.ALL if c.id in sys.argv[1:]]:
    x, cos, sin = rope_inputs(cfg.batch, cfg.n_head, cfg.seq, cfg.head_size, cfg.rope_n_elem, torch.bfloat16, "cuda")
    fn = rope_one_entry if cfg.name == "seed" else litgpt_rope
    runs = [thunder.jit(fn, executors=[thunder_padvec.padvec])]
    if "--peer" in sys.argv:
        torch._dynamo.reset()
        runs.append(torch.compile(fn, dynamic=False))
    for run in runs:
        for _ in range(2):
            run(x, cos, sin, cfg.rope_n_elem)
torch.cuda.synchronize()
