"""thunder-padvec: a Lightning Thunder fusion executor for pad / cat / slice / pointwise programs.

    import thunder
    from thunder_padvec import padvec

    jitted = thunder.jit(fn, executors=[padvec])

``padvec_cat`` claims only the regions with a cat or a pad (RoPE's forward and backward), for a model
whose other pointwise ops an executor after it fuses with their reductions.

Import this package before Thunder: it first applies the compat shim that lets Thunder 0.2.6
import under PyTorch 2.13 and later (:mod:`thunder_padvec._compat`).
"""

from __future__ import annotations

__version__ = "0.1.0"

import contextlib
import logging
import warnings

from . import _compat, knobs

_compat.apply()

logging.getLogger("thunder_padvec").setLevel(knobs.log_level())

with warnings.catch_warnings():  # Thunder warns at import about optional executors it can't find
    warnings.filterwarnings("ignore", message=".*module not found")
    import thunder  # noqa: E402, F401

from .errors import CompileError, InternalError, LaunchError, PadvecError, UnsupportedError  # noqa: E402
from .executor import padvec, padvec_cat  # noqa: E402
from .explain import explain  # noqa: E402

__all__ = [
    "padvec",
    "padvec_cat",
    "explain",
    "set_emulation",
    "emulation",
    "PadvecError",
    "CompileError",
    "LaunchError",
    "UnsupportedError",
    "InternalError",
    "__version__",
]


def set_emulation(on: bool | None) -> None:
    """Turns CPU emulation on or off for traces compiled from now on (``None``: follow
    ``THUNDER_PADVEC_EMULATE``). With it on, padvec claims CPU tensors and runs its generated
    kernels on the host."""
    knobs.set_emulate(on)


@contextlib.contextmanager
def emulation(on: bool = True):
    """``with emulation(): ...`` compiles and runs with CPU emulation on."""
    previous = knobs._emulate_override
    knobs.set_emulate(on)
    try:
        yield
    finally:
        knobs.set_emulate(previous)
