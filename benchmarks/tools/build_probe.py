"""Does padvec's device time move with its build or with where the tensors lie?

    python benchmarks/tools/build_probe.py --case Llama-2-7b-b1-rope-bfloat16-fwd --trials 8

Each trial keeps a filler of a different size (so that what is allocated next lands elsewhere), clones
the inputs, and times CUDA graphs of three callables on the clones, 256 MiB written before each replay
(the suite's flush until it also reset kept lines): padvec built afresh (``thunder.jit``), padvec
built once before the trials, and torch.compile compiled once; the order rotates from trial to trial.
Prints, per trial and callable, the device time, where the first input and the output lie (MiB,
modulo 1 GiB), and the attributes of the padvec kernel's function, so that a slow build can be told
from a slow placement. ``--steps`` runs a sequence of actions instead, under each of ``--flushes``:

    python benchmarks/tools/build_probe.py --case Llama-2-7b-b1-rope-bfloat16-fwd --flushes write reset \
        --steps padvec torch.compile padvec clone padvec
"""

from __future__ import annotations

import argparse
import time

import thunder_padvec
import thunder
from thunder_padvec import schedule
from thunder_padvec.runtime import launch
import torch

from thunder_padvec.bench.cases import build, cases
from thunder_padvec.timing import L2_FLUSH_BYTES, median_ms

MIB = 1 << 20


def _where(t: torch.Tensor) -> str:
    return f"{(t.data_ptr() % (1 << 30)) / MIB:7.1f}"


_loaded: list[launch.CudaModule] = []
_init = launch.CudaModule.__init__


def _record(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    _loaded.append(self)


launch.CudaModule.__init__ = _record
_ATTRIBUTES = ("NUM_REGS", "LOCAL_SIZE_BYTES", "CACHE_MODE_CA", "PREFERRED_SHARED_MEMORY_CARVEOUT",
               "MAX_DYNAMIC_SHARED_SIZE_BYTES", "MAX_THREADS_PER_BLOCK")


def _attributes(module: launch.CudaModule) -> str:
    driver = launch._driver()
    values = []
    for name in _ATTRIBUTES:
        err, value = driver.cuFuncGetAttribute(getattr(driver.CUfunction_attribute, f"CU_FUNC_ATTRIBUTE_{name}"),
                                               module._function)
        values.append(f"{name.lower()}={value if int(err) == 0 else err}")
    return " ".join(values)


def _graph(fn, args):
    for _ in range(3):
        fn(*args)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn(*args)
    return graph, out if isinstance(out, torch.Tensor) else out[0]


_EVICT_LAST_WRITE = r"""
struct Args { unsigned long long p, n; };
extern "C" __global__ void padvec_kernel(Args a) {
  unsigned long long policy;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < a.n;
       i += (unsigned long long)gridDim.x * blockDim.x)
    asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1, %1, %1, %1}, %2;"
                 :: "l"(a.p + 16 * i), "r"(0u), "l"(policy) : "memory");
}
"""


def _flushes(scratch: torch.Tensor) -> dict:
    """The L2 flushes compared: ``write`` (256 MiB written), ``reset`` (lines kept by evict_last
    policies made normal again, then the write: the suite's, ``timing.l2_flush``), ``last`` (the
    scratch written with an evict_last policy, then the write)."""
    from thunder_padvec.runtime import nvrtc

    major, minor = torch.cuda.get_device_capability()
    module = launch.CudaModule(nvrtc.compile_cubin(_EVICT_LAST_WRITE, f"sm_{major}{minor}"), 0)
    pack = launch.ArgPack(2)
    pack.values[:] = [scratch.data_ptr(), scratch.numel() // 16]

    def reset():
        launch.reset_persisting_l2(scratch.device.index)
        scratch.zero_()

    def last():
        module.launch(1024, 256, pack.params_address, torch.cuda.current_stream().cuda_stream)
        scratch.zero_()

    return {"write": scratch.zero_, "reset": reset, "last": last}


def _steps(steps: list[str], runs: dict, fn, inputs, copy: float, flush) -> None:
    clones, kept = [a.clone() for a in inputs], []
    runs.setdefault("padvec keep", thunder.jit(fn, executors=[thunder_padvec.padvec]))
    runs.setdefault("thunder", thunder.jit(fn))
    for i, step in enumerate(steps):
        note = ""
        if step in ("padvec", "padvec keep", "torch.compile", "thunder"):
            run = runs["padvec once" if step == "padvec" else step]
            default = schedule.TUNING.keep_hints
            schedule.TUNING.keep_hints = step == "padvec keep"  # read when the first call specializes
            try:
                graph, out = _graph(run, clones)
            finally:
                schedule.TUNING.keep_hints = default
            times = [median_ms(graph.replay, flush=flush) for _ in range(2)]
            note = " ".join(f"{t * 1000:6.1f}" for t in times) + f" us ({copy / min(times):6.1%})"
            del graph, out
        elif step == "compile-eager":
            runs["torch.compile"](*clones)
        elif step == "clone":
            clones = [a.clone() for a in inputs]
        elif step == "read":
            for a in clones:
                a.float().sum()
        elif step == "sleep":
            torch.cuda.synchronize()
            time.sleep(1.0)
        elif step == "alloc":
            kept.append(torch.empty(64 * MIB, dtype=torch.uint8, device="cuda"))
        else:
            raise ValueError(step)
        torch.cuda.synchronize()
        print(f"  step {i:2d} {step:14s} {note}  x at {_where(clones[0])}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--case", nargs="+", required=True)
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--steps", nargs="+", help=(
        "instead of trials, a sequence of: padvec (plain loads), padvec keep (TUNING.keep_hints), torch.compile, "
        "thunder (each timed), compile-eager (one call, untimed), clone (new inputs), read (a sum of each input), "
        "sleep (1 s), alloc (64 MiB kept)"))
    parser.add_argument("--flushes", nargs="+", default=["write"], help="with --steps: write, reset, last")
    args = parser.parse_args()
    scratch = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    by_id = {c.id: c for c in cases()}
    for case_id in args.case:
        fn, inputs, _, io, _ = build(by_id[case_id], torch.Generator().manual_seed(0))
        src = torch.empty(io // 2, dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        copy = median_ms(lambda: dst.copy_(src), flush=scratch.zero_)
        torch._dynamo.reset()
        runs = {"padvec once": thunder.jit(fn, executors=[thunder_padvec.padvec]),
                "torch.compile": torch.compile(fn, dynamic=False)}
        print(f"{case_id}: copy {copy * 1000:.1f} us", flush=True)
        if args.steps:
            for mode, flush in _flushes(scratch).items():
                if mode in args.flushes:
                    print(f" flush: {mode}; copy {median_ms(lambda: dst.copy_(src), flush=flush) * 1000:.1f} us")
                    _steps(args.steps, runs, fn, inputs, copy, flush)
            continue
        fillers = []
        for trial in range(args.trials):
            fillers.append(torch.empty((7 * trial + 1) * MIB + 4096 * trial, dtype=torch.uint8, device="cuda"))
            clones = [a.clone() for a in inputs]
            runs["padvec fresh"] = thunder.jit(fn, executors=[thunder_padvec.padvec])
            names = list(runs)
            names = names[trial % len(names):] + names[:trial % len(names)]
            for name in names:
                run = runs[name]
                before = len(_loaded)
                graph, out = _graph(run, clones)
                times = [median_ms(graph.replay, flush=scratch.zero_) for _ in range(2)]
                us = " ".join(f"{t * 1000:6.1f}" for t in times)
                print(f"  trial {trial} {name:14s} {us} us ({copy / min(times):6.1%})  x at {_where(clones[0])}"
                      f"  out at {_where(out)} MiB", flush=True)
                if len(_loaded) > before:
                    print(f"    module {len(_loaded) - 1} loaded: {_attributes(_loaded[-1])}", flush=True)
                del graph, out
        del fillers, runs
        torch._dynamo.reset()
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
