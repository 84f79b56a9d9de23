"""A whole Llama-style block, forward and backward, under each executor: what padvec's RoPE kernels, and
the regions it takes, are worth in a model beside torch.compile.

The block is :class:`~thunder_padvec.examples.LlamaBlock` (RMSNorm, qkv projection, RoPE, causal
attention, output projection, RMSNorm, SwiGLU MLP, residual adds) at a LitGPT model's attention shape and
MLP width, batch 1, bf16. One call is the forward and the gradients of the input and every weight. Thunder's
executors are listed after padvec's and before a fusion executor: ``thunder`` is Thunder's defaults as
installed (with nvFuser where it imports), ``padvec`` is ``[padvec, *defaults]``, and ``+torchcompile``
appends Thunder's torch.compile executor. The copy row is a device-to-device copy of the RoPE prologue's
minimal IO, forward then backward: what RoPE's share of the block takes at the roofline.
"""

from __future__ import annotations

from dataclasses import dataclass

import thunder_padvec  # noqa: F401  (the compat shim runs before Thunder is imported)
import thunder
import torch

from .. import configs
from ..examples import LlamaBlock
from . import cases
from .cases import Case, Unavailable, backward_bytes, build

# name: (executors before Thunder's defaults, after them); None: not Thunder
EXECUTORS = {
    "eager": None,
    "torch.compile": None,
    "thunder": ((), ()),
    "thunder+torchcompile": ((), ("torchcompile",)),
    "padvec": (("padvec",), ()),
    "padvec_cat": (("padvec_cat",), ()),
    "padvec+torchcompile": (("padvec",), ("torchcompile",)),
    "padvec_cat+torchcompile": (("padvec_cat",), ("torchcompile",)),
}
OWN = tuple(name for name in EXECUTORS if name.startswith("padvec"))
TOLERANCE = 5e-2  # relative error norm of each gradient against eager's (bf16; a wrong RoPE is off by ~1)


@dataclass(frozen=True)
class BlockCase:
    config: configs.RopeConfig
    n_embd: int
    intermediate: int

    @property
    def id(self) -> str:
        return f"{self.config.id}-block"


def _config(name: str, batch: int) -> configs.RopeConfig:
    return next(c for c in configs.LITGPT if c.name == name and c.batch == batch)


BLOCKS = [BlockCase(_config("Llama-2-7b", 1), 4096, 11008), BlockCase(_config("Llama-3-8B", 1), 4096, 14336)]


class BuiltBlock:
    """One case's block, inputs and eager gradients, built once for all executors."""

    def __init__(self, case: BlockCase, device: str = "cuda", seed: int = 0):
        c = case.config
        generator = torch.Generator().manual_seed(seed)

        def randn(*shape):
            return torch.randn(*shape, generator=generator).to(device=device, dtype=torch.bfloat16)

        self.case = case
        torch.manual_seed(seed)
        with torch.device(device):
            self.model = LlamaBlock(case.n_embd, c.n_head, c.n_query_groups, c.head_size, c.rope_n_elem,
                                    case.intermediate).to(torch.bfloat16)
        self.params = list(self.model.parameters())
        x = randn(c.batch, c.seq, case.n_embd).requires_grad_(True)
        cos, sin = (randn(c.seq, c.rope_n_elem // 2).repeat(1, 2) for _ in range(2))
        self.args = (x, cos, sin)
        self.cotangent = randn(c.batch, c.seq, case.n_embd)
        self.expected = self.step(self.model)(*self.args)
        rope = Case(c, "qkv_split_rope", "bfloat16", "fwd+bwd")
        _, rope_args, _, rope_io, rope_cotangents = build(rope, generator, device=device)
        backward = backward_bytes(rope_args, rope_cotangents)
        self.rope_pass_bytes = (rope_io - backward, backward)

    def step(self, fn):
        """Forward and backward in one call: the gradients of the input and of every weight."""
        def step(x, cos, sin):
            return torch.autograd.grad(fn(x, cos, sin), [x, *self.params], self.cotangent)

        return step


def executor(name: str, model):
    """``model`` run the way ``name`` does (see ``EXECUTORS``)."""
    if EXECUTORS[name] is None:  # eager, torch.compile: as the RoPE suite runs them
        return cases.executor(name, None, model)
    before, after = EXECUTORS[name]
    listed = [*(thunder.get_executor(e) for e in before), *thunder.get_default_executors(),
              *(thunder.get_executor(e) for e in after)]
    return thunder.jit(model, executors=listed)


def relative_errors(grads, expected) -> list[float]:
    return [float((g.float() - e.float()).norm() / e.float().norm().clamp_min(1e-30)) for g, e in zip(grads, expected)]


def fusion_counts(jitted) -> dict[str, int]:
    """Fusions (one kernel or more each) in the last forward and backward execution traces of a Thunder
    function; padvec's among them."""
    from ..explain import fusions

    counts = {}
    for label, getter in (("forward", thunder.last_traces), ("backward", thunder.last_backward_traces)):
        trace = getter(jitted)[-1]
        counts[label] = sum(1 for b in trace.bound_symbols if b.sym.is_fusion)
        counts[f"padvec {label}"] = len(fusions(trace))
    return counts


def checked(built: BuiltBlock, name: str):
    """``(step, jitted)``: executor ``name``'s forward-and-backward call, run once and checked against
    eager's gradients. A peer that disagrees, or fails, raises :class:`Unavailable` with the reason; padvec's
    own executors raise."""
    try:
        jitted = executor(name, built.model)
        step = built.step(jitted)
        errors = relative_errors(step(*built.args), built.expected)
        worst = max(errors)
        if not worst <= TOLERANCE:  # also NaN
            raise AssertionError(f"{name}: a gradient's relative error {worst:.3g} against eager's "
                                 f"(at most {TOLERANCE}); all: {[f'{e:.2g}' for e in errors]}")
    except Exception as err:
        if name in OWN:
            raise
        raise Unavailable(f"{name}: {type(err).__name__}: {' '.join(str(err).split())[:240]}") from err
    return step, jitted


def measure(built: BuiltBlock, name: str) -> tuple[dict, object]:
    """``(record, run)`` of executor ``name`` (or ``"copy"``) on the case: device time (CUDA-graph replays,
    L2 flushed), the time of a call with its host work (CUDA events around it, one call at a time), peak
    memory and, for Thunder, the fusions of each trace."""
    from ..timing import copies_ms, graph_median_ms, median_ms
    from .measure import kernels, peak_bytes, release_cached_memory

    case = built.case
    release_cached_memory()
    extra = {}
    if name == "copy":
        pairs = [torch.empty(n // 2, dtype=torch.uint8, device="cuda") for n in built.rope_pass_bytes]
        pairs = [(src, torch.empty_like(src)) for src in pairs]
        ms = call_ms = copies_ms(built.rope_pass_bytes)
        peak = sum(built.rope_pass_bytes)

        def run():
            return [dst.copy_(src) for src, dst in pairs]
    else:
        step, jitted = checked(built, name)

        def run():
            return step(*built.args)

        peak = peak_bytes(step, built.args)
        call_ms = median_ms(run, repeats=20, warmup=2, flush=False)
        try:
            ms = graph_median_ms(run, repeats=20)
        except Exception as err:
            if name in OWN:
                raise
            raise Unavailable(f"{name} can't be captured in a CUDA graph: {type(err).__name__}: "
                              f"{' '.join(str(err).split())[:200]}") from err
        if EXECUTORS[name] is not None:
            extra["fusions"] = fusion_counts(jitted)
        if name in OWN:
            extra["kernels"] = kernels(jitted)
    record = dict(config=case.config.id, form="block", pass_="fwd+bwd", dtype="bfloat16", executor=name,
                  median_ms=ms, call_ms=call_ms, peak_memory_bytes=peak, n_embd=case.n_embd,
                  intermediate=case.intermediate, gpu=torch.cuda.get_device_name(), **extra)
    return record, run


__all__ = ["BLOCKS", "BlockCase", "BuiltBlock", "EXECUTORS", "checked", "fusion_counts", "measure"]
