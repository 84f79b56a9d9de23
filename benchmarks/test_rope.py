"""The RoPE suite: every case, every executor side by side, with the copy roofline of the same bytes.

    pytest benchmarks/ --benchmark-only --benchmark-json=run.json
    python benchmarks/report.py run.json

Device time is the median of CUDA-graph replays of one call, the L2 flushed before each (so the
host's per-call overhead is left out, for every executor alike); pytest-benchmark's own timing of
``call + synchronize`` is kept beside it. Each record lands in ``extra_info``.
"""

from __future__ import annotations

import pytest
import torch

from cases import EXECUTORS, Unavailable, build, cases, executor
from thunder_padvec.timing import copy_roofline_ms, gbps, graph_median_ms

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="the suite times a CUDA GPU")

CASES = cases()
_built: dict = {}
_copy_ms: dict = {}


def _case(case):
    if case.id not in _built:
        _built.clear()  # one case's tensors at a time
        _built[case.id] = build(case, torch.Generator().manual_seed(0))
    return _built[case.id]


def _check(name, outputs, expected):
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    for out, ref in zip(outputs, expected):
        if name == "padvec":  # the same rounding steps as eager
            assert torch.equal(out, ref)
        else:  # fused compilers may keep float32 intermediates
            torch.testing.assert_close(out.float(), ref.float(), rtol=2e-2, atol=8e-2)


def _peak_bytes(fn, args) -> int:
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fn(*args)
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - base


@pytest.mark.parametrize("name", EXECUTORS)
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_rope(benchmark, case, name):
    fn, args, expected, io_bytes = _case(case)
    if name == "copy":
        ms = _copy_ms.setdefault(case.id, copy_roofline_ms(io_bytes))
        src = torch.empty(io_bytes // 2, dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        run, peak = (lambda: dst.copy_(src)), io_bytes
    else:
        try:
            run_fn = executor(name, case, fn)
        except Unavailable as reason:
            pytest.skip(str(reason))
        _check(name, run_fn(*args), expected)
        peak = _peak_bytes(run_fn, args)
        ms = graph_median_ms(lambda: run_fn(*args))

        def run():
            return run_fn(*args)

    copy_ms = _copy_ms.setdefault(case.id, copy_roofline_ms(io_bytes))
    benchmark.extra_info.update(
        config=case.config.id, form=case.form, pass_=case.pass_, dtype=case.dtype, executor=name,
        median_ms=ms, io_bytes=io_bytes, gbps=gbps(io_bytes, ms), roofline_fraction=copy_ms / ms,
        copy_ms=copy_ms, peak_memory_bytes=peak, gpu=torch.cuda.get_device_name(),
    )
    benchmark.pedantic(lambda: (run(), torch.cuda.synchronize()), rounds=5, warmup_rounds=1)
