import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import thunder_padvec  # noqa: E402,F401  (the compat shim runs before Thunder is imported)
from thunder_padvec.bench.stops import pytest_runtest_makereport  # noqa: E402,F401  (a time limit's interrupt)


def _tuning_from_environment() -> None:
    """``PADVEC_TUNING="eager_orders=1,block=128"``: fields of ``schedule.TUNING`` set for this run (an
    experiment's run JSON, beside the defaults' own; the names are checked, a typo stops the run)."""
    import os

    from thunder_padvec.schedule import TUNING

    for item in filter(None, os.environ.get("PADVEC_TUNING", "").split(",")):
        key, _, value = item.partition("=")
        if not hasattr(TUNING, key):
            raise SystemExit(f"PADVEC_TUNING: no field named {key!r}")
        kind = type(getattr(TUNING, key))
        setattr(TUNING, key, kind(float(value)) if kind in (bool, int, float) else value)


_tuning_from_environment()


def _cotangents_from_environment() -> None:
    """``PADVEC_COTANGENTS=outputs``: the fwd+bwd rows' cotangents laid out as each executor's outputs are
    (``bench.measure.COTANGENTS``; row-major by default)."""
    import os

    from thunder_padvec.bench import measure

    layout = os.environ.get("PADVEC_COTANGENTS", "").strip() or "row-major"
    if layout not in ("row-major", "outputs"):
        raise SystemExit(f"PADVEC_COTANGENTS: {layout!r} is neither 'row-major' nor 'outputs'")
    measure.COTANGENTS = layout


_cotangents_from_environment()


def pytest_benchmark_update_machine_info(config, machine_info):
    """The run JSON names the tuning it ran with, where ``PADVEC_TUNING`` set any."""
    import os

    if os.environ.get("PADVEC_TUNING"):
        machine_info["padvec_tuning"] = os.environ["PADVEC_TUNING"]
    if os.environ.get("PADVEC_COTANGENTS"):
        machine_info["padvec_cotangents"] = os.environ["PADVEC_COTANGENTS"]
