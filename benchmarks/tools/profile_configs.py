"""Runs padvec's kernels of the named suite cases twice each, for ncu to measure; a configuration's id
(``phi-2-b2``) names its RoPE form's bf16 forward. With ``--peer``, torch.compile's kernels of the same
call as well (ncu's kernel filter picks them). ``--dirty``: before each call, the suite's flush
(``timing.l2_flush``: the L2 full of dirty lines; run ncu with ``--cache-control none`` to keep them).
``--set key=value``: a knob as in ``explore.py`` (a field of ``schedule.TUNING`` or a constant of
``vectorize.plan``, ``vectorize.segments`` or ``codegen.render``) for padvec's kernels (several allowed)."""
import sys

from explore import _apply

import thunder_padvec  # noqa: F401  (the compat shim runs before Thunder is imported)
import torch
from thunder_padvec import timing
from thunder_padvec.bench.cases import build, cases, executor, with_backward

args = sys.argv[1:]
for i, arg in enumerate(args):
    if arg == "--set":
        _apply(args[i + 1])
flush = timing.l2_flush() if "--dirty" in args else None

by_id = {case.id: case for case in cases()}
by_id.update({case.config.id: case for case in cases()
              if (case.form, case.dtype, case.pass_) == ("rope", "bfloat16", "fwd")})
for case in [by_id[a] for a in args if a in by_id]:
    fn, inputs, _, _, cotangents = build(case)
    if case.pass_ == "fwd+bwd":
        inputs = [inputs[0].requires_grad_(True), *inputs[1:]]
    runs = [executor(name, case, fn) for name in ("padvec", "torch.compile")[:2 if "--peer" in args else 1]]
    if case.pass_ == "fwd+bwd":
        runs = [with_backward(run, cotangents) for run in runs]
    for run in runs:
        for _ in range(2):
            if flush is not None:
                torch.cuda.synchronize()  # the flush's reset of kept lines acts at once
                flush()
            run(*inputs)
torch.cuda.synchronize()
