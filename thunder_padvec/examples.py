"""Built-in example programs: the seed's RoPE and its inputs, shared by the CLI, tests and benchmarks."""

from __future__ import annotations

import torch


def rope_one_entry(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, rope_n_elem: int) -> torch.Tensor:
    """Rotary position embedding on the first ``rope_n_elem`` features of ``x`` (the seed's program)."""
    x_rope = x[..., :rope_n_elem]
    x1 = x_rope[..., : rope_n_elem // 2]
    x2 = x_rope[..., rope_n_elem // 2 :]
    rotated = torch.cat((-x2, x1), dim=-1)
    roped = (x_rope * cos) + (rotated * sin)
    roped.to(dtype=x.dtype)
    return torch.cat((roped, x[..., rope_n_elem:]), dim=-1)


def rope_inputs(batch: int, heads: int, seq: int, head_size: int, rope_n_elem: int, dtype=torch.bfloat16,
                device="cpu", generator: torch.Generator | None = None):
    """Random ``x [batch, heads, seq, head_size]``, ``cos`` and ``sin [seq, rope_n_elem]``."""
    def randn(*shape):
        return torch.randn(*shape, generator=generator, dtype=torch.float32).to(device=device, dtype=dtype)

    return randn(batch, heads, seq, head_size), randn(seq, rope_n_elem), randn(seq, rope_n_elem)


SEED_SHAPE = dict(batch=256, heads=16, seq=1024, head_size=32, rope_n_elem=8)
