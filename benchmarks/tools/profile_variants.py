"""Runs the seed RoPE under two kernel shapes, twice each, for ncu to compare."""
import thunder_padvec
import thunder
import torch
from thunder_padvec import schedule
from thunder_padvec.examples import SEED_SHAPE, rope_inputs, rope_one_entry

x, cos, sin = rope_inputs(**SEED_SHAPE, dtype=torch.bfloat16, device="cuda")
for max_row in (512, 0):
    schedule.TUNING.max_row_bytes = max_row
    j = thunder.jit(rope_one_entry, executors=[thunder_padvec.padvec])
    for _ in range(2):
        j(x, cos, sin, 8)
y = torch.empty_like(x)
y.copy_(x)
torch.cuda.synchronize()
