"""Runs the seed RoPE under several kernel shapes, twice each, for ncu to compare."""
import thunder_padvec, thunder, torch
from thunder_padvec import schedule
from thunder_padvec.examples import SEED_SHAPE, rope_inputs, rope_one_entry

x, cos, sin = rope_inputs(**SEED_SHAPE, dtype=torch.bfloat16, device="cuda")
for max_row, sharers in ((512, 2), (512, 1), (0, 1)):
    schedule.TUNING.max_row_bytes, schedule.TUNING.max_sharers = max_row, sharers
    j = thunder.jit(rope_one_entry, executors=[thunder_padvec.padvec])
    for _ in range(2):
        j(x, cos, sin, 8)
torch.cuda.synchronize()
