"""CUDA C++ source -> CUBIN for one device architecture, through NVRTC (cuda-python).

Always CUBIN for the device's exact ``sm_XY``, never PTX: a newer NVRTC emits PTX that an older
driver may reject, while CUBIN only needs a driver of the same major CUDA version.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import os
from pathlib import Path

from ..errors import CompileError

# Contraction off so that a * b + c rounds like PyTorch's separate kernels do.
OPTIONS = ("-std=c++17", "--fmad=false")


@functools.cache
def _nvrtc():
    from cuda.bindings import nvrtc

    _preload_builtins()
    return nvrtc


def _preload_builtins() -> None:
    """libnvrtc dlopens libnvrtc-builtins by name; when libnvrtc came from a wheel's folder the
    loader may not look there, so load the builtins beside it first."""
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib

        folder = os.path.dirname(load_nvidia_dynamic_lib("nvrtc").abs_path)
        for path in sorted(glob.glob(os.path.join(folder, "libnvrtc-builtins.so*"))):
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            break
    except Exception:  # the system loader finds them in a regular CUDA install
        pass


def _check(result, what: str):
    err, *values = result
    if int(err) != 0:
        raise CompileError("NVRTC", f"{what} failed: {err!r}", "", None)
    return values[0] if len(values) == 1 else values


@functools.cache
def version() -> tuple[int, int]:
    major, minor = _check(_nvrtc().nvrtcVersion(), "nvrtcVersion")
    return int(major), int(minor)


def supported_archs() -> tuple[int, ...]:
    nvrtc = _nvrtc()
    count = _check(nvrtc.nvrtcGetNumSupportedArchs(), "nvrtcGetNumSupportedArchs")
    return tuple(_check(nvrtc.nvrtcGetSupportedArchs(), "nvrtcGetSupportedArchs")[:count])


def _log(nvrtc, program) -> str:
    size = _check(nvrtc.nvrtcGetProgramLogSize(program), "nvrtcGetProgramLogSize")
    buffer = b" " * size
    _check(nvrtc.nvrtcGetProgramLog(program, buffer), "nvrtcGetProgramLog")
    return buffer.rstrip(b"\x00 ").decode(errors="replace")


def compile_cubin(source: str, arch: str, source_path: Path | None = None) -> bytes:
    """Compiles ``source`` for ``arch`` (``"sm_90"``); raises :class:`CompileError` with NVRTC's log."""
    nvrtc = _nvrtc()
    name = (source_path.name if source_path else "padvec.cu").encode()
    program = _check(nvrtc.nvrtcCreateProgram(source.encode(), name, 0, [], []), "nvrtcCreateProgram")
    try:
        options = [f"--gpu-architecture={arch}".encode(), *(o.encode() for o in OPTIONS)]
        (err,) = nvrtc.nvrtcCompileProgram(program, len(options), options)
        if int(err) != 0:
            raise CompileError(f"NVRTC {'.'.join(map(str, version()))}", _log(nvrtc, program), source, source_path)
        size = _check(nvrtc.nvrtcGetCUBINSize(program), "nvrtcGetCUBINSize")
        cubin = b" " * size
        _check(nvrtc.nvrtcGetCUBIN(program, cubin), "nvrtcGetCUBIN")
        return cubin
    finally:
        nvrtc.nvrtcDestroyProgram(program)
