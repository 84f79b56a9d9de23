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

from thunder_padvec.bench.cases import EXECUTORS, cases
from thunder_padvec.bench.measure import Built, bench, built_once, measure

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="the suite times a CUDA GPU")

CASES = cases()


@pytest.mark.parametrize("name", EXECUTORS)
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_rope(benchmark, case, name):
    bench(benchmark, lambda: measure(built_once(case.id, lambda: Built(case)), name), rounds=5)
