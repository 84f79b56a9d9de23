"""Runs padvec's RoPE kernel of the named configurations twice each, for ncu to measure."""
import sys

import thunder_padvec
import thunder
import torch
from thunder_padvec import configs
from thunder_padvec.examples import litgpt_rope, rope_inputs, rope_one_entry

for cfg in [c for c in configs.ALL if c.id in sys.argv[1:]]:
    x, cos, sin = rope_inputs(cfg.batch, cfg.n_head, cfg.seq, cfg.head_size, cfg.rope_n_elem, torch.bfloat16, "cuda")
    fn = rope_one_entry if cfg.name == "seed" else litgpt_rope
    j = thunder.jit(fn, executors=[thunder_padvec.padvec])
    for _ in range(2):
        j(x, cos, sin, cfg.rope_n_elem)
torch.cuda.synchronize()
