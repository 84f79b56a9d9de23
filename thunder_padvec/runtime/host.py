"""CPU emulation: the generated kernel, behind the host prelude, built by the host C++ compiler.

The host prelude turns ``__global__`` and friends into plain C++ and adds ``padvec_launch``,
which runs every thread of every block in order. Kernels own disjoint outputs and use no shared
memory, so running threads one after another computes exactly what the GPU computes.
"""

from __future__ import annotations

import ctypes
import functools
import os
import subprocess
import tempfile
from pathlib import Path

from .. import knobs
from ..errors import CompileError, LaunchError

# Contraction off, as for NVRTC; no strict aliasing, as the vector helpers pun types.
FLAGS = ("-std=c++17", "-O1", "-shared", "-fPIC", "-ffp-contract=off", "-fno-strict-aliasing", "-w")


@functools.cache
def compiler_version(cxx: str) -> str:
    try:
        out = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=60)
        return out.stdout.splitlines()[0] if out.stdout else cxx
    except (OSError, subprocess.SubprocessError):
        return cxx


def compile_shared_object(source: str, source_path: Path | None = None) -> bytes:
    """Builds ``source`` into a shared library and returns its bytes."""
    cxx = knobs.host_cxx()
    with tempfile.TemporaryDirectory(prefix="padvec-host-") as tmp:
        src, lib = Path(tmp, "kernel.cpp"), Path(tmp, "kernel.so")
        src.write_text(source)
        try:
            out = subprocess.run([cxx, *FLAGS, str(src), "-o", str(lib)], capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.SubprocessError) as err:
            raise CompileError(cxx, str(err), source, source_path) from err
        if out.returncode != 0:
            raise CompileError(cxx, out.stderr or out.stdout, source, source_path)
        return lib.read_bytes()


class HostModule:
    """A loaded emulation library; ``launch`` runs the kernel on the calling thread."""

    def __init__(self, library: bytes):
        fd, path = tempfile.mkstemp(prefix="padvec-", suffix=".so")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(library)
            self._lib = ctypes.CDLL(path)
        except OSError as err:
            raise LaunchError(f"could not load the emulation library: {err}") from err
        finally:
            os.unlink(path)  # the mapping stays valid after the file is gone
        self._launch = self._lib.padvec_launch
        self._launch.argtypes = (ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint)
        self._launch.restype = None
        self._set_ranges = self._lib.padvec_set_ranges
        self._set_ranges.argtypes = (ctypes.c_void_p, ctypes.c_int)
        self._violations = self._lib.padvec_violations
        self._violations.restype = ctypes.c_long

    def launch(self, grid: int, block: int, args_address: int, ranges: tuple[tuple[int, int], ...] = ()) -> int:
        """Runs the kernel; with ``ranges``, the ``(first byte, end)`` of each of the call's tensors, returns
        how many of its accesses fell outside them, near one (as past a tensor's end)."""
        bounds = (ctypes.c_ulonglong * (2 * len(ranges)))(*(b for r in ranges for b in r))
        self._set_ranges(bounds, len(ranges))
        self._launch(args_address, grid, block)
        return self._violations()


def extent(t) -> tuple[int, int]:
    """The bytes a tensor's elements span in memory, ``(first, end)``; ``(0, 0)`` for an empty tensor."""
    if t.numel() == 0:
        return (0, 0)
    last = sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()))
    return (t.data_ptr(), t.data_ptr() + (last + 1) * t.element_size())
