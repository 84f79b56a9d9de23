"""The RoPE benchmark cases and the executors compared on them.

A case is a configuration (``thunder_padvec.configs``), a form ("rope": RoPE of a given
``[B, nh, T, hs]`` tensor; "qkv_split_rope": LitGPT's prologue from the fused ``qkv`` tensor;
"gptj_rope": GPT-J-style interleaved rotary of a given ``[B, nh, T, hs]`` tensor), a pass and a
dtype. ``build(case)`` makes its inputs and reference; ``executor(name, case)`` returns a callable or
raises ``Unavailable`` with the reason.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import thunder_padvec  # noqa: F401  (the compat shim runs before Thunder is imported)
import thunder
import torch

from .. import configs
from ..examples import gptj_rope, litgpt_rope, qkv_split_rope, rope_one_entry

EXECUTORS = ["eager", "torch.compile", "thunder", "padvec", "liger", "nvfuser", "copy"]


class Unavailable(Exception):
    """An executor that cannot run a case here; the message says why."""


@dataclass(frozen=True)
class Case:
    config: configs.RopeConfig
    form: str  # "rope", "qkv_split_rope" or "gptj_rope"
    dtype: str
    pass_: str = "fwd"

    @property
    def id(self) -> str:
        return f"{self.config.id}-{self.form}-{self.dtype}-{self.pass_}"


def forms(cfg: configs.RopeConfig) -> list[str]:
    """The forms a configuration is measured in: its model's own."""
    if cfg in configs.INTERLEAVED:
        return ["gptj_rope"]
    return ["rope"] if cfg.name == "seed" else ["rope", "qkv_split_rope"]


def cases() -> list[Case]:
    found = []
    for cfg in configs.ALL:
        dtypes = ["bfloat16", "float16", "float32"] if cfg.name == "seed" and cfg.batch == 256 else ["bfloat16"]
        for pass_ in ("fwd", "fwd+bwd"):
            found += [Case(cfg, form, d, pass_) for form in forms(cfg)
                      for d in (dtypes if form == "rope" else ["bfloat16"])]
    return found


def _program(case: Case):
    c = case.config
    if case.form == "qkv_split_rope":
        return functools.partial(qkv_split_rope, n_head=c.n_head, n_query_groups=c.n_query_groups,
                                 head_size=c.head_size, rope_n_elem=c.rope_n_elem)
    fn = gptj_rope if case.form == "gptj_rope" else rope_one_entry if c.name == "seed" else litgpt_rope
    return functools.partial(fn, rope_n_elem=c.rope_n_elem)


def with_backward(fn, cotangents):
    """Forward and backward of ``fn`` in one call: the gradient of ``x`` (its first argument)."""
    def forward_backward(x, cos, sin):
        outs = fn(x, cos, sin)
        outs = outs if isinstance(outs, tuple) else (outs,)
        return torch.autograd.grad(outs, x, cotangents)

    return forward_backward


def in_output_layouts(fn, args, cotangents) -> tuple:
    """``cotangents`` (the same values) laid out as ``fn``'s outputs are: what a training step hands the
    backward, where the op after RoPE (an attention) returns its inputs' gradients in their layout (SDPA's
    backward allocates them ``empty_like`` its inputs). ``fn`` runs once, with autograd on, as a training
    step's forward runs (under ``no_grad`` a jitted function may trace another program)."""
    outs = fn(*args)
    outs = outs if isinstance(outs, tuple) else (outs,)
    return tuple(torch.empty_like(o.detach()).copy_(c) for o, c in zip(outs, cotangents))


def backward_bytes(args, cotangents) -> int:
    """The backward's minimal IO: reading the cotangents, cos and sin, writing x's gradient."""
    x, cos, sin = args
    return sum(c.nbytes for c in cotangents) + cos.nbytes + sin.nbytes + x.nbytes


def minimal_io_bytes(inputs, outputs) -> int:
    """Every input read once, every output written once, but an output eager returns as a view of an input
    (v, where groups == heads): that one is not written."""
    storages = {a.untyped_storage().data_ptr() for a in inputs}
    return sum(a.nbytes for a in inputs) + sum(o.nbytes for o in outputs
                                                if o.untyped_storage().data_ptr() not in storages)


def build(case: Case, generator: torch.Generator | None = None, device: str = "cuda"):
    """``(fn, args, expected outputs, io_bytes, cotangents)``: minimal IO reads each input and writes each
    output once; in "fwd+bwd" the backward adds reading the cotangents, cos and sin and writing x's
    gradient, and the expected outputs are that gradient."""
    c, dtype = case.config, getattr(torch, case.dtype)

    def randn(*shape):
        return torch.randn(*shape, generator=generator, dtype=torch.float32).to(device=device, dtype=dtype)

    if case.form == "qkv_split_rope":
        x = randn(c.batch, c.seq, (c.n_head + 2 * c.n_query_groups) * c.head_size)
    else:
        x = randn(c.batch, c.n_head, c.seq, c.head_size)
    # cos and sin as a RoPE cache holds them: the same frequencies in both halves of a row (in both
    # features of a pair, interleaved)
    halves = (randn(c.seq, c.rope_n_elem // 2) for _ in range(2))
    cos, sin = (h.repeat_interleave(2, -1) if case.form == "gptj_rope" else h.repeat(1, 2) for h in halves)
    args = (x, cos, sin)
    fn = _program(case)
    expected = fn(*args)
    outputs = expected if isinstance(expected, tuple) else (expected,)
    io_bytes = minimal_io_bytes(args, outputs)
    if case.pass_ == "fwd":
        return fn, args, outputs, io_bytes, None
    x = x.requires_grad_(True)
    cotangents = tuple(randn(*o.shape) for o in outputs)
    expected = with_backward(fn, cotangents)(*args)
    io_bytes += backward_bytes(args, cotangents)
    return fn, args, expected, io_bytes, cotangents


def _liger(case: Case, fn):
    try:
        from liger_kernel.transformers.rope import liger_rotary_pos_emb
    except Exception as err:  # not installed, or its Triton does not load
        raise Unavailable(f"liger-kernel does not import: {type(err).__name__}: {err}") from err
    c = case.config
    if case.form == "gptj_rope":
        raise Unavailable("Liger-Kernel's rope rotates the halves of a head, not interleaved pairs")
    if c.rope_n_elem != c.head_size:
        raise Unavailable(f"Liger-Kernel's rope rotates whole heads; this configuration rotates {c.rope_n_elem} "
                          f"of {c.head_size} features")

    # Liger takes cos and sin as [1, T, hs] and reads only their first halves (a RoPE cache's halves are equal).
    def rope(x, cos, sin):
        q, _ = liger_rotary_pos_emb(x, x[:, :1], cos[None], sin[None])
        return q

    if case.form == "rope":
        return rope

    def qkv_form(qkv, cos, sin):
        B, T, _ = qkv.shape
        q_per_kv = c.n_head // c.n_query_groups
        parts = qkv.view(B, T, c.n_query_groups, q_per_kv + 2, c.head_size).permute(0, 2, 3, 1, 4)
        q, k, v = parts.split((q_per_kv, 1, 1), dim=2)
        k = k.expand(B, c.n_query_groups, q_per_kv, T, c.head_size).reshape(B, -1, T, c.head_size)
        v = v.expand(B, c.n_query_groups, q_per_kv, T, c.head_size).reshape(B, -1, T, c.head_size)
        q, k = liger_rotary_pos_emb(q.reshape(B, -1, T, c.head_size), k, cos[None], sin[None])
        return q, k, v

    return qkv_form


def executor(name: str, case: Case, fn):
    """A callable running ``fn`` the way ``name`` does."""
    if name == "eager":
        return fn
    if name == "torch.compile":
        torch._dynamo.reset()  # static shapes, no automatic dynamic shapes carried over from other cases
        return torch.compile(fn, dynamic=False)
    if name == "thunder":
        return thunder.jit(fn)
    if name == "padvec":
        return thunder.jit(fn, executors=[thunder_padvec.padvec])
    if name == "liger":
        return _liger(case, fn)
    if name == "nvfuser":
        try:
            import nvfuser  # noqa: F401
        except Exception as err:
            raise Unavailable(f"nvfuser does not import: {type(err).__name__}: {err}".splitlines()[0]) from err
        return thunder.jit(fn, executors=["nvfuser"])
    raise ValueError(name)
