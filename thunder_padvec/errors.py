"""Typed errors. A compile error carries the compiler's log and the path of the dumped source."""

from __future__ import annotations

from pathlib import Path


class PadvecError(RuntimeError):
    """Base class of thunder-padvec's errors."""


class CompileError(PadvecError):
    """A generated kernel failed to compile (NVRTC for the GPU, the host compiler in emulation)."""

    def __init__(self, compiler: str, log: str, source: str, source_path: Path | None):
        self.compiler, self.log, self.source, self.source_path = compiler, log, source, source_path
        where = f"; source dumped to {source_path}" if source_path else ""
        super().__init__(f"{compiler} failed to compile a padvec kernel{where}\n{log.strip()}")

    @property
    def numbered_source(self) -> str:
        return "\n".join(f"{i:5d}  {line}" for i, line in enumerate(self.source.splitlines(), 1))


class LaunchError(PadvecError):
    """The CUDA driver refused to load or launch a kernel."""


class UnsupportedError(PadvecError):
    """A region padvec claimed turns out, for the tensors of a call, to be beyond what it can run."""


class InconsistentTrace(UnsupportedError):
    """A region whose trace contradicts itself (an op's operand of another shape than its result, as some
    of Thunder's gradient rules record): it runs in PyTorch, which computes what the ops say."""


class InternalError(PadvecError):
    """padvec failed on a region it claimed, by a fault of its own (not of the region or of the call): the
    original exception is the cause. The region runs in PyTorch instead, unless ``THUNDER_PADVEC_STRICT``."""

    @classmethod
    def wrapping(cls, stage: str, err: Exception) -> PadvecError:
        """``err`` itself where it is padvec's typed error; otherwise an internal error ``while {stage}``
        with ``err`` as its cause."""
        if isinstance(err, PadvecError):
            return err
        internal = cls(f"an internal error while {stage} ({type(err).__name__}: {err}); please report it with "
                       "the region's trace")
        internal.__cause__ = err
        return internal
