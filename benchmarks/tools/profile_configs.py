"""Runs padvec's RoPE kernel of the named configurations (or of the suite's cases, by case id: the
qkv form, fwd+bwd) twice each, for ncu to measure; with
``--peer``, torch.compile's kernels of the same call as well (ncu's kernel filter picks them).
``--dirty``: before each call, the suite's flush (``timing.l2_flush``: the L2 full of
dirty lines; run ncu with ``--cache-control none`` to keep them). ``--set key=value``: a field of
``schedule.TUNING`` or a constant of ``codegen.render``, ``vectorize.plan`` or ``vectorize.segments``
for padvec's kernels (several allowed)."""
import importlib
import sys

import thunder_padvec
import thunder
import torch
from thunder_padvec import configs, schedule, timing
from thunder_padvec.bench.cases import build, cases, executor, with_backward
from thunder_padvec.examples import litgpt_rope, rope_inputs, rope_one_entry

MODULES = [importlib.import_module(f"thunder_padvec.{name}")
           for name in ("codegen.render", "vectorize.plan", "vectorize.segments")]
args = sys.argv[1:]
for i, arg in enumerate(args):
    if arg == "--set":
        key, value = args[i + 1].split("=")
        owner = next(o for o in (schedule.TUNING, *MODULES) if hasattr(o, key))
        setattr(owner, key, type(getattr(owner, key))(int(value)))
flush = timing.l2_flush() if "--dirty" in args else None

for cfg in [c for c in configs.ALL if c.id in args]:
    x, cos, sin = rope_inputs(cfg.batch, cfg.n_head, cfg.seq, cfg.head_size, cfg.rope_n_elem, torch.bfloat16, "cuda")
    fn = rope_one_entry if cfg.name == "seed" else litgpt_rope
    runs = [thunder.jit(fn, executors=[thunder_padvec.padvec])]
    if "--peer" in args:
        torch._dynamo.reset()
        runs.append(torch.compile(fn, dynamic=False))
    for run in runs:
        for _ in range(2):
            if flush is not None:
                torch.cuda.synchronize()  # the flush's reset of kept lines acts at once
                flush()
            run(x, cos, sin, cfg.rope_n_elem)
by_id = {case.id: case for case in cases()}
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
                torch.cuda.synchronize()
                flush()
            run(*inputs)
torch.cuda.synchronize()
