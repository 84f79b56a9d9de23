"""How long a first call's launch variants take to compile: one after the other, and side by side, a
thread each (``runtime.cache.prefetch``), as ``fusion.PadvecFusion`` builds them. No GPU
needed: each suite case is traced at small shapes in emulation (the kernels' code is that of the suite's
shapes up to constants), its fusions' variants (``runtime.tune.variants``) rendered and compiled by NVRTC
for ``--arch``, the in-memory cache cleared and the disk cache off, each way ``--repeats`` times.

    python benchmarks/tools/compile_probe.py --forms rope qkv_split_rope --repeats 2
"""

from __future__ import annotations

import argparse
import os
import time

os.environ["THUNDER_PADVEC_CACHE_DIR"] = "off"

import thunder_padvec  # noqa: E402
import thunder  # noqa: E402
import torch  # noqa: E402

from thunder_padvec import codegen  # noqa: E402
from thunder_padvec.examples import litgpt_rope, qkv_split_rope  # noqa: E402
from thunder_padvec.explain import fusions  # noqa: E402
from thunder_padvec.runtime import cache, nvrtc, tune  # noqa: E402


def _programs(forms: list[str], generator: torch.Generator):
    def randn(*shape):
        return torch.randn(*shape, generator=generator).to(torch.bfloat16)

    if "rope" in forms:
        yield "rope", litgpt_rope, (randn(1, 4, 16, 128), randn(16, 128), randn(16, 128), 128)
    if "qkv_split_rope" in forms:  # grouped queries: 8 heads, 2 groups
        yield "qkv_split_rope", (lambda qkv, cos, sin: qkv_split_rope(qkv, cos, sin, 8, 2, 128, 128)), \
            (randn(1, 16, 12 * 128), randn(16, 128), randn(16, 128))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--forms", nargs="+", default=["rope", "qkv_split_rope"])
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    thunder_padvec.set_emulation(True)
    print(f"{os.cpu_count()} CPUs, NVRTC {'.'.join(map(str, nvrtc.version()))}, {args.arch}")
    for name, fn, inputs in _programs(args.forms, torch.Generator().manual_seed(0)):
        jitted = thunder.jit(fn, executors=[thunder_padvec.padvec])
        jitted(*inputs)
        for fusion, _ in fusions(thunder.last_traces(jitted)[-1]):
            spec = fusion.last
            sources = list(dict.fromkeys(codegen.device_source(codegen.render(spec.plan, params))
                                         for _, params in tune.variants(spec.params)))
            for k in range(args.repeats):
                for way in ("one after the other", "side by side"):
                    cache.clear_memory()  # a fresh identity each time: nothing is found compiled
                    target = cache.Target("cubin", f"{args.arch} probe {way} {k}",
                                          lambda source, path: nvrtc.compile_cubin(source, args.arch, path), ".cu")
                    start = time.perf_counter()
                    if way == "side by side":
                        cache.prefetch(sources[1:], target)
                    for source in sources:
                        cache.binary(source, target)
                    print(f"{name} {fusion.name}: {len(sources)} variants {way}: "
                          f"{time.perf_counter() - start:.3f} s", flush=True)


if __name__ == "__main__":
    main()
