"""Shared test helpers: random inputs, running through thunder.jit, what a trace left unfused, training beside
eager."""

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


def train(model, make_jit, x, cos, sin, target, steps=4):
    """``(losses, jitted)``: ``make_jit(model)`` trained ``steps`` SGD steps on an MSE loss."""
    model = make_jit(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x, cos, sin).float(), target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses, model


def train_beside_eager(make_model, executors, device, dtype, generator, steps=2):
    """``(losses, eager losses, jitted)``: a model of ``make_model()`` (taking ``x [2, 8, 64]`` and ``cos``,
    ``sin [8, 16]``) trained in eager, and its twin with the same weights under ``thunder.jit(executors=...)``,
    on the same fresh random inputs."""
    torch.manual_seed(0)
    reference = make_model().to(device=device, dtype=dtype)
    twin = make_model().to(device=device, dtype=dtype)
    twin.load_state_dict(reference.state_dict())
    x = randn(2, 8, 64, dtype=dtype, device=device, generator=generator)
    cos = randn(8, 16, dtype=dtype, device=device, generator=generator)
    sin = randn(8, 16, dtype=dtype, device=device, generator=generator)
    target = randn(2, 8, 64, device=device, generator=generator)
    eager, _ = train(reference, lambda m: m, x, cos, sin, target, steps)
    losses, jitted = train(twin, lambda m: thunder.jit(m, executors=executors), x, cos, sin, target, steps)
    return losses, eager, jitted
