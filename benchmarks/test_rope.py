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

from thunder_padvec.bench.cases import EXECUTORS, Unavailable, cases
from thunder_padvec.bench.measure import Built, measure

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="the suite times a CUDA GPU")

CASES = cases()
_built: dict = {}


def _case(case) -> Built:
    if case.id not in _built:
        _built.clear()  # one case's tensors at a time
        _built[case.id] = Built(case)
    return _built[case.id]


@pytest.mark.parametrize("name", EXECUTORS)
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_rope(benchmark, case, name):
    try:
        record, run = measure(_case(case), name)
    except Unavailable as reason:
        pytest.skip(str(reason))
    benchmark.extra_info.update(record)
    benchmark.pedantic(lambda: (run(), torch.cuda.synchronize()), rounds=5, warmup_rounds=1)
