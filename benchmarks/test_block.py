"""A Llama-style block's forward and backward under every executor, side by side (``thunder_padvec.bench.block``).

    pytest benchmarks/test_block.py --benchmark-only --benchmark-json=run_block.json

Each record lands in ``extra_info``; ``python benchmarks/report.py`` shows them in a table of their own.
"""

from __future__ import annotations

import pytest
import torch

from thunder_padvec.bench.block import BLOCKS, EXECUTORS, BuiltBlock, measure
from thunder_padvec.bench.measure import bench, built_once

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="the suite times a CUDA GPU")


@pytest.mark.parametrize("name", [*EXECUTORS, "copy"])
@pytest.mark.parametrize("case", BLOCKS, ids=[c.id for c in BLOCKS])
def test_block(benchmark, case, name):
    bench(benchmark, lambda: measure(built_once(case.id, lambda: BuiltBlock(case)), name), rounds=3)
