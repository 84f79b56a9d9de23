"""How steady ``runtime.tune``'s pick between launch variants is: for each named suite case, the
first call's measurement is taken again in ``--trials`` fresh caches (each trial times the variants
anew), with ``tune.ROUNDS`` set to each of ``--rounds``; prints every trial's medians, the rounds
each variant won against the default, and the pick.

    python benchmarks/tools/tune_probe.py phi-2-b2-rope-bfloat16-fwd --trials 8 --rounds 7 31
"""

from __future__ import annotations

import argparse
import os
import tempfile

import thunder_padvec  # noqa: F401  (the compat shim runs before Thunder is imported)
import thunder
import torch

from thunder_padvec.bench.cases import build, cases
from thunder_padvec.explain import explain
from thunder_padvec.runtime import cache, tune


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("cases", nargs="+")
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--rounds", type=int, nargs="+", default=[tune.ROUNDS])
    args = parser.parse_args()
    by_id = {c.id: c for c in cases()}
    for case_id in args.cases:
        fn, inputs, _, _, _ = build(by_id[case_id], torch.Generator().manual_seed(0))
        for rounds in args.rounds:
            tune.ROUNDS = rounds
            picks = []
            for _ in range(args.trials):
                with tempfile.TemporaryDirectory() as folder:
                    os.environ["THUNDER_PADVEC_CACHE_DIR"] = folder
                    cache.clear_memory()
                    jitted = thunder.jit(fn, executors=[thunder_padvec.padvec])
                    jitted(*inputs)
                    torch.cuda.synchronize()
                    choices = [str(r.choice) for r in explain(jitted) if r.choice]
                picks.append(choices)
                print(f"{case_id:44s} rounds {rounds:3d}: {' | '.join(choices)}", flush=True)
            chosen = [c.rsplit(": ", 1)[-1] for trial in picks for c in trial]
            counts = ", ".join(f"{name} x{chosen.count(name)}" for name in sorted(set(chosen)))
            print(f"{case_id:44s} rounds {rounds:3d}: picks {counts}")


if __name__ == "__main__":
    main()
