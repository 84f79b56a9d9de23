"""A Llama-style block's forward and backward under every executor, side by side (``thunder_padvec.bench.block``).

    pytest benchmarks/test_block.py --benchmark-only --benchmark-json=run_block.json

Each record lands in ``extra_info``; ``python benchmarks/report.py`` shows them in a table of their own.
"""

from __future__ import annotations

import pytest
import torch

from thunder_padvec.bench.block import BLOCKS, EXECUTORS, BuiltBlock, measure
from thunder_padvec.bench.cases import Unavailable

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="the suite times a CUDA GPU")

_built: dict = {}


def _case(case) -> BuiltBlock:
    if case.id not in _built:
        _built.clear()  # one case's block at a time
        _built[case.id] = BuiltBlock(case)
    return _built[case.id]


@pytest.mark.parametrize("name", [*EXECUTORS, "copy"])
@pytest.mark.parametrize("case", BLOCKS, ids=[c.id for c in BLOCKS])
def test_block(benchmark, case, name):
    try:
        record, run = measure(_case(case), name)
    except Unavailable as reason:
        pytest.skip(str(reason))
    benchmark.extra_info.update(record)
    benchmark.pedantic(lambda: (run(), torch.cuda.synchronize()), rounds=3, warmup_rounds=1)
