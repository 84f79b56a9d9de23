"""Every environment variable thunder-padvec reads, in one place.

Values are read when asked for, not at import, so a test or a notebook can change them at run time.

| variable | meaning | default |
|---|---|---|
| ``THUNDER_PADVEC_EMULATE`` | ``1``: claim CPU tensors and run the generated kernels on the host (g++) | off |
| ``THUNDER_PADVEC_CACHE_DIR`` | folder of the on-disk kernel cache; ``off`` disables it | ``~/.cache/thunder_padvec`` |
| ``THUNDER_PADVEC_DUMP_DIR`` | folder where every generated source is written | ``<tmp>/thunder_padvec-<user>/dump`` |
| ``THUNDER_PADVEC_STRICT`` | ``1``: a failed compile or load, or an internal error, raises (no fallback) | off |
| ``THUNDER_PADVEC_LOG_LEVEL`` | level of the ``thunder_padvec`` logger (``DEBUG``, ``INFO``, ...) | ``WARNING`` |
| ``THUNDER_PADVEC_CXX`` | host C++ compiler used by emulation | ``g++`` |
| ``THUNDER_PADVEC_TUNE`` | ``0``: no measured choices between launch variants (the default variant) | on |
| ``THUNDER_PADVEC_POISON`` | ``1``: fill outputs with NaN (floats) before each launch; unwritten elements show | off |
"""

from __future__ import annotations

import getpass
import os
import tempfile
from pathlib import Path

_TRUE = {"1", "true", "yes", "on"}

_emulate_override: bool | None = None


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in _TRUE


def emulate() -> bool:
    if _emulate_override is not None:
        return _emulate_override
    return _flag("THUNDER_PADVEC_EMULATE")


def set_emulate(on: bool | None) -> None:
    """Overrides ``THUNDER_PADVEC_EMULATE``; ``None`` returns control to the variable."""
    global _emulate_override
    _emulate_override = on


def strict() -> bool:
    return _flag("THUNDER_PADVEC_STRICT")


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no user name in some containers
        return str(os.getuid())


def cache_dir() -> Path | None:
    value = os.environ.get("THUNDER_PADVEC_CACHE_DIR", "").strip()
    if value.lower() in {"off", "0", "none"}:
        return None
    if value:
        return Path(value)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "thunder_padvec"


def dump_dir() -> Path:
    value = os.environ.get("THUNDER_PADVEC_DUMP_DIR", "").strip()
    if value:
        return Path(value)
    return Path(tempfile.gettempdir()) / f"thunder_padvec-{_user()}" / "dump"


def log_level() -> str:
    return os.environ.get("THUNDER_PADVEC_LOG_LEVEL", "WARNING").strip().upper() or "WARNING"


def host_cxx() -> str:
    return os.environ.get("THUNDER_PADVEC_CXX", "").strip() or "g++"


def poison_outputs() -> bool:
    return _flag("THUNDER_PADVEC_POISON")


def tune() -> bool:
    return os.environ.get("THUNDER_PADVEC_TUNE", "").strip().lower() not in {"0", "off", "false", "no"}
