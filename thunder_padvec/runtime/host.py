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
FLAGS = ("-std=c++17", "-O1", "-shared", "-fPIC", "-pthread", "-ffp-contract=off", "-fno-strict-aliasing", "-w")


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

    def launch(self, grid: int, block: int, args_address: int, check: AccessCheck | None = None) -> None:
        """Runs the kernel; with ``check``, its every access is checked against the call's tensors."""
        ranges = check.ranges if check is not None else ()
        bounds = (ctypes.c_ulonglong * (4 * len(ranges)))(*(v for r in ranges for v in r))
        self._set_ranges(bounds, len(ranges))
        self._launch(args_address, grid, block)
        if check is not None:
            check.outside = self._violations()


def extent(t) -> tuple[int, int]:
    """The bytes a tensor's elements span in memory, ``(first, end)``; ``(0, 0)`` for an empty tensor."""
    if t.numel() == 0:
        return (0, 0)
    last = sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()))
    return (t.data_ptr(), t.data_ptr() + (last + 1) * t.element_size())


class AccessCheck:
    """What an emulated launch checks: every load and store inside one of the call's tensors (``outside``
    counts those that are not, past a tensor's end or anywhere else, registers apart), and every element of
    an output written once (``writes``, per element of its memory)."""

    def __init__(self, inputs, outputs):
        import torch

        self.outputs = [t for t in outputs if t.numel()]
        spans = [extent(t) for t in self.outputs]
        self.writes = [torch.zeros((end - first) // t.element_size(), dtype=torch.uint8)
                       for t, (first, end) in zip(self.outputs, spans)]
        self.ranges = tuple((*extent(t), 0, 1) for t in inputs if t.numel()) + tuple(
            (*span, w.data_ptr(), t.element_size()) for t, span, w in zip(self.outputs, spans, self.writes))
        self.outside = 0

    def fault(self) -> str | None:
        """What the kernel did wrong, in words, or None."""
        faults = [f"accessed memory outside its tensors {self.outside} times"] if self.outside else []
        for k, (t, w) in enumerate(zip(self.outputs, self.writes)):
            twice, never = int((w > 1).sum()), int((w == 0).sum()) if w.numel() == t.numel() else 0
            if twice or never:
                faults.append(f"wrote {twice} elements of output {k} more than once and {never} never")
        return "; ".join(faults) or None
