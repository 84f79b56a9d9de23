"""The host path: what a padvec fusion costs per call beyond launching its kernel, and a cold compile.

``test_fusion_call`` and ``test_bare_launch`` time, in loops without synchronizing, a padvec
fusion of a tiny RoPE (Python, output allocation, argument packing, launch) and a bare
``cuLaunchKernel`` of the same kernel with the same arguments, in rounds taken in turn; the
difference is padvec's overhead. ``test_cold_compile`` times NVRTC compiling the seed's fusion from source.
"""

from __future__ import annotations

import statistics
import time

import pytest
import thunder
import torch

import thunder_padvec
from thunder_padvec import codegen
from thunder_padvec.examples import SEED_SHAPE, rope_inputs, rope_one_entry
from thunder_padvec.explain import fusions
from thunder_padvec.runtime.launch import ArgPack

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

ROUNDS = 15  # rounds of the fusion call and the bare launch in turn, so that both see the same machine
CALLS = 500  # calls per round, in a loop without synchronizing


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


def _bare_launch(fn, args):
    """A ``cuLaunchKernel`` of the fusion's kernel and nothing else, with an argument pack of its own
    (the fusion's is rewritten by every fusion call) holding pointers to tensors that outlive it."""
    spec = fn.last
    out = fn(*args)
    pack = ArgPack(len(args) + len(out))
    pack.values[:] = [t.data_ptr() for t in (*args, *out)]
    stream = torch.cuda.current_stream().cuda_stream

    def launch():
        spec.module.launch(spec.params.grid, spec.params.block, pack.params_address, stream)
        return out

    return launch


@pytest.fixture(scope="module")
def rounds(fusion):
    """Per-call µs of the fusion call and of the bare launch, ``ROUNDS`` rounds of each in turn.
    The host side of a shared machine is noisy (a single run's mean moved from 12 to 34 µs between
    machines for the same code): the median and the minimum over rounds are reported, and the
    overhead is the median of the rounds' differences."""
    fn, args = fusion
    bare = _bare_launch(fn, args)
    timed = {"padvec fusion call": [], "bare cuLaunchKernel": []}
    for _ in range(ROUNDS):
        timed["padvec fusion call"].append(_per_call_us(lambda: fn(*args)))
        timed["bare cuLaunchKernel"].append(_per_call_us(bare))
    return timed


def _record(benchmark, rounds, what: str) -> None:
    mine, fusion_us, bare_us = rounds[what], rounds["padvec fusion call"], rounds["bare cuLaunchKernel"]
    benchmark.extra_info.update(kind="host", what=what, per_call_us=statistics.median(mine), min_us=min(mine),
                                rounds=len(mine), calls_per_round=CALLS)
    if what == "padvec fusion call":
        benchmark.extra_info["above_bare_us"] = statistics.median(f - b for f, b in zip(fusion_us, bare_us))


def test_fusion_call(benchmark, fusion, rounds):
    fn, args = fusion
    _record(benchmark, rounds, "padvec fusion call")
    benchmark(lambda: fn(*args))


def test_bare_launch(benchmark, fusion, rounds):
    _record(benchmark, rounds, "bare cuLaunchKernel")
    benchmark(_bare_launch(*fusion))


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
