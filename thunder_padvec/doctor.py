"""``python -m thunder_padvec doctor``: what this machine gives padvec, each piece checked on its own.

Versions; NVRTC (its library, version and architectures) compiling a kernel padvec generates; the host
C++ compiler running that kernel in emulation against eager; the GPU, its driver against NVRTC, and a
launch on it against eager; the disk cache's folder; the settings in effect. A check never raises: what
goes wrong inside one is its finding ("failed", with the exception), and the others still run.
"""

from __future__ import annotations

import platform
import time
import uuid
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch

from . import __version__, knobs
from .errors import CompileError, PadvecError

THUNDER_TESTED = "0.2.6"  # the Thunder release padvec is built and tested against (pyproject.toml)
NO_GPU_ARCH = "sm_90"  # what the compile check builds for where there is no GPU


@dataclass(frozen=True)
class Finding:
    check: str
    status: str  # "ok", "warning", "failed" or "skipped"
    detail: str


def _program(x: torch.Tensor) -> torch.Tensor:
    """A small program of the family padvec claims: a slice, a cat, a pad and pointwise math."""
    rolled = torch.cat((x[..., 1:], x[..., :1]), dim=-1)
    return torch.nn.functional.pad(rolled * 2 + x, (0, 8), value=0.5)


def _traced(device: str):
    """``(fusion, output, expected)``: ``_program`` through ``thunder.jit`` with padvec on ``device``."""
    import thunder

    from .executor import padvec
    from .explain import fusions

    x = torch.randn(4, 3, 64, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16).to(device)
    jitted = thunder.jit(_program, executors=[padvec])
    with warnings.catch_warnings():  # a fallback's warning: its error is the finding's
        warnings.simplefilter("ignore")
        out = jitted(x)
    found = fusions(thunder.last_traces(jitted)[-1])
    return (found[0][0] if found else None), out, _program(x)


def _built(fusion) -> str | None:
    """Why ``fusion``'s call ran in PyTorch instead of a kernel; None where it ran its kernel."""
    from .fusion import Fallback

    if fusion is None:
        return "padvec claimed nothing (every op ran in PyTorch); THUNDER_PADVEC_LOG_LEVEL=DEBUG says why"
    if isinstance(fusion.last, Fallback):
        return f"{fusion.name} ran in PyTorch: {str(fusion.last.error).splitlines()[0]}"
    return None


def _against_eager(fusion, out, expected) -> tuple[str, str]:
    failed = _built(fusion)
    if failed:
        return "failed", failed
    if not torch.equal(out, expected):
        return "failed", f"{fusion.name} differs from eager by {(out.float() - expected.float()).abs().max().item():g}"
    return "ok", f"{fusion.name} equal to eager bit for bit"


def versions() -> Finding:
    import thunder

    try:
        from cuda import bindings
        cuda_python = getattr(bindings, "__version__", "installed")
    except ImportError:
        cuda_python = "missing"
    thunder_version = getattr(thunder, "__version__", "unknown")
    detail = (f"thunder_padvec {__version__}, Python {platform.python_version()}, torch {torch.__version__}, "
              f"lightning-thunder {thunder_version}, cuda-python {cuda_python}")
    if cuda_python == "missing":
        return Finding("versions", "failed", detail + ": install cuda-python (NVRTC and the CUDA driver's API)")
    if thunder_version != THUNDER_TESTED:
        return Finding("versions", "warning", detail + f": padvec is tested with lightning-thunder {THUNDER_TESTED}")
    return Finding("versions", "ok", detail)


def nvrtc_library() -> Finding:
    from .runtime import nvrtc

    major, minor = nvrtc.version()
    archs = nvrtc.supported_archs()
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib
        where = load_nvidia_dynamic_lib("nvrtc").abs_path
    except Exception:  # found by the system loader instead
        where = "found by the system loader"
    return Finding("NVRTC", "ok", f"{major}.{minor}, sm_{min(archs)} to sm_{max(archs)}, {where}")


def _arch() -> str:
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        return f"sm_{major}{minor}"
    return NO_GPU_ARCH


def kernel_compile() -> Finding:
    """A kernel padvec generates (``_program``'s, planned in emulation) compiled to CUBIN by NVRTC."""
    from . import codegen, emulation
    from .runtime import nvrtc

    try:
        with emulation(True):
            fusion, _, _ = _traced("cpu")
        failed = _built(fusion)
    except PadvecError as err:  # THUNDER_PADVEC_STRICT=1: what would have fallen back raises
        failed = str(err).splitlines()[0]
    if failed:  # planned in emulation, which builds with the host compiler: see that check
        return Finding("kernel compile", "skipped", f"no kernel planned in emulation ({failed})")
    spec = fusion.last
    arch = _arch()
    start = time.perf_counter()
    cubin = nvrtc.compile_cubin(codegen.device_source(codegen.render(spec.plan, spec.params)), arch)
    return Finding("kernel compile", "ok",
                   f"{fusion.name} for {arch}: {len(cubin)} bytes of CUBIN in {time.perf_counter() - start:.2f} s")


def emulation_run() -> Finding:
    """The same kernel run on CPU tensors against eager, and built once more by the host C++ compiler (the
    run may have found it in the cache)."""
    from . import codegen, emulation
    from .runtime.host import compile_shared_object, compiler_version

    try:
        with emulation(True):
            fusion, out, expected = _traced("cpu")
    except PadvecError as err:  # THUNDER_PADVEC_STRICT=1: what would have fallen back raises
        return Finding("emulation", "failed", f"{compiler_version(knobs.host_cxx())}: {str(err).splitlines()[0]}")
    status, detail = _against_eager(fusion, out, expected)
    if status == "ok":
        spec = fusion.last
        try:
            compile_shared_object(codegen.host_source(codegen.render(spec.plan, spec.params)))
        except CompileError as err:
            status, detail = "failed", f"{detail}, from the cache; built again: {str(err).splitlines()[0]}"
    return Finding("emulation", status, f"{compiler_version(knobs.host_cxx())}: {detail}")


def gpu() -> Finding:
    if not torch.cuda.is_available():
        return Finding("GPU", "skipped", "no CUDA GPU: padvec claims CPU tensors only in emulation "
                                         "(THUNDER_PADVEC_EMULATE=1)")
    from .runtime import launch, nvrtc

    arch = _arch()
    driver = launch._check(launch._driver().cuDriverGetVersion(), "cuDriverGetVersion")
    detail = f"{torch.cuda.get_device_name()} ({arch}), CUDA driver {driver // 1000}.{driver % 1000 // 10}"
    major, _ = nvrtc.version()
    if int(arch[3:]) not in nvrtc.supported_archs():
        return Finding("GPU", "failed", detail + f": NVRTC {major} cannot compile for {arch}")
    if driver // 1000 < major:
        return Finding("GPU", "failed", detail + f": a CUBIN from NVRTC {major} needs a CUDA {major} driver; "
                                                 f"install nvidia-cuda-nvrtc of CUDA {driver // 1000}")
    return Finding("GPU", "ok", detail)


def gpu_launch() -> Finding:
    if not torch.cuda.is_available():
        return Finding("GPU launch", "skipped", "no CUDA GPU")
    status, detail = _against_eager(*_traced("cuda"))
    return Finding("GPU launch", status, detail)


def disk_cache() -> Finding:
    """The kernel cache's folder: made if missing, a file written and removed in it."""
    folder = knobs.cache_dir()
    if folder is None:
        return Finding("disk cache", "ok", "off (THUNDER_PADVEC_CACHE_DIR=off): every process compiles afresh")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".doctor-{uuid.uuid4().hex}"
        probe.write_bytes(b"padvec")
        probe.unlink()
    except OSError as err:
        return Finding("disk cache", "warning", f"{folder}: not writable ({err.strerror or err}); kernels are compiled "
                                                "again in every process (THUNDER_PADVEC_CACHE_DIR sets the folder)")
    return Finding("disk cache", "ok", f"{folder}, writable")


def settings() -> Finding:
    on = {"emulation": knobs.emulate(), "strict": knobs.strict(), "measured launch variants": knobs.tune(),
          "outputs poisoned": knobs.poison_outputs()}
    detail = ", ".join(f"{name} {'on' if value else 'off'}" for name, value in on.items())
    return Finding("settings", "ok", f"{detail}, log level {knobs.log_level()}, dumps in {knobs.dump_dir()}")


CHECKS: tuple[tuple[str, Callable[[], Finding]], ...] = (
    ("versions", versions), ("NVRTC", nvrtc_library), ("kernel compile", kernel_compile),
    ("emulation", emulation_run), ("GPU", gpu), ("GPU launch", gpu_launch), ("disk cache", disk_cache),
    ("settings", settings))


def run(checks: tuple[tuple[str, Callable[[], Finding]], ...] = CHECKS) -> list[Finding]:
    """Every check's finding, in order; one that raises is "failed" with its exception."""
    findings = []
    for name, check in checks:
        try:
            findings.append(check())
        except Exception as err:  # a check never raises: what went wrong is its finding
            first = str(err).splitlines()[0] if str(err) else ""
            findings.append(Finding(name, "failed", f"{type(err).__name__}: {first}"))
    return findings


def report(findings: list[Finding]) -> str:
    width = max(len(f.check) for f in findings)
    return "\n".join(f"{f.check:<{width}}  {f.status:<8}  {f.detail}" for f in findings)


__all__ = ["CHECKS", "Finding", "report", "run"]
