"""Runs the seed RoPE through padvec a few times, for ncu to profile one launch."""
import thunder_padvec
import thunder
import torch
from thunder_padvec.examples import SEED_SHAPE, rope_inputs, rope_one_entry

x, cos, sin = rope_inputs(**SEED_SHAPE, dtype=torch.bfloat16, device="cuda")
jitted = thunder.jit(rope_one_entry, executors=[thunder_padvec.padvec])
for _ in range(4):
    jitted(x, cos, sin, 8)
torch.cuda.synchronize()
