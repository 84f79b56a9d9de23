"""Measuring one executor on one case: a correctness check against eager, then device time.

Device time is the median of CUDA-graph replays of one call, the L2 flushed before each (the host's
per-call overhead is left out, for every executor alike); the copy roofline is a device-to-device
copy of the case's minimal IO bytes, timed in the same process.
"""

from __future__ import annotations

import gc

import torch

from ..timing import copies_ms, copy_roofline_ms, gbps, graph_median_ms
from .cases import Case, Unavailable, backward_bytes, build, executor, in_output_layouts, with_backward


OWN = ("padvec",)  # executors whose failures fail the suite; a peer's failure skips its row with the reason

# The layout of the fwd+bwd rows' cotangents: "row-major" (drawn so, the same tensors for every executor), or
# "outputs": each executor's backward reads them laid out as its own forward's outputs are, as in a training
# step (``cases.in_output_layouts``); the suite sets it from PADVEC_COTANGENTS (benchmarks/conftest.py)
COTANGENTS = "row-major"


class Built:
    """One case's inputs and reference, built once for all executors."""

    def __init__(self, case: Case, seed: int = 0):
        self.case = case
        built = build(case, torch.Generator().manual_seed(seed))
        self.fn, self.args, self.expected, self.io_bytes, self.cotangents = built
        self.copy_ms = copy_roofline_ms(self.io_bytes)
        self.pass_copy_ms = None  # fwd+bwd: the forward's bytes copied, then the backward's (two launches)
        if self.cotangents is not None:
            backward = backward_bytes(self.args, self.cotangents)
            self.pass_copy_ms = copies_ms((self.io_bytes - backward, backward))


def check(name: str, outputs, expected, exact_padvec: bool = True) -> None:
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    for out, ref in zip(outputs, expected):
        if name == "padvec" and exact_padvec:  # the forward keeps eager's rounding steps
            torch.testing.assert_close(out, ref, rtol=0, atol=0)
        else:  # fused compilers may keep float32 intermediates
            torch.testing.assert_close(out.float(), ref.float(), rtol=2e-2, atol=8e-2)


def kernels(jitted) -> list[str]:
    """What padvec built for the last call of ``jitted``, a line per fusion: its launch, on a GPU the
    kernel's registers, blocks per SM and waves, each segment's thread mapping, where launch variants were
    measured their times and the pick, and where the kernel was planned again with one row a thread what
    that weighed."""
    from ..explain import explain

    lines = []
    for report in explain(jitted):
        parts = [f"{report.name} ({report.trace})", str(report.launch or report.source)]
        parts += [str(report.resources)] if report.resources else []
        parts += [seg.mapping for seg in (report.plan.segments if report.plan else ())]
        parts += report.decisions
        lines.append(" | ".join(parts))
    return lines


def peak_bytes(fn, args) -> int:
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fn(*args)
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - base


def release_cached_memory() -> None:
    """Hands the memory that earlier executors left in PyTorch's caching allocator back to the driver,
    so that each executor's tensors are placed as in a process of its own. Without it, on the H200,
    padvec's fwd+bwd of the seed's RoPE at batch 512 took 574 and 576 µs right after eager's or
    Thunder's (peaks of 1.7 and 2.3 GiB), 524 µs measured first (``benchmarks/NOTES.md``)."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def measure(built: Built, name: str) -> tuple[dict, object]:
    """``(record, run)``: the results record of executor ``name`` on the case, and a callable running
    it once; :class:`Unavailable` where the executor can't run here. The memory earlier executors
    cached is released first (``release_cached_memory``)."""
    case = built.case
    release_cached_memory()
    if name == "copy":
        src = torch.empty(built.io_bytes // 2, dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        ms, peak = built.copy_ms, built.io_bytes

        def run():
            return dst.copy_(src)
    else:
        fn = jitted = executor(name, case, built.fn)
        try:
            if built.cotangents is not None:  # laid out from the executor's own forward: inside the try
                cotangents = built.cotangents
                if COTANGENTS == "outputs":
                    cotangents = in_output_layouts(fn, built.args, cotangents)
                fn = with_backward(fn, cotangents)
            # a backward is Thunder's decomposition, not autograd's kernels: compared with a tolerance
            check(name, fn(*built.args), built.expected, exact_padvec=built.cotangents is None)
            peak = peak_bytes(fn, built.args)
            ms = graph_median_ms(lambda: fn(*built.args))
        except (AssertionError, torch.AcceleratorError) as err:
            if name in OWN:  # ours must hold; a peer that disagrees with eager or can't be captured is reported
                raise
            raise Unavailable(f"{name}: {type(err).__name__}: {' '.join(str(err).split())[:240]}") from err

        def run():
            return fn(*built.args)

    record = dict(
        config=case.config.id, form=case.form, pass_=case.pass_, dtype=case.dtype, executor=name,
        median_ms=ms, io_bytes=built.io_bytes, gbps=gbps(built.io_bytes, ms), roofline_fraction=built.copy_ms / ms,
        copy_ms=built.copy_ms, peak_memory_bytes=peak, gpu=torch.cuda.get_device_name(),
    )
    if name == "padvec":
        record["kernels"] = kernels(jitted)
    if built.cotangents is not None and COTANGENTS != "row-major":
        record["cotangents"] = COTANGENTS
    if built.pass_copy_ms:
        record.update(pass_copy_ms=built.pass_copy_ms, pass_roofline_fraction=built.pass_copy_ms / ms)
    return record, run


_built: dict = {}


def built_once(key: str, make):
    """``make()``, kept for the tests of the same case: one case's tensors at a time."""
    if key not in _built:
        _built.clear()
        _built[key] = make()
    return _built[key]


def bench(benchmark, measured, rounds: int) -> None:
    """One suite row: ``measured()`` gives ``(record, run)`` (an executor that can't run here skips with
    the reason); the record lands in ``extra_info`` and pytest-benchmark times ``run`` too."""
    import pytest

    try:
        record, run = measured()
    except Unavailable as reason:
        pytest.skip(str(reason))
    benchmark.extra_info.update(record)
    benchmark.pedantic(lambda: (run(), torch.cuda.synchronize()), rounds=rounds, warmup_rounds=1)


__all__ = ["Built", "Unavailable", "bench", "built_once", "check", "measure", "peak_bytes", "release_cached_memory"]
