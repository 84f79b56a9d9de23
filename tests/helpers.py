"""Shared test helpers: random inputs, running through thunder.jit, what a trace left unfused."""

from __future__ import annotations

import thunder
import torch
from thunder.core import prims

from thunder_padvec import ir, padvec
from thunder_padvec.explain import fusions

CLAIMABLE = {
    prims.pad.id, prims.cat.id, prims.slice_prim.id, prims.broadcast_in_dim.id, prims.convert_element_type.id,
    prims.where.id, *(getattr(prims, name).id for name in ir.ELEMENTWISE_OPS if name != "where"),
}


def randn(*shape, dtype=torch.float32, device="cpu", generator=None) -> torch.Tensor:
    """Standard normal values, never all zeros."""
    return torch.randn(*shape, generator=generator).to(device=device, dtype=dtype)


def leaf_prims(bsym):
    if not bsym.subsymbols:
        yield bsym
    for sub in bsym.subsymbols:
        yield from leaf_prims(sub)


def unfused_ops(trace) -> list[str]:
    """Names of pad / cat / slice / pointwise prims the trace still runs outside padvec fusions."""
    fused = {id(b) for _, b in fusions(trace)}
    left = []
    for bsym in trace.bound_symbols:
        if id(bsym) in fused:
            continue
        left += [p.sym.name for p in leaf_prims(bsym) if p.sym.id in CLAIMABLE]
    return left


def jit_and_run(fn, *args, **kwargs):
    jitted = thunder.jit(fn, executors=[padvec])
    out = jitted(*args, **kwargs)
    return jitted, out, thunder.last_traces(jitted)[-1]


def ulp_distance_bf16(a: torch.Tensor, b: torch.Tensor) -> int:
    """Largest distance in bf16 units in the last place (on the ordered integer line)."""
    ia = a.to(torch.bfloat16).view(torch.int16).to(torch.int32)
    ib = b.to(torch.bfloat16).view(torch.int16).to(torch.int32)
    ia = torch.where(ia < 0, -32768 - ia, ia)
    ib = torch.where(ib < 0, -32768 - ib, ib)
    return int((ia - ib).abs().max()) if a.numel() else 0


def grads(fn, x, cos, sin, cotangents):
    """``(outputs, x's gradient)`` of ``fn(x, cos, sin)`` for ``cotangents``, through autograd."""
    x = x.detach().requires_grad_(True)
    outs = fn(x, cos, sin)
    outs = outs if isinstance(outs, tuple) else (outs,)
    torch.autograd.backward(outs, cotangents)
    return outs, x.grad
