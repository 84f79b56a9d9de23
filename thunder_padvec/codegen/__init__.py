"""Code generation: ``(VectorPlan, LaunchParams) -> CUDA C++`` and the preludes that make it build.

The kernel text is the same for both targets; only the prelude before it (and, on the host, a
launcher after it) differs: NVRTC builds it for the GPU, the host C++ compiler for emulation.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from .render import render, token_tile

__all__ = ["render", "token_tile", "device_source", "host_source"]


@cache
def _text(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text()


def device_source(kernel_source: str) -> str:
    return _text("prelude_device.h") + "\n" + _text("prelude_common.h") + "\n" + kernel_source


def host_source(kernel_source: str) -> str:
    return (
        _text("prelude_host.h") + "\n" + _text("prelude_common.h") + "\n" + kernel_source + _text("epilogue_host.h")
    )
