"""RoPE configurations: the seed's, LitGPT models' attention shapes at their block size, and GPT-J-6B's
(interleaved rotary)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RopeConfig:
    name: str
    batch: int
    n_head: int
    n_query_groups: int
    head_size: int
    rope_n_elem: int
    seq: int

    @property
    def id(self) -> str:
        return f"{self.name}-b{self.batch}"


SEED = [RopeConfig("seed", b, 16, 4, 32, 8, 1024) for b in (256, 512)]

_LITGPT = [
    ("Llama-2-7b", 32, 32, 128, 128, 4096),
    ("Llama-3-8B", 32, 8, 128, 128, 8192),
    ("Mistral-7B", 32, 8, 128, 128, 4096),
    ("phi-2", 32, 32, 80, 32, 2048),
    ("pythia-160m", 12, 12, 64, 16, 2048),
    ("Gemma-7b", 16, 16, 256, 256, 4096),
    ("Phi-3-mini", 32, 32, 96, 96, 4096),
]
LITGPT = [RopeConfig(name, b, *shape) for name, *shape in _LITGPT for b in (1, 2)]

# GPT-J-style (interleaved) rotary: GPT-J-6B rotates the first 64 of each head's 256 features in pairs
INTERLEAVED = [RopeConfig("GPT-J-6B", b, 16, 16, 256, 64, 2048) for b in (1, 2)]

ALL = SEED + LITGPT + INTERLEAVED
