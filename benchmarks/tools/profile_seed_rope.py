import thunder_padvec, thunder, torch
from thunder_padvec.examples import SEED_SHAPE, rope_inputs, rope_one_entry
x, cos, sin = rope_inputs(**SEED_SHAPE, dtype=torch.bfloat16, device="cuda")
j = thunder.jit(rope_one_entry, executors=[thunder_padvec.padvec])
for _ in range(4): j(x, cos, sin, 8)
torch.cuda.synchronize()
