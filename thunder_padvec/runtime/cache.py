"""Kernel binaries by content: in memory, then on disk, then compiled.

The key covers everything that changes the binary: the full source (preludes included), the
target (CUBIN for an ``sm_XY`` with NVRTC's version and options, or a host library with the
compiler's version and flags) and this package's version. Disk entries are written to a
temporary file and renamed into place, and carry a checksum: a corrupt, truncated or unreadable
entry is compiled again, never loaded. ``compile_count`` lets tests see when compiles happen.

A source is compiled once even when several threads ask for it at the same time: the first compiles,
the others wait for its result. ``prefetch`` starts the compiles of several sources in threads of their own
(NVRTC releases the GIL while it compiles), so that a first call that builds a kernel's launch variants
compiles them side by side instead of one after the other.

The folders grow with every new kernel and every package version; ``disk_usage`` counts what this package
wrote there and ``clear_disk`` removes it, leaving any other file alone
(``python -m thunder_padvec cache [--clear]``).
"""

from __future__ import annotations

import collections
import concurrent.futures
import hashlib
import logging
import os
import re
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .. import __version__, knobs

log = logging.getLogger("thunder_padvec")

MAGIC = b"thunder-padvec binary v1\n"

compile_count: collections.Counter[str] = collections.Counter()
_memory: dict[str, bytes] = {}
_notes: dict[str, str] = {}
_pending: dict[str, concurrent.futures.Future] = {}  # compiles under way, by key
_lock = threading.Lock()


@dataclass(frozen=True)
class Target:
    """Where a binary runs and how it is built. ``identity`` names everything that changes it."""

    kind: str  # "cubin" or "host"
    identity: str
    compile: Callable[[str, Path | None], bytes]
    suffix: str  # of the dumped source


def _digest(*parts: str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\x00")
    return h.hexdigest()


def dump_source(source: str, suffix: str) -> Path | None:
    """Writes ``source`` to the dump folder (once per content) and returns its path."""
    try:
        folder = knobs.dump_dir()
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"padvec_{_digest(source)[:16]}{suffix}"
        if not path.exists():
            _atomic_write(path, source.encode())
        return path
    except OSError as err:
        log.debug("could not dump a kernel source: %s", err)
        return None


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _read_disk(path: Path) -> bytes | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    header_end = len(MAGIC) + 65
    if not data.startswith(MAGIC) or len(data) < header_end:
        return None
    checksum, payload = data[len(MAGIC):header_end - 1].decode(errors="replace"), data[header_end:]
    if hashlib.sha256(payload).hexdigest() != checksum:
        log.info("cache entry %s is corrupt; building it again", path)
        return None
    return payload


def _write_disk(path: Path, payload: bytes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _atomic_write(path, MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)
    except OSError as err:
        log.info("could not write kernel cache entry %s: %s", path, err)


def binary(source: str, target: Target) -> tuple[bytes, Path | None]:
    """The binary of ``source`` for ``target``, and the path of the dumped source. Where another thread
    is compiling the same source, waits for its binary (or its error) instead of compiling it again."""
    key = _digest(__version__, target.kind, target.identity, source)
    source_path = dump_source(source, target.suffix)
    with _lock:
        cached = _memory.get(key)
        pending = _pending.get(key) if cached is None else None
        if cached is None and pending is None:
            _pending[key] = mine = concurrent.futures.Future()
    if cached is not None:
        return cached, source_path
    if pending is not None:
        return pending.result(), source_path
    try:
        payload = _load_or_compile(key, source, source_path, target)
    except BaseException as err:
        with _lock:
            del _pending[key]
        mine.set_exception(err)
        raise
    with _lock:
        _memory[key] = payload
        del _pending[key]
    mine.set_result(payload)
    return payload, source_path


def _load_or_compile(key: str, source: str, source_path: Path | None, target: Target) -> bytes:
    folder = knobs.cache_dir()
    disk_path = folder / key[:2] / f"{key}.{target.kind}" if folder is not None else None
    payload = _read_disk(disk_path) if disk_path is not None else None
    if payload is None:
        payload = target.compile(source, source_path)
        with _lock:
            compile_count[target.kind] += 1
        if disk_path is not None:
            _write_disk(disk_path, payload)
    return payload


def prefetch(sources: list[str], target: Target) -> None:
    """Starts building the binaries of ``sources``, a thread each, and returns at once; ``binary`` then
    takes each from memory or waits for it. A source whose build fails raises again where ``binary``
    asks for it. The threads end with their builds: none is left to a later fork (a data loader's
    workers)."""
    for source in sources:
        threading.Thread(target=_build_quietly, args=(source, target), name="padvec-compile").start()


def _build_quietly(source: str, target: Target) -> None:
    try:
        binary(source, target)
    except BaseException:  # kept for the caller that asks for it (``binary`` raises it there)
        pass


def _after_fork_in_child() -> None:
    """A forked child (a data loader's worker, say) has none of the parent's compile threads: their
    compiles under way would never finish there, and a lock one of them held would never be released.
    It starts afresh: its own lock, no compiles pending."""
    global _lock
    _lock = threading.Lock()
    _pending.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def digest(*parts: str) -> str:
    """A key over ``parts`` and this package's version."""
    return _digest(__version__, *parts)


def _note_path(key: str) -> Path | None:
    folder = knobs.cache_dir()
    return folder / "notes" / key[:2] / f"{key}.txt" if folder is not None else None


def read_note(key: str) -> str | None:
    """A short text kept under ``key`` (a measured decision), from memory or disk; None if absent or corrupt."""
    with _lock:
        if key in _notes:
            return _notes[key]
    path = _note_path(key)
    payload = _read_disk(path) if path is not None else None
    return payload.decode(errors="replace") if payload is not None else None


def write_note(key: str, text: str) -> None:
    with _lock:
        _notes[key] = text
    path = _note_path(key)
    if path is not None:
        _write_disk(path, text.encode())


def clear_memory() -> None:
    """Forgets in-memory binaries and notes (the disk cache stays)."""
    with _lock:
        _memory.clear()
        _notes.clear()


_ENTRY = re.compile(r"[0-9a-f]{64}\.(\w+)")  # a binary: <key>.<target kind>; a note: <key>.txt under notes/
_DUMP = re.compile(r"padvec_[0-9a-f]{16}\.\w+")
_PARTIAL = re.compile(r"\.([0-9a-f]{64}\.\w+|padvec_[0-9a-f]{16}\.\w+)\.\w+\.tmp")  # a write a killed process
# left unfinished (``_atomic_write``: the entry's name, then mkstemp's random part)


@dataclass
class Usage:
    """This package's files in the cache and dump folders: counts and bytes (``failed``: files that could
    not be read or removed)."""

    cache_folder: Path | None
    dump_folder: Path
    binaries: collections.Counter = field(default_factory=collections.Counter)  # by target kind
    notes: int = 0
    partial: int = 0
    cache_bytes: int = 0
    dumps: int = 0
    dump_bytes: int = 0
    failed: int = 0


def _own_files(usage: Usage):
    """``(path, what)`` for each file this package wrote: "binary:<kind>", "note", "partial" or "dump"."""
    folder = usage.cache_folder
    if folder is not None and _is_dir(folder, usage):
        for shard in _subfolders(folder, usage):
            for path in _files(shard, usage):
                match = _ENTRY.fullmatch(path.name)
                if match and match.group(1) != "txt":
                    yield path, f"binary:{match.group(1)}"
                elif _PARTIAL.fullmatch(path.name):
                    yield path, "partial"
        notes = folder / "notes"
        for shard in _subfolders(notes, usage) if _is_dir(notes, usage) else ():
            for path in _files(shard, usage):
                if _ENTRY.fullmatch(path.name) and path.suffix == ".txt":
                    yield path, "note"
                elif _PARTIAL.fullmatch(path.name):
                    yield path, "partial"
    if _is_dir(usage.dump_folder, usage):
        for path in _files(usage.dump_folder, usage):
            if _DUMP.fullmatch(path.name):
                yield path, "dump"
            elif _PARTIAL.fullmatch(path.name) and path.name.startswith(".padvec_"):
                yield path, "dump"


def _is_dir(folder: Path, usage: Usage) -> bool:
    try:
        return folder.is_dir()
    except OSError:  # a parent that can't be searched
        usage.failed += 1
        return False


def _subfolders(folder: Path, usage: Usage) -> list[Path]:
    """The two-hex-digit shards of ``folder``."""
    try:
        return sorted(p for p in folder.iterdir()
                      if re.fullmatch(r"[0-9a-f]{2}", p.name) and p.is_dir() and not p.is_symlink())
    except OSError:
        usage.failed += 1
        return []


def _files(folder: Path, usage: Usage) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.is_file() and not p.is_symlink())
    except OSError:
        usage.failed += 1
        return []


def _size(path: Path, usage: Usage) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        usage.failed += 1
        return None


def _count(usage: Usage, what: str, size: int) -> None:
    if what == "dump":
        usage.dumps += 1
        usage.dump_bytes += size
        return
    usage.cache_bytes += size
    if what == "note":
        usage.notes += 1
    elif what == "partial":
        usage.partial += 1
    else:
        usage.binaries[what.split(":", 1)[1]] += 1


def disk_usage() -> Usage:
    """What this package keeps on disk: kernel binaries, measured decisions and dumped sources. Never raises."""
    usage = Usage(knobs.cache_dir(), knobs.dump_dir())
    for path, what in list(_own_files(usage)):
        size = _size(path, usage)
        if size is not None:
            _count(usage, what, size)
    return usage


def clear_disk() -> Usage:
    """Removes this package's files from the cache and dump folders (and shards left empty), and returns
    what it removed. Other files stay; a process running meanwhile compiles what it misses again. Never
    raises: a file that can't be removed counts in ``failed``."""
    usage = Usage(knobs.cache_dir(), knobs.dump_dir())
    for path, what in list(_own_files(usage)):
        try:
            size = path.stat().st_size
            path.unlink()
        except FileNotFoundError:  # gone meanwhile
            continue
        except OSError:
            usage.failed += 1
            continue
        _count(usage, what, size)
    folder = usage.cache_folder
    if folder is not None:
        for parent in (folder / "notes", folder):
            for shard in _subfolders(parent, usage) if _is_dir(parent, usage) else ():
                try:
                    shard.rmdir()
                except OSError:  # not empty: another file, or an entry written meanwhile
                    pass
        try:
            (folder / "notes").rmdir()
        except OSError:
            pass
    return usage
