"""Wrong answers hunted with fresh randomness: the property tests of ``tests/test_programs.py`` (random
programs of pad, slice, cat and pointwise ops, forward, and their gradients; rotations of a part of each
row; LitGPT's RoPE prologues, forward and backward), each drawn anew for a time budget, on the GPU where
there is one (the tuner's launch variants, fitted builds and replans included), in CPU emulation otherwise.

    python benchmarks/tools/hunt.py --programs 180 --gradients 120 --pieces 90 --prologues 200
    python benchmarks/tools/hunt.py --after torchcompile   # padvec first, then torch.compile's executor

The test suite draws the same examples every run (``derandomize=True``, so that CI is reproducible);
this draws new ones each time. Outputs are poisoned with NaN before every launch and the kernel cache
is a fresh folder. Prints how many examples of each strategy passed, or the first failure with
Hypothesis's falsifying example and its ``@reproduce_failure`` blob, and exits 1 after a failure, 2 where
an interrupt (a time limit's SIGINT) stopped it with no failure.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

os.environ.setdefault("THUNDER_PADVEC_POISON", "1")
os.environ.setdefault("THUNDER_PADVEC_STRICT", "1")  # a fallback to PyTorch is a failure here
os.environ.setdefault("THUNDER_PADVEC_CACHE_DIR", tempfile.mkdtemp(prefix="padvec-hunt-"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

import thunder_padvec  # noqa: E402  (the compat shim runs before Thunder is imported)
import thunder  # noqa: E402
import torch  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402

import helpers  # noqa: E402
import test_programs  # noqa: E402

ROUND = 10  # examples drawn per call of a strategy's test; a draw past the budget is not checked


def hunt(name: str, strategy, check, budget_s: float) -> bool:
    """Draws examples of ``strategy`` and runs ``check`` on each until ``budget_s`` has passed; False
    after a failure (printed)."""
    start, passed = time.monotonic(), [0]

    @settings(max_examples=ROUND, deadline=None, derandomize=False, database=None, print_blob=True,
              suppress_health_check=list(HealthCheck))
    @given(spec=strategy())
    def run(spec):
        if time.monotonic() - start >= budget_s:
            return  # the budget is spent: the round's last draws are drawn, not checked (no compile, no run)
        check(spec)
        passed[0] += 1

    try:
        while time.monotonic() - start < budget_s:
            run()
    except KeyboardInterrupt:  # a time limit's SIGINT (Hypothesis may print a seed first): not a failure
        print(f"{name}: interrupted after {passed[0]} examples passed in {time.monotonic() - start:.0f} s, no failure")
        raise SystemExit(2) from None
    except Exception as err:
        print(f"{name}: FAILED after {passed[0]} examples passed")
        print("".join(traceback.format_exception(err))[-6000:])
        for note in getattr(err, "__notes__", []):
            print(note)
        return False
    print(f"{name}: {passed[0]} examples passed in {time.monotonic() - start:.0f} s")
    return True


class _JitAfter:
    """``thunder`` as the tests call it, with more executors after padvec in every ``thunder.jit``."""

    def __init__(self, after: list):
        self.after = after

    def jit(self, fn, executors=(), **kwargs):
        return thunder.jit(fn, executors=[*executors, *self.after], **kwargs)

    def __getattr__(self, name):
        return getattr(thunder, name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name, default in (("programs", 60.0), ("gradients", 60.0), ("pieces", 30.0), ("prologues", 60.0)):
        parser.add_argument(f"--{name}", type=float, default=default, metavar="SECONDS",
                            help=f"time for the {name} strategy (0: skip it)")
    parser.add_argument("--after", action="append", default=[], metavar="EXECUTOR",
                        help="a Thunder executor listed after padvec (repeatable), e.g. torchcompile or nvfuser")
    args = parser.parse_args(argv)
    if args.after:  # what another executor's fusion pass (its rematerialization) does to padvec's regions
        test_programs.thunder = helpers.thunder = _JitAfter([thunder.get_executor(name) for name in args.after])
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        thunder_padvec.set_emulation(True)
    where = torch.cuda.get_device_name() if device == "cuda" else "the CPU (emulation)"
    print(f"hunting on {where}, executors: padvec{''.join(', ' + name for name in args.after)}", flush=True)
    strategies = [
        ("programs", test_programs.programs, lambda spec: test_programs._check(spec, device), args.programs),
        ("gradients", test_programs.programs, lambda spec: test_programs._check_gradients(spec, device),
         args.gradients),
        ("pieces", test_programs.partial_rotations, lambda spec: test_programs._check_pieces(spec, device),
         args.pieces),
        ("prologues", test_programs.prologues, lambda spec: test_programs._check_prologue(spec, device),
         args.prologues),
    ]
    ok = all([hunt(name, strategy, check, budget) for name, strategy, check, budget in strategies if budget > 0])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
