"""Built-in example programs: the seed's RoPE and its inputs, LitGPT's RoPE and attention prologue, GPT-J's
interleaved rotary (as LitGPT-style code and as Hugging Face writes it), and a Llama-style transformer block,
shared by the CLI, tests and benchmarks."""

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


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """LitGPT's rotary embedding of the whole last dim of ``x``."""
    head_size = x.size(-1)
    x1 = x[..., : head_size // 2]
    x2 = x[..., head_size // 2 :]
    rotated = torch.cat((-x2, x1), dim=-1)
    roped = (x * cos) + (rotated * sin)
    return roped.to(dtype=x.dtype)


def gptj_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, rope_n_elem: int | None = None) -> torch.Tensor:
    """GPT-J-style (interleaved) rotary embedding of the first ``rope_n_elem`` features of ``x`` (all by
    default): features ``2i`` and ``2i + 1`` rotate as a pair; ``cos`` and ``sin`` hold each pair's value
    twice. GPT-J-6B rotates 64 of its 256."""
    rope_n_elem = x.size(-1) if rope_n_elem is None else rope_n_elem
    x_rope = x[..., :rope_n_elem]
    x1 = x_rope[..., ::2]
    x2 = x_rope[..., 1::2]
    rotated = torch.stack((-x2, x1), dim=-1).flatten(-2)
    roped = ((x_rope * cos) + (rotated * sin)).to(dtype=x.dtype)
    return roped if rope_n_elem == x.size(-1) else torch.cat((roped, x[..., rope_n_elem:]), dim=-1)


def hf_gptj_rope(x: torch.Tensor, sincos: torch.Tensor, rotary_dim: int) -> torch.Tensor:
    """Hugging Face's GPT-J rotary: ``x [B, T, heads, head_size]``; ``sincos [B, T, rotary_dim]`` holds each
    pair's sin, then each pair's cos, once, and ``repeat_interleave`` spreads them over the pairs."""
    sin, cos = torch.split(sincos, sincos.shape[-1] // 2, dim=-1)
    sin = torch.repeat_interleave(sin[:, :, None, :], 2, 3)
    cos = torch.repeat_interleave(cos[:, :, None, :], 2, 3)
    rot, rest = x[..., :rotary_dim], x[..., rotary_dim:]
    rotated = torch.stack((-rot[..., 1::2], rot[..., ::2]), dim=-1).flatten(-2)
    return torch.cat([rot * cos + rotated * sin, rest], dim=-1)


def hf_llama_rope(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
    """Hugging Face's Llama rotary (``apply_rotary_pos_emb`` with its ``rotate_half``): ``q [B, heads, T,
    head_size]`` and ``k [B, kv_heads, T, head_size]``, in the model the transposes of its projections'
    ``[B, T, heads, head_size]`` views; ``cos`` and ``sin [B, T, head_size]``, one row per position of each
    sequence, broadcast over the heads."""
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)

    def rotate_half(x):
        half = x.shape[-1] // 2
        return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def hf_mrope(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, sections: tuple[int, ...]):
    """Hugging Face's Qwen2-VL multimodal rotary (``apply_multimodal_rotary_pos_emb``): ``cos`` and ``sin [3, B, T,
    head_size]`` hold three position streams (time, height, width); the features' sections (``sections``,
    twice over, summing to ``head_size``) take their cos and sin from streams 0, 1, 2, 0, 1, 2 by integer
    index, then Llama's rotary on ``q [B, heads, T, head_size]`` and ``k [B, kv_heads, T, head_size]``."""
    def pick(t):
        parts = t.split(list(sections) * 2, dim=-1)
        return torch.cat([part[i % 3] for i, part in enumerate(parts)], dim=-1)

    return hf_llama_rope(q, k, pick(cos), pick(sin))


def litgpt_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, rope_n_elem: int) -> torch.Tensor:
    """RoPE on the first ``rope_n_elem`` features of ``x [B, nh, T, hs]``, the rest passed through."""
    if rope_n_elem == x.size(-1):
        return apply_rope(x, cos, sin)
    return torch.cat((apply_rope(x[..., :rope_n_elem], cos, sin), x[..., rope_n_elem:]), dim=-1)


def qkv_split_rope(qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, n_head: int, n_query_groups: int,
                   head_size: int, rope_n_elem: int):
    """LitGPT's attention prologue from ``qkv [B, T, (n_head + 2 * n_query_groups) * head_size]``:
    view, permute, split, expand the keys and values for grouped queries, RoPE on q and k."""
    B, T, _ = qkv.shape
    q_per_kv = n_head // n_query_groups
    qkv = qkv.view(B, T, n_query_groups, q_per_kv + 2, head_size)
    qkv = qkv.permute(0, 2, 3, 1, 4)  # (B, groups, q_per_kv + 2, T, hs)
    q, k, v = qkv.split((q_per_kv, 1, 1), dim=2)
    if n_query_groups != n_head:
        k = k.expand(B, n_query_groups, q_per_kv, T, head_size)
        v = v.expand(B, n_query_groups, q_per_kv, T, head_size)
    q = q.reshape(B, -1, T, head_size)
    k = k.reshape(B, -1, T, head_size)
    v = v.reshape(B, -1, T, head_size)
    return litgpt_rope(q, cos, sin, rope_n_elem), litgpt_rope(k, cos, sin, rope_n_elem), v


class AttentionBlock(torch.nn.Module):
    """A Llama-style attention block: qkv projection, view, permute, split, grouped-query expand,
    RoPE on q and k (:func:`qkv_split_rope`), causal scaled dot-product attention, output projection.
    Its ``forward`` takes ``x [B, T, n_embd]`` and ``cos``, ``sin [T, rope_n_elem]``."""

    def __init__(self, n_embd=64, n_head=4, n_query_groups=2, head_size=16, rope_n_elem=16):
        super().__init__()
        self.n_head, self.groups, self.head_size, self.rope_n_elem = n_head, n_query_groups, head_size, rope_n_elem
        self.qkv = torch.nn.Linear(n_embd, (n_head + 2 * n_query_groups) * head_size, bias=False)
        self.proj = torch.nn.Linear(n_head * head_size, n_embd, bias=False)

    def forward(self, x, cos, sin):
        B, T, _ = x.shape
        q, k, v = qkv_split_rope(self.qkv(x), cos, sin, self.n_head, self.groups, self.head_size, self.rope_n_elem)
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(B, T, self.n_head * self.head_size))


class RMSNorm(torch.nn.Module):
    def __init__(self, size: int, eps: float = 1e-5):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight).to(x.dtype)


class LlamaBlock(torch.nn.Module):
    """A whole Llama-style transformer block: RMSNorm, :class:`AttentionBlock`, RMSNorm, SwiGLU MLP, with
    the residual adds. Beside RoPE it has the pointwise ops that ``padvec`` claims and ``padvec_cat``
    leaves to the executors after it: the norms' scaling, the gating, the residual adds."""

    def __init__(self, n_embd=64, n_head=4, n_query_groups=2, head_size=16, rope_n_elem=16, intermediate=96):
        super().__init__()
        self.norm1, self.norm2 = RMSNorm(n_embd), RMSNorm(n_embd)
        self.attn = AttentionBlock(n_embd, n_head, n_query_groups, head_size, rope_n_elem)
        self.fc1 = torch.nn.Linear(n_embd, intermediate, bias=False)
        self.fc2 = torch.nn.Linear(n_embd, intermediate, bias=False)
        self.out = torch.nn.Linear(intermediate, n_embd, bias=False)

    def forward(self, x, cos, sin):
        x = x + self.attn(self.norm1(x), cos, sin)
        h = self.norm2(x)
        return x + self.out(torch.nn.functional.silu(self.fc1(h)) * self.fc2(h))
