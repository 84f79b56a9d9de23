"""Kernel-shape experiments on one GPU: padvec's kernels for the suite's cases under several tunings,
beside torch.compile and the copy roofline (both timed again after the variants, to show drift).

    python benchmarks/tools/explore.py --cases Llama-2-7b-b1-rope-bfloat16-fwd phi-2-b1-rope-bfloat16-fwd \\
        --variants base: rows1:min_threads=4194304 b128:block=128 use50:MIN_THREAD_USE=0.5

A variant is ``name:key=value,...``; a key names a field of ``schedule.TUNING`` or a constant of
``schedule``, ``vectorize.plan``, ``vectorize.segments``, ``vectorize.gathers`` or ``codegen.render`` (set
in each that holds it, restored after the variant). Prints one row per case and executor.
"""

from __future__ import annotations

import argparse
import importlib
import sys

import thunder_padvec  # noqa: F401
import thunder
import torch

from thunder_padvec import schedule
from thunder_padvec.bench.cases import backward_bytes, build, cases, with_backward
from thunder_padvec.bench.measure import check, kernels
from thunder_padvec.timing import copies_ms, copy_roofline_ms, gbps, graph_median_ms

plan_module = importlib.import_module("thunder_padvec.vectorize.plan")
render_module = importlib.import_module("thunder_padvec.codegen.render")
segments_module = importlib.import_module("thunder_padvec.vectorize.segments")
gathers_module = importlib.import_module("thunder_padvec.vectorize.gathers")


def _apply(settings: str) -> list[tuple[object, str, object]]:
    """Sets the variant's knobs; returns ``(owner, key, old value)`` of each, for ``_restore``."""
    old = []
    for item in filter(None, settings.split(",")):
        key, value = item.split("=")
        # a constant imported by name into other modules (STAGED_WARPS in schedule) is set in each of them
        modules = (schedule.TUNING, schedule, plan_module, render_module, segments_module, gathers_module)
        owners = [o for o in modules if hasattr(o, key)]
        if not owners:
            raise SystemExit(f"no knob named {key}")
        for owner in owners:
            before = getattr(owner, key)
            old.append((owner, key, before))
            setattr(owner, key, type(before)(float(value)) if isinstance(before, (int, float)) else value)
    return old


def _restore(old: list[tuple[object, str, object]]) -> None:
    for owner, key, value in old:
        setattr(owner, key, value)


def _apply_to(settings: str, fusions: list[str] | None):
    """Sets the knobs for every fusion built from now on, or (``fusions``: names such as ``padvec1``, the
    backward of a fwd+bwd case) only while those fusions build their kernels; returns the undo."""
    if not fusions:
        old = _apply(settings)
        return lambda: _restore(old)
    from thunder_padvec.fusion import PadvecFusion

    original = PadvecFusion._specialize

    def specialize(self, *args, **kwargs):
        if self.name not in fusions:
            return original(self, *args, **kwargs)
        old = _apply(settings)
        try:
            return original(self, *args, **kwargs)
        finally:
            _restore(old)

    PadvecFusion._specialize = specialize
    return lambda: setattr(PadvecFusion, "_specialize", original)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", nargs="+", required=True)
    parser.add_argument("--variants", nargs="+", default=["base:"])
    parser.add_argument("--fusions", nargs="+", metavar="NAME",
                        help="the variants' knobs apply only to these fusions (padvec1: a fwd+bwd case's backward)")
    then = parser.add_mutually_exclusive_group()
    then.add_argument("--then-copy", type=int, default=0, metavar="MIB",
                      help="time each executor followed by a copy of MIB MiB of other tensors (the next kernel), "
                           "in one graph: what an executor's cache policies leave to the kernels after it")
    then.add_argument("--then-read", action="store_true",
                      help="time each executor followed by a clone of its outputs (a consumer), in one graph")
    args = parser.parse_args()
    follow = None  # what runs after each call of an executor, in the same graph
    if args.then_read:
        def follow(out):
            for o in out if isinstance(out, tuple) else (out,):
                o.clone()
    elif args.then_copy:
        src = torch.empty(args.then_copy << 19, dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)

        def follow(out):
            dst.copy_(src)

    by_id = {c.id: c for c in cases()}
    for case_id in args.cases:
        case = by_id[case_id]
        fn, inputs, expected, io, cotangents = build(case, torch.Generator().manual_seed(0))

        def wrap(f):
            f = f if cotangents is None else with_backward(f, cotangents)
            if follow is None:
                return f

            def f_then(*a):
                out = f(*a)
                follow(out)
                return out
            return f_then

        def row(name, ms):
            print(f"{case_id:40s} {name:22s} {ms * 1000:8.1f} us {gbps(io, ms):6.0f} GB/s {copy / ms:6.1%} of copy")

        copy = copy_roofline_ms(io)
        row("copy", copy)
        if cotangents is not None:  # the forward's bytes, then the backward's: two launches
            backward = backward_bytes(inputs, cotangents)
            row("copy per pass", copies_ms((io - backward, backward)))
        torch._dynamo.reset()
        compiled = wrap(torch.compile(fn, dynamic=False))
        compiled(*inputs)
        compile_ms = graph_median_ms(lambda: compiled(*inputs))
        row("torch.compile", compile_ms)
        for variant in args.variants:
            name, _, settings = variant.partition(":")
            undo = _apply_to(settings, args.fusions)
            try:
                jit = thunder.jit(fn, executors=[thunder_padvec.padvec])
                jitted = wrap(jit)
                check("padvec", jitted(*inputs), expected, exact_padvec=cotangents is None)
                row(f"padvec {name}", graph_median_ms(lambda: jitted(*inputs)))
                for line in kernels(jit):
                    print(f"{'':40s}   {line}")
            finally:
                undo()
        row("torch.compile again", graph_median_ms(lambda: compiled(*inputs)))
        copy = copy_roofline_ms(io)
        row("copy again", copy)
        sys.stdout.flush()


if __name__ == "__main__":
    main()
