"""The host path: what a padvec fusion costs per call beyond launching its kernel, and a cold compile.

``test_fusion_call`` and ``test_bare_launch`` time, in a loop without synchronizing, a padvec
fusion of a tiny RoPE (Python, output allocation, argument packing, launch) and a bare
``cuLaunchKernel`` of the same kernel with the same arguments; the difference is padvec's
overhead. ``test_cold_compile`` times NVRTC compiling the seed's fusion from source.
"""

from __future__ import annotations

import time

import pytest
import thunder
import torch

import thunder_padvec
from thunder_padvec import codegen
from thunder_padvec.examples import SEED_SHAPE, rope_inputs, rope_one_entry
from thunder_padvec.explain import fusions

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

CALLS = 2000


@pytest.fixture(scope="module")
def fusion():
    x, cos, sin = rope_inputs(1, 2, 16, 32, 8, dtype=torch.bfloat16, device="cuda")
    jitted = thunder.jit(rope_one_entry, executors=[thunder_padvec.padvec])
    jitted(x, cos, sin, 8)
    (found, _), = fusions(thunder.last_traces(jitted)[-1])
    return found, (x, cos, sin)


def _per_call_us(fn) -> float:
    fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(CALLS):
        fn()
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return elapsed / CALLS * 1e6


def test_fusion_call(benchmark, fusion):
    fn, args = fusion
    us = _per_call_us(lambda: fn(*args))
    benchmark.extra_info.update(kind="host", what="padvec fusion call", per_call_us=us)
    benchmark(lambda: fn(*args))


def test_bare_launch(benchmark, fusion):
    fn, args = fusion
    spec = fn.last
    driver = spec.module
    out = fn(*args)
    spec.pack.values[: len(args) + len(out)] = [t.data_ptr() for t in (*args, *out)]
    stream = torch.cuda.current_stream().cuda_stream

    def launch():
        driver.launch(spec.params.grid, spec.params.block, spec.pack.params_address, stream)

    us = _per_call_us(launch)
    benchmark.extra_info.update(kind="host", what="bare cuLaunchKernel", per_call_us=us)
    benchmark(launch)


def test_cold_compile(benchmark):
    from thunder_padvec.runtime import nvrtc

    x, cos, sin = rope_inputs(**SEED_SHAPE, dtype=torch.bfloat16, device="cuda")
    jitted = thunder.jit(rope_one_entry, executors=[thunder_padvec.padvec])
    jitted(x, cos, sin, 8)
    (found, _), = fusions(thunder.last_traces(jitted)[-1])
    source = codegen.device_source(codegen.render(found.last.plan, found.last.params))
    major, minor = torch.cuda.get_device_capability()
    start = time.perf_counter()
    nvrtc.compile_cubin(source, f"sm_{major}{minor}")
    seconds = time.perf_counter() - start
    benchmark.extra_info.update(kind="host", what="cold NVRTC compile of the seed RoPE", seconds=seconds)
    benchmark.pedantic(lambda: nvrtc.compile_cubin(source, f"sm_{major}{minor}"), rounds=3)
