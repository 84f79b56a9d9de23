"""Runtime: the kernel caches (in memory and on disk) and compile counting."""

import functools
import importlib
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest
import torch

from helpers import jit_and_run, randn
from thunder_padvec.errors import CompileError, InternalError
from thunder_padvec.examples import rope_one_entry
from thunder_padvec.runtime import cache

SCRIPT = textwrap.dedent("""
    import thunder_padvec, thunder, torch
    from thunder_padvec.examples import rope_one_entry, rope_inputs
    from thunder_padvec.runtime import cache
    thunder_padvec.set_emulation(True)
    x, cos, sin = rope_inputs(1, 2, 8, 16, 8, generator=torch.Generator().manual_seed(0))
    out = thunder.jit(rope_one_entry, executors=[thunder_padvec.padvec])(x, cos, sin, 8)
    assert torch.equal(out, rope_one_entry(x, cos, sin, 8))
    print(sum(cache.compile_count.values()))
""")


def _run_process(cache_dir) -> int:
    env = {**os.environ, "THUNDER_PADVEC_CACHE_DIR": str(cache_dir)}
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return int(out.stdout.strip().splitlines()[-1])


def _rope_args(generator):
    x = randn(1, 2, 8, 16, dtype=torch.bfloat16, generator=generator)
    return x, randn(8, 8, dtype=torch.bfloat16, generator=generator), randn(8, 8, dtype=torch.bfloat16,
                                                                            generator=generator), 8


def test_second_call_and_second_jit_do_not_compile(emulated, generator):
    args = _rope_args(generator)
    jitted, out, _ = jit_and_run(rope_one_entry, *args)
    before = sum(cache.compile_count.values())
    jitted(*args)
    _, again, _ = jit_and_run(rope_one_entry, *args)  # a new trace, the same structure
    assert sum(cache.compile_count.values()) == before
    assert torch.equal(out, again)


def test_second_process_loads_from_disk_without_compiling(tmp_path):
    assert _run_process(tmp_path) >= 1
    assert _run_process(tmp_path) == 0


def test_corrupt_or_truncated_entries_are_rebuilt(tmp_path, monkeypatch, emulated, generator):
    monkeypatch.setenv("THUNDER_PADVEC_CACHE_DIR", str(tmp_path))
    cache.clear_memory()
    args = _rope_args(generator)
    jit_and_run(rope_one_entry, *args)
    entries = sorted(tmp_path.rglob("*.host"))
    assert entries
    for i, entry in enumerate(entries):
        data = entry.read_bytes()
        entry.write_bytes(data[: len(data) // 2] if i % 2 == 0 else data[:-10] + b"corrupted!")
    cache.clear_memory()
    before = cache.compile_count["host"]
    _, out, _ = jit_and_run(rope_one_entry, *args)
    assert cache.compile_count["host"] == before + len(entries)
    assert torch.equal(out, rope_one_entry(*args))
    assert all(cache._read_disk(e) is not None for e in entries)  # rewritten whole


def test_unreadable_entries_and_an_unwritable_folder_never_break_a_call(tmp_path, monkeypatch, emulated, generator):
    args = _rope_args(generator)
    # an entry that can't be read (a folder where the file should be): compiled again, correct result
    monkeypatch.setenv("THUNDER_PADVEC_CACHE_DIR", str(tmp_path / "cache"))
    cache.clear_memory()
    jit_and_run(rope_one_entry, *args)
    for entry in (tmp_path / "cache").rglob("*.host"):
        entry.unlink()
        entry.mkdir()
    cache.clear_memory()
    _, out, _ = jit_and_run(rope_one_entry, *args)
    assert torch.equal(out, rope_one_entry(*args))
    # a cache folder that can't be created (its parent is a file): runs, and compiles every time
    (tmp_path / "file").write_text("not a folder")
    monkeypatch.setenv("THUNDER_PADVEC_CACHE_DIR", str(tmp_path / "file" / "cache"))
    for _ in range(2):
        cache.clear_memory()
        before = cache.compile_count["host"]
        _, out, _ = jit_and_run(rope_one_entry, *args)
        assert torch.equal(out, rope_one_entry(*args))
        assert cache.compile_count["host"] > before


def _fill_folders(tmp_path, monkeypatch, generator):
    """A padvec run with its cache and dumps in ``tmp_path``, plus files of others and a half-written entry."""
    monkeypatch.setenv("THUNDER_PADVEC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("THUNDER_PADVEC_DUMP_DIR", str(tmp_path / "dump"))
    cache.clear_memory()
    args = _rope_args(generator)
    jit_and_run(rope_one_entry, *args)
    cache.write_note(cache.digest("a decision"), "keep")
    binary = next((tmp_path / "cache").rglob("*.host"))
    (binary.parent / f".{binary.name}.x1y2.tmp").write_bytes(b"half")
    others = [tmp_path / "cache" / "README", binary.parent / "mine.host", tmp_path / "dump" / "notes.txt",
              tmp_path / "cache" / "zz" / ("0" * 64 + ".host"), binary.parent / ".mine.x1y2.tmp"]
    for path in others:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("not padvec's")
    return args, others


def test_cache_usage_counts_and_clear_removes_only_this_packages_files(tmp_path, monkeypatch, emulated, generator):
    args, others = _fill_folders(tmp_path, monkeypatch, generator)
    binaries = sorted((tmp_path / "cache").glob("[0-9a-f][0-9a-f]/*.host"))
    usage = cache.disk_usage()
    assert usage.binaries == {"host": len(binaries) - 1}  # less the other's own file named like an entry
    assert usage.notes == 1 and usage.partial == 1 and usage.failed == 0
    assert usage.dumps == len(list((tmp_path / "dump").glob("padvec_*"))) >= 1
    assert usage.cache_bytes == sum(p.stat().st_size for p in (tmp_path / "cache").rglob("*")
                                    if p.is_file() and p not in others)
    removed = cache.clear_disk()
    assert (removed.binaries, removed.notes, removed.partial, removed.dumps) == (
        usage.binaries, usage.notes, usage.partial, usage.dumps)
    assert removed.cache_bytes == usage.cache_bytes and removed.failed == 0
    assert all(p.read_text() == "not padvec's" for p in others)  # every other file stays
    after = cache.disk_usage()
    assert (sum(after.binaries.values()), after.notes, after.partial, after.dumps) == (0, 0, 0, 0)
    assert not (tmp_path / "cache" / "notes").exists()  # shards left empty go too
    # the next process (here: the memory forgotten) compiles again and computes the same
    cache.clear_memory()
    before = cache.compile_count["host"]
    _, out, _ = jit_and_run(rope_one_entry, *args)
    assert cache.compile_count["host"] > before
    assert torch.equal(out, rope_one_entry(*args))


def test_cache_command_reports_and_clears(tmp_path, monkeypatch, emulated, generator, capsys):
    from thunder_padvec.__main__ import main

    _fill_folders(tmp_path, monkeypatch, generator)
    usage = cache.disk_usage()
    assert main(["cache"]) == 0
    out = capsys.readouterr().out
    host = usage.binaries["host"]
    assert str(tmp_path / "cache") in out and f"{host} kernel binaries (host: {host})" in out
    assert "1 measured decisions" in out and f"holds {usage.dumps} files" in out
    assert main(["cache", "--clear"]) == 0
    assert "removed" in capsys.readouterr().out
    assert sum(cache.disk_usage().binaries.values()) == 0
    monkeypatch.setenv("THUNDER_PADVEC_CACHE_DIR", "off")
    assert main(["cache"]) == 0
    assert "kernel cache: off" in capsys.readouterr().out


def test_a_file_that_cannot_be_removed_is_counted_not_raised(tmp_path, monkeypatch, emulated, generator, capsys):
    from pathlib import Path

    from thunder_padvec.__main__ import main

    _fill_folders(tmp_path, monkeypatch, generator)
    real_unlink = Path.unlink

    def unlink(self, *a, **k):
        if self.suffix == ".txt" and self.parent.parent.name == "notes":
            raise PermissionError(13, "read-only", str(self))
        return real_unlink(self, *a, **k)

    monkeypatch.setattr(Path, "unlink", unlink)
    assert main(["cache", "--clear"]) == 1
    assert "1 files or folders could not be removed" in capsys.readouterr().out
    usage = cache.disk_usage()
    assert usage.notes == 1 and sum(usage.binaries.values()) == 0  # the rest went
    # a folder that can't be searched (a parent without permission): counted, the rest still read
    real_is_dir = Path.is_dir

    def is_dir(self):
        if self == tmp_path / "dump":
            raise PermissionError(13, "no search permission", str(self))
        return real_is_dir(self)

    monkeypatch.setattr(Path, "is_dir", is_dir)
    usage = cache.disk_usage()
    assert usage.failed == 1 and usage.notes == 1 and usage.dumps == 0


def test_two_processes_compiling_at_once_both_succeed_and_leave_the_cache_valid(tmp_path):
    env = {**os.environ, "THUNDER_PADVEC_CACHE_DIR": str(tmp_path)}
    procs = [subprocess.Popen([sys.executable, "-c", SCRIPT], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    entries = sorted(tmp_path.rglob("*.host"))
    assert entries and all(cache._read_disk(e) is not None for e in entries)
    assert not list(tmp_path.rglob("*.tmp*"))  # no half-written files left behind
    assert _run_process(tmp_path) == 0  # a third process compiles nothing


def test_a_failed_compile_falls_back_to_pytorch_with_one_warning(monkeypatch, emulated, generator, tmp_path):
    monkeypatch.delenv("THUNDER_PADVEC_STRICT")
    monkeypatch.setenv("THUNDER_PADVEC_CXX", "false")  # a "compiler" that always fails
    monkeypatch.setenv("THUNDER_PADVEC_DUMP_DIR", str(tmp_path))
    monkeypatch.setenv("THUNDER_PADVEC_CACHE_DIR", "off")
    _reset_host_target(monkeypatch)
    args = _rope_args(generator)
    with pytest.warns(RuntimeWarning, match="runs in PyTorch") as record:
        jitted, out, _ = jit_and_run(rope_one_entry, *args)
        again = jitted(*args)
    ours = [str(w.message) for w in record if "runs in PyTorch" in str(w.message)]
    assert len(ours) == 1 and str(tmp_path) in ours[0]  # once, naming the dumped source
    assert torch.equal(out, rope_one_entry(*args)) and torch.equal(again, out)


def test_a_module_that_does_not_load_falls_back_naming_the_source(monkeypatch, emulated, generator, tmp_path):
    monkeypatch.delenv("THUNDER_PADVEC_STRICT")
    from thunder_padvec import fusion

    monkeypatch.setenv("THUNDER_PADVEC_DUMP_DIR", str(tmp_path))
    real = cache.binary
    monkeypatch.setattr(fusion.cache, "binary", lambda source, target: (b"not a library", real(source, target)[1]))
    args = _rope_args(generator)
    with pytest.warns(RuntimeWarning, match="runs in PyTorch") as record:
        _, out, _ = jit_and_run(rope_one_entry, *args)
    (message,) = [str(w.message) for w in record if "runs in PyTorch" in str(w.message)]
    assert "could not load" in message and str(tmp_path) in message
    assert torch.equal(out, rope_one_entry(*args))


def test_strict_mode_raises_the_typed_error(monkeypatch, emulated, generator, tmp_path):
    monkeypatch.setenv("THUNDER_PADVEC_CXX", "false")
    monkeypatch.setenv("THUNDER_PADVEC_STRICT", "1")
    monkeypatch.setenv("THUNDER_PADVEC_DUMP_DIR", str(tmp_path))
    monkeypatch.setenv("THUNDER_PADVEC_CACHE_DIR", "off")
    _reset_host_target(monkeypatch)
    with pytest.raises(CompileError) as info:
        jit_and_run(rope_one_entry, *_rope_args(generator))
    assert info.value.source_path.parent == tmp_path and info.value.source_path.exists()


@pytest.mark.parametrize("stage, module, name, fault", [
    ("building the kernel", "thunder_padvec.vectorize", "plan", IndexError),  # planning, at the first call
    ("lowering the region", "thunder_padvec.executor", "lower", KeyError),  # the fusion pass
])
def test_a_fault_of_padvecs_own_falls_back_to_pytorch_and_strict_mode_raises_it(monkeypatch, emulated, generator,
                                                                              stage, module, name, fault):
    import sys

    def broken(*args, **kwargs):
        raise fault("a fault")

    monkeypatch.setattr(sys.modules[module], name, broken)
    args = _rope_args(generator)
    monkeypatch.delenv("THUNDER_PADVEC_STRICT", raising=False)
    with pytest.warns(RuntimeWarning, match=f"padvec0 runs in PyTorch: an internal error while {stage} "
                                            f"\\({fault.__name__}: .*a fault"):
        _, out, trace = jit_and_run(rope_one_entry, *args)
    assert "padvec0" in str(trace) and torch.equal(out, rope_one_entry(*args))
    monkeypatch.setenv("THUNDER_PADVEC_STRICT", "1")
    with pytest.raises(InternalError) as info:
        jit_and_run(rope_one_entry, *args)
    assert isinstance(info.value.__cause__, fault)


def test_a_call_with_the_wrong_tensors_is_a_type_error_not_a_fallback(emulated, generator):
    jitted, _, trace = jit_and_run(rope_one_entry, *_rope_args(generator))
    fusion = next(b for b in trace.bound_symbols if b.sym.name == "padvec0")._call_ctx["padvec0"]
    x, cos, sin, _ = _rope_args(generator)
    with pytest.raises(TypeError, match="input .* should be"):
        fusion(torch.cat((x, x), -1), cos, sin)
    fusion(x, cos, sin)  # specialized for these strides
    # the same strides, another batch or dtype: not the kernel built for the first call
    with pytest.raises(TypeError, match="input x.* should be"):
        fusion(torch.cat((x, x), 0), cos, sin)
    with pytest.raises(TypeError, match="input .* should be"):
        fusion(x, cos.half(), sin.half())
    # not tensors, or too few: the same typed error, not a failure inside the hot path
    with pytest.raises(TypeError, match="input cos.* should be .*got <class 'float'>"):
        fusion(x, 0.5, sin)
    with pytest.raises(TypeError, match="input x.* should be .*got <class 'list'>"):
        fusion([1.0], cos, sin)
    with pytest.raises(TypeError, match="takes 3 tensors, got 0"):
        fusion()


def _reset_host_target(monkeypatch):
    from thunder_padvec import fusion

    fusion._host_target.cache_clear()
    monkeypatch.setattr(cache, "_memory", {})
    monkeypatch.setattr(fusion, "_host_target", functools.cache(fusion._host_target.__wrapped__))


def test_threads_calling_one_fusion_at_once_get_their_own_results(emulated, generator):
    from concurrent.futures import ThreadPoolExecutor

    inputs = [_rope_args(generator) for _ in range(8)]
    jitted, _, _ = jit_and_run(rope_one_entry, *inputs[0])

    def call(args):
        return [jitted(*args) for _ in range(5)]

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(call, inputs))
    for args, outs in zip(inputs, results):
        expected = rope_one_entry(*args)
        assert all(torch.equal(out, expected) for out in outs)


def test_notes_are_kept_on_disk_and_a_corrupt_one_reads_as_absent(tmp_path, monkeypatch):
    monkeypatch.setenv("THUNDER_PADVEC_CACHE_DIR", str(tmp_path))
    key = cache.digest("tune", "a GPU", "source")
    assert cache.read_note(key) is None
    cache.write_note(key, "plain")
    cache.clear_memory()
    assert cache.read_note(key) == "plain"  # from disk
    (path,) = (tmp_path / "notes").rglob("*.txt")
    path.write_bytes(path.read_bytes()[:-2])  # truncated
    cache.clear_memory()
    assert cache.read_note(key) is None


def _rounds(default: float, *variants: tuple[str, float, float, int], n: int = 31, name: str = "keep"):
    """Rounds in which the default takes ``default`` µs and each variant ``(name, fast, slow, won)`` takes
    ``fast`` µs in ``won`` rounds and ``slow`` in the others."""
    from thunder_padvec.runtime import tune

    return tune.Rounds(((name, (default,) * n),
                        *((v, (fast,) * won + (slow,) * (n - won)) for v, fast, slow, won in variants)))


@pytest.mark.parametrize("rounds, chosen", [
    (_rounds(10.0, ("plain", 9.5, 9.6, 31)), "plain"),  # 5% faster in every round: taken
    (_rounds(10.0, ("plain", 9.97, 9.98, 31)), "keep"),  # within the margin: the default stays
    (_rounds(10.0, ("plain", 9.93, 9.95, 31)), "plain"),  # 0.7% faster: taken
    (_rounds(10.0, ("plain", 10.5, 10.6, 31)), "keep"),
    (_rounds(10.0, ("keep", 9.0, 9.1, 31), name="plain"), "keep"),
    (_rounds(10.0, ("plain", 9.9, 10.1, 21)), "plain"),  # median 1% faster, faster in 21 of 31 rounds
    (_rounds(10.0, ("plain", 9.9, 10.1, 20)), "keep"),  # the same median, faster in 20 of 31: noise
    (_rounds(10.0, ("plain", 9.0, 10.4, 20), ("keep reused", 9.5, 9.6, 31)), "keep reused"),  # the fastest
    # median lost most rounds; the next one won them all
])
def test_a_variant_replaces_the_default_only_where_it_is_faster_by_the_margin_in_most_rounds(rounds, chosen):
    from thunder_padvec.runtime import tune

    assert tune.pick(rounds) == chosen


def test_rounds_count_each_variants_wins_against_the_default_round_by_round():
    from thunder_padvec.runtime import tune

    rounds = tune.Rounds((("keep", (10.0, 12.0, 10.0)), ("plain", (11.0, 11.0, 9.0)), ("keep reused", (9, 9, 9))))
    assert (rounds.count, rounds.wins(), rounds.medians()) == (
        3, (0, 2, 3), (("keep", 10.0), ("plain", 11.0), ("keep reused", 9)))
    assert tune.pick(rounds) == "keep reused"
    assert str(tune.Choice.measured("keep reused", rounds)) == (
        "keep 10.0 µs / plain 11.0 µs (faster in 2 of 3 rounds) / keep reused 9.0 µs (faster in 3 of 3 rounds)"
        ": keep reused")


def test_a_decision_taken_under_another_rule_is_taken_again(monkeypatch):
    from thunder_padvec.runtime import tune

    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device: "fake GPU")
    key = tune.decision_key(["source a", "source b"], torch.device("cuda", 0))
    assert tune.decision_key(["source a", "source b"], torch.device("cuda", 0)) == key
    assert tune.decision_key(["source a", "source c"], torch.device("cuda", 0)) != key
    monkeypatch.setattr(tune, "WIN_SHARE", 0.5)
    assert tune.decision_key(["source a", "source b"], torch.device("cuda", 0)) != key


class _FakeSpec:
    def __init__(self, params, source):
        self.params, self.source, self.choice, self.runs = params, source, None, 0

    def run(self, args, outputs, pointers):
        self.runs += 1
        return outputs


def _fake_first_call(monkeypatch, tmp_path, record) -> tuple[list, list]:
    """A first call on a GPU with its GPU parts stood in (build, timing, the device's name), no threads'
    minimum in the plans: ``(built, timed)``, what ``record(plan, params, source, one_row)`` makes of each
    build and the names of the variants timed; the last one timed is the fastest."""
    from thunder_padvec import fusion, schedule
    from thunder_padvec.runtime import tune

    monkeypatch.setenv("THUNDER_PADVEC_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tune, "may_time", lambda device: True)
    monkeypatch.setattr(tune, "decision_key", lambda sources, device: cache.digest("tune", "fake GPU", *sources))
    monkeypatch.setattr(fusion, "_prefetch", lambda sources, device: None)
    monkeypatch.setattr(schedule.TUNING, "min_threads", 0)
    built, timed = [], []
    monkeypatch.setattr(fusion.PadvecFusion, "_build_cuda",
                        lambda self, plan, params, source, device, n, one_row=None, wider=None:
                        built.append(record(plan, params, source, one_row)) or _FakeSpec(params, source))

    def measure(runs, device):
        timed.append([name for name, _ in runs])
        return tune.Rounds(tuple((name, (10.0 - k,) * tune.ROUNDS) for k, (name, _) in enumerate(runs)))

    monkeypatch.setattr(tune, "measure", measure)
    return built, timed


@pytest.mark.parametrize("planes", [False, True])
def test_launch_variants_are_timed_once_then_the_decision_is_read_back(tmp_path, monkeypatch, emulated, generator,
                                                                       planes):
    """The first specialization on a GPU builds the default and its variants (the evict_last hints
    switched; the hints on inputs read again only; plane order, where threads take rows along the heads
    and it changes the kernel), times
    them on the call's tensors and keeps the fastest; the decision goes to disk, and a later fusion with
    the same sources (a new process: memory cleared) builds only the chosen kernel and times nothing.
    The GPU parts (build, timing, the device's name) stand in here."""
    import importlib
    from dataclasses import replace

    from thunder_padvec import codegen, fusion, schedule, vectorize
    from thunder_padvec.examples import litgpt_rope
    from thunder_padvec.explain import fusions
    from thunder_padvec.runtime import tune

    monkeypatch.setenv("THUNDER_PADVEC_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tune, "may_time", lambda device: True)
    monkeypatch.setattr(tune, "decision_key", lambda sources, device: cache.digest("tune", "fake GPU", *sources))
    built, timed = [], []
    monkeypatch.setattr(fusion.PadvecFusion, "_build_cuda",
                        lambda self, plan, params, source, device, n, one_row=None, wider=None:
                        built.append((params.keep_hints, params.keep_once, params.plane_order))
                        or _FakeSpec(params, source))
    names = ["keep", "plain", "keep reused"] + ["keep in plane order"] * planes
    rounds = tune.Rounds(tuple((name, (us,) * tune.ROUNDS) for name, us in zip(names, (12.0, 10.0, 9.5, 9.0))))

    def measure(runs, device):
        timed.append([name for name, _ in runs])
        for _, run in runs:
            run()
        return rounds

    monkeypatch.setattr(tune, "measure", measure)
    prefetched = []
    monkeypatch.setattr(fusion, "_prefetch", lambda sources, device: prefetched.append(len(sources)))
    if planes:  # 4 heads a thread, blocks of 32 rows: 4 planes (a batch's group of heads) of 2 blocks
        monkeypatch.setattr(schedule.TUNING, "min_threads", 0)
        monkeypatch.setattr(importlib.import_module("thunder_padvec.vectorize.plan"), "LANE_STEPS", False)
        fn, x, cos, sin = litgpt_rope, *(randn(*shape, dtype=torch.bfloat16, generator=generator)
                                         for shape in ((2, 8, 64, 128), (64, 128), (64, 128)))
        rope_n = 128
    else:
        fn, x, cos, sin = rope_one_entry, *(randn(*shape, dtype=torch.bfloat16, generator=generator)
                                            for shape in ((2, 4, 8, 32), (8, 8), (8, 8)))
        rope_n = 8
    _, _, trace = jit_and_run(fn, x, cos, sin, rope_n)  # a kernel to specialize again, below
    ((fusion_fn, _),) = fusions(trace)
    device = torch.device("cuda", 0)
    plan = vectorize.plan(fusion_fn.projection,
                          tuple(vectorize.Layout(tuple(a.stride()), 16) for a in (x, cos, sin)),
                          (16,), schedule.TUNING.max_row_bytes, schedule.TUNING.min_threads)
    params = schedule.schedule(plan)
    assert params.keep_hints and codegen.render(plan, params) != codegen.render(plan, replace(params, keep_hints=False))
    in_planes = codegen.render(plan, replace(params, plane_order=True))
    assert (in_planes != codegen.render(plan, params)) == planes
    outputs = [torch.empty_like(x)]
    spec = fusion_fn._specialize_cuda(plan, params, device, (x, cos, sin), outputs)
    chosen = names[-1]
    variants = [(True, True, False), (False, True, False), (True, False, False), (True, True, True)]
    assert (built, timed) == (variants[:len(names)], [names])
    assert prefetched == [len(names) - 1]  # the variants compile side by side while the default builds
    assert (spec.params.keep_hints, spec.params.keep_once, spec.params.plane_order) == built[-1] and spec.runs == 1
    assert str(spec.choice) == str(tune.Choice.measured(chosen, rounds))
    assert spec.choice.microseconds == rounds.medians() and spec.choice.wins == (0,) + (tune.ROUNDS,) * (len(names) - 1)

    cache.clear_memory()
    built.clear()
    spec = fusion_fn._specialize_cuda(plan, params, device, (x, cos, sin), outputs)
    assert (built, len(timed)) == ([variants[len(names) - 1]], 1)  # only the chosen one built, nothing timed again
    assert prefetched == [len(names) - 1]
    assert str(spec.choice) == f"{chosen} (a decision kept on disk)"

    monkeypatch.setenv("THUNDER_PADVEC_TUNE", "0")
    built.clear()
    spec = fusion_fn._specialize_cuda(plan, params, device, (x, cos, sin), outputs)
    assert built == [(True, True, False)] and spec.choice is None and len(timed) == 1


def test_the_plan_whose_lanes_reload_is_timed_beside_the_default_where_it_changes_the_kernel(monkeypatch, emulated,
                                                                                           generator, tmp_path):
    """Where a kernel's steps go side by side with lanes that exchange their chunks (LitGPT's RoPE here), the
    first call also builds and times the plan whose lanes take one chunk of one row each and load the other
    half's chunk again (``all_reloads``), and keeps it where it is the fastest; it is not offered where no
    segment would change (the seed's RoPE), nor with ``TUNING.reload_variant`` off. The GPU parts (build,
    timing) stand in here."""
    from thunder_padvec import fusion, schedule, vectorize
    from thunder_padvec.examples import litgpt_rope
    from thunder_padvec.explain import fusions

    render = fusion.codegen.render
    built, timed = _fake_first_call(monkeypatch, tmp_path, lambda plan, params, source, one_row:
                                    (plan, one_row is not None))

    def specialize(fn, shapes, rope_n):
        x, cos, sin = (randn(*shape, dtype=torch.bfloat16, generator=generator) for shape in shapes)
        _, _, trace = jit_and_run(fn, x, cos, sin, rope_n)
        ((fusion_fn, _),) = fusions(trace)
        layouts = tuple(vectorize.Layout(tuple(a.stride()), 16) for a in (x, cos, sin))

        def planned(all_reloads=False):
            return vectorize.plan(fusion_fn.projection, layouts, (16,), schedule.TUNING.max_row_bytes, 0,
                                  all_reloads=all_reloads)
        plan = planned()
        built.clear()
        timed.clear()
        spec = fusion_fn._specialize_cuda(plan, schedule.schedule(plan), torch.device("cuda", 0), (x, cos, sin),
                                          [torch.empty_like(x)], lambda: plan, lambda: plan,
                                          lambda: planned(all_reloads=True))
        return plan, spec

    litgpt = (litgpt_rope, ((2, 8, 64, 128), (64, 128), (64, 128)), 128)
    plan, spec = specialize(*litgpt)
    assert timed[0][-1] == "keep, a chunk a lane" and "keep" in timed[0] and "plain" in timed[0]
    (reloaded, replanned) = built[-1]
    assert [seg.reloads for seg in reloaded.segments] == [True] and not replanned  # not planned again
    assert all(p is plan and again for p, again in built[:-1])
    assert spec.params.block == 128 and str(spec.choice).endswith(": keep, a chunk a lane")

    seed = (rope_one_entry, ((2, 4, 8, 32), (8, 8), (8, 8)), 8)
    specialize(*seed)
    assert timed and not any("a chunk a lane" in name for name in timed[0])
    monkeypatch.setattr(schedule.TUNING, "reload_variant", False)
    specialize(*litgpt)
    assert timed and not any("a chunk a lane" in name for name in timed[0])
    monkeypatch.setattr(schedule.TUNING, "reload_variant", True)  # a plan that fails: the others still timed
    monkeypatch.setenv("THUNDER_PADVEC_CACHE_DIR", str(tmp_path / "again"))  # (the decision above not read back)
    cache.clear_memory()

    def failing_render(plan, params):
        if any(seg.reloads for seg in plan.segments):
            raise ValueError("a render that fails")
        return render(plan, params)
    monkeypatch.setattr(fusion.codegen, "render", failing_render)
    _, spec = specialize(*litgpt)
    assert timed and not any("a chunk a lane" in name for name in timed[0]) and spec.params.block == 256


def test_rows_apart_along_the_tokens_are_timed_tokens_first_with_either_plan(monkeypatch, emulated, generator,
                                                                              tmp_path):
    """The grouped-query qkv form's forward reads qkv, whose rows lie apart along the tokens: the first call
    also times its rows taken a token of every head in turn (``LaunchParams.tokens_first``), in the default
    plan and in the plan whose lanes reload, and keeps the fastest; a variant the order does not change (the
    RoPE form's x, rows one after the other) is not built, nor any with ``TUNING.tokens_first_variant`` off.
    The GPU parts (build, timing) stand in here."""
    from thunder_padvec import schedule, vectorize
    from thunder_padvec.examples import litgpt_rope, qkv_split_rope
    from thunder_padvec.explain import fusions

    built, timed = _fake_first_call(monkeypatch, tmp_path, lambda plan, params, source, one_row: (params, source))

    def specialize(fn, args):
        _, _, trace = jit_and_run(fn, *args)
        ((fusion_fn, _),) = fusions(trace)
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        layouts = tuple(vectorize.Layout(tuple(a.stride()), 16) for a in tensors)
        outputs = [torch.empty(fusion_fn.kernel.node(o).type.shape, dtype=torch.bfloat16)
                   for o in fusion_fn.kernel.outputs]

        def planned(all_reloads=False):
            return vectorize.plan(fusion_fn.projection, layouts, (16,) * len(outputs), schedule.TUNING.max_row_bytes, 0,
                                  tuple(o.stride() for o in outputs), all_reloads=all_reloads)
        plan = planned()
        built.clear()
        timed.clear()
        return fusion_fn._specialize_cuda(plan, schedule.schedule(plan), torch.device("cuda", 0), tensors, outputs,
                                          lambda: plan, lambda: plan, lambda: planned(all_reloads=True))

    qkv = randn(1, 16, (8 + 2 * 2) * 128, dtype=torch.bfloat16, generator=generator)
    cos, sin = (randn(16, 128, dtype=torch.bfloat16, generator=generator) for _ in range(2))
    grouped = (qkv_split_rope, (qkv, cos, sin, 8, 2, 128, 128))
    spec = specialize(*grouped)
    names = timed[0]
    assert {"keep, tokens first", "keep, a chunk a lane", "keep, a chunk a lane, tokens first"} <= set(names), names
    assert names[-1] == "keep, a chunk a lane, tokens first" and str(spec.choice).endswith(": " + names[-1])
    assert spec.params.tokens_first and spec.params.block == 128
    for params, source in built:
        assert params.tokens_first == ("in_tile" in source)  # the order changes each source it is named in
    cache.clear_memory()
    monkeypatch.setattr(schedule.TUNING, "tokens_first_variant", False)
    monkeypatch.setenv("THUNDER_PADVEC_CACHE_DIR", str(tmp_path / "off"))
    specialize(*grouped)
    assert timed and not any("tokens first" in name for name in timed[0]) and "keep, a chunk a lane" in timed[0]
    monkeypatch.setattr(schedule.TUNING, "tokens_first_variant", True)
    x = randn(1, 8, 16, 128, dtype=torch.bfloat16, generator=generator)
    specialize(litgpt_rope, (x, cos, sin, 128))
    assert timed and not any("tokens first" in name for name in timed[0]), timed


class _FakeModule:
    def __init__(self, blocks, local=0):
        self.blocks, self.local = blocks, local

    def resources(self, block):
        return 80, self.local, self.blocks


@pytest.mark.parametrize("pairs, plain, kept", [
    ((2, 0), (3, 0), "plain"),  # the Llama-class backward: a block per SM more without word pairs
    ((3, 0), (3, 0), "plain"),  # a tie goes to the lighter build
    ((3, 0), (2, 0), "pairs"),
    ((2, 0), (3, 16), "pairs"),  # more blocks, but spilling
])
def test_word_pairs_give_way_where_they_cost_blocks_per_sm(emulated, generator, pairs, plain, kept):
    """A heavy kernel is built again without word pairs and keeps whichever build holds more blocks
    per SM without spilling more, the one without on a tie. A kernel with nothing in 16-bit pairs
    (float32) is not built again. The GPU parts (loading, occupancy) stand in here."""
    from dataclasses import replace

    from thunder_padvec import codegen, fusion
    from thunder_padvec.explain import fusions

    for dtype, pairs_in_source in ((torch.bfloat16, True), (torch.float32, False)):
        x = randn(2, 4, 8, 32, dtype=dtype, generator=generator)
        cos, sin = (randn(8, 8, dtype=dtype, generator=generator) for _ in range(2))
        _, _, trace = jit_and_run(rope_one_entry, x, cos, sin, 8)
        ((fn, _),) = fusions(trace)
        spec = fn.last
        assert spec.params.word_pairs
        source = codegen.device_source(codegen.render(spec.plan, spec.params))
        loads = []

        def load(plan, params, source):
            loads.append((params, source))
            return params, source, None, _FakeModule(*plain)

        build = (spec.params, source, None, _FakeModule(*pairs))
        chosen = fusion._without_word_pairs(spec.plan, build, load)
        if not pairs_in_source:
            assert chosen is build and not loads
            continue
        ((plain_params, plain_source),) = loads
        assert plain_params == replace(spec.params, word_pairs=False) and "<false>(&" in plain_source
        assert chosen[0].word_pairs == (kept == "pairs")
        assert (chosen is build) == (kept == "pairs")


def _four_rows_a_thread(generator, monkeypatch):
    """``(jitted, fusion, one_row)`` of LitGPT's RoPE at a small shape planned with 4 rows a thread, and
    its plan again with one row a thread."""
    from thunder_padvec import schedule, vectorize
    from thunder_padvec.examples import litgpt_rope
    from thunder_padvec.explain import fusions

    monkeypatch.setattr(schedule.TUNING, "min_threads", 0)
    # heads 16 KiB apart take two rows a thread at most (``vectorize.plan.rows_apart``): lifted here
    plan_module = importlib.import_module("thunder_padvec.vectorize.plan")
    monkeypatch.setattr(plan_module, "APART_ROWS", plan_module.MAX_ROWS_PER_THREAD)
    x = randn(2, 8, 64, 128, dtype=torch.bfloat16, generator=generator)
    cos, sin = (randn(64, 128, dtype=torch.bfloat16, generator=generator) for _ in range(2))
    jitted, _, trace = jit_and_run(litgpt_rope, x, cos, sin, 128)
    ((fn, _),) = fusions(trace)
    plan = fn.last.plan
    assert [seg.rows_per_thread for seg in plan.segments] == [4], plan

    def one_row():
        return vectorize.plan(fn.projection, plan.layouts, plan.output_alignments, schedule.TUNING.max_row_bytes, 0,
                              plan.output_strides, True, 1)
    return jitted, fn, one_row


@pytest.mark.parametrize("blocks, one_row_blocks, local, one_row_local, kept", [
    (2, 6, 0, 0, "one"),  # the qkv backward of Llama-2-7b and Phi-3-mini on the H200
    (2, 3, 0, 0, "rows"),  # the grouped-query ones: their k piece keeps its registers with one row
    (3, 6, 0, 0, "one"),
    (2, 6, 0, 16, "rows"),  # more blocks, but spilling
])
def test_threads_take_one_row_where_that_fits_twice_the_blocks_per_sm(emulated, generator, monkeypatch, blocks,
                                                                      one_row_blocks, local, one_row_local, kept):
    """A kernel whose threads take several rows (sharing cos and sin) is planned again with one row a
    thread and keeps whichever build holds at least twice the blocks per SM without spilling more, the
    rows on a tie or less. The one-row launch keeps the build's hints. A plan of one row a thread is not
    built again. The GPU parts (loading, occupancy) stand in here."""
    from dataclasses import replace

    from thunder_padvec import codegen, fusion, schedule

    _, fn, one_row = _four_rows_a_thread(generator, monkeypatch)
    spec = fn.last
    loads = []

    def load(plan, params, source):
        loads.append((plan, params, source))
        return params, source, None, _FakeModule(one_row_blocks, one_row_local)

    # the variant's hints, carried over; not what the 4-row build's fit made of them: its __launch_bounds__
    # (fitted to its registers), its word pairs dropped (weighed again for the one-row build)
    variant = replace(spec.params, keep_hints=False, word_pairs=True)
    params = replace(variant, word_pairs=False, min_blocks=3)
    build = (params, codegen.device_source(codegen.render(spec.plan, params)), None, _FakeModule(blocks, local))
    plan, chosen, note = fusion._with_one_row(spec.plan, build, one_row, load, variant)
    ((single, single_params, single_source),) = loads
    assert [s.rows_per_thread for s in single.segments] == [1]
    fresh = schedule.schedule(single)
    assert single_params == replace(fresh, keep_hints=False, word_pairs=True), single_params
    assert single_params.min_blocks == 0
    assert single_params.segments[0].groups == 4 * params.segments[0].groups  # a thread a row, 4 rows a thread
    assert single_source == codegen.device_source(codegen.render(single, single_params))
    if kept == "one":
        assert plan is single and chosen[0] is single_params and chosen[3].blocks == one_row_blocks
        assert note == f"one row a thread: 80 registers, {one_row_blocks} blocks per SM; with 4 rows a thread, " \
                       f"80 registers, {blocks} blocks per SM"
    else:
        assert plan is spec.plan and chosen is build and note == ""
    loads.clear()
    assert fusion._with_one_row(single, chosen, one_row, load, variant) == (single, chosen, "") and not loads


class _FakeBuild:
    def __init__(self, registers, blocks):
        self.registers, self.blocks = registers, blocks

    def resources(self, block):
        return self.registers, 0, self.blocks


@pytest.mark.parametrize("one_row_blocks", [6, 3])
def test_a_kernel_planned_again_with_one_row_a_thread_says_what_was_weighed(emulated, generator, monkeypatch,
                                                                            one_row_blocks):
    """Where a build keeps the plan of one row a thread, its specialization, ``explain`` (text and
    markdown) and ``bench.measure.kernels`` say so, with the registers and blocks per SM of both builds;
    where it keeps its rows, none of them says anything. The GPU parts (loading, occupancy) stand in here."""
    from thunder_padvec import codegen, fusion
    from thunder_padvec.bench.measure import kernels
    from thunder_padvec.explain import explain

    jitted, fn, one_row = _four_rows_a_thread(generator, monkeypatch)
    spec = fn.last

    def fitted_build(self, plan, params, source, device):
        rows = max(seg.rows_per_thread for seg in plan.segments)
        return params, source, None, _FakeBuild(98, 2) if rows > 1 else _FakeBuild(40, one_row_blocks)

    monkeypatch.setattr(fusion.PadvecFusion, "_fitted_build", fitted_build)
    monkeypatch.setattr(fusion, "_few_blocks", lambda build, device: build[3].blocks < 4)
    source = codegen.device_source(codegen.render(spec.plan, spec.params))
    built = fn._build_cuda(spec.plan, spec.params, source, torch.device("cuda", 0), 3, one_row=one_row)
    note = "one row a thread: 40 registers, 6 blocks per SM; with 4 rows a thread, 98 registers, 2 blocks per SM"
    if one_row_blocks == 6:
        assert [seg.rows_per_thread for seg in built.plan.segments] == [1] and built.replanned == note
    else:
        assert built.plan is spec.plan and built.replanned == ""
    fn.last = built
    (report,) = explain(jitted)
    (line,) = kernels(jitted)
    shown = [str(report), report._repr_markdown_(), line]
    for text in shown:
        assert (f"planned again: {note}" in text) if one_row_blocks == 6 else ("planned again" not in text), text


class _SilentDriver:
    def resources(self, block):
        raise RuntimeError("the driver would not say")


def test_the_report_shows_the_drivers_figures_only_for_a_kernel_loaded_on_a_gpu(emulated, generator, monkeypatch):
    """In emulation the report has no resources and prints none; for a kernel loaded on a GPU it has the
    driver's registers, local memory and blocks per SM, and the waves of its grid over the SMs, printed and
    in the notebook's view; a driver that fails to say leaves them out, and the report is still made."""
    import dataclasses
    import types

    from thunder_padvec.bench.measure import kernels
    from thunder_padvec.explain import Resources, explain

    jitted, fn, _ = _four_rows_a_thread(generator, monkeypatch)
    (report,) = explain(jitted)
    assert report.resources is None and "resources:" not in str(report) + report._repr_markdown_()
    assert "registers" not in kernels(jitted)[0]
    emulated_spec = fn.last
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: types.SimpleNamespace(
        multi_processor_count=5))
    fn.last = dataclasses.replace(emulated_spec, device=torch.device("cuda", 0), module=_FakeBuild(98, 2))
    (report,) = explain(jitted)
    grid = report.launch.grid
    assert report.resources == Resources(98, 0, 2, grid / 10), report.resources
    line = f"resources: 98 registers a thread, 2 blocks per SM, {grid / 10:.2f} waves"
    assert line in str(report) and line in report._repr_markdown_(), str(report)
    (kernel_line,) = kernels(jitted)
    assert f" | 98 registers a thread, 2 blocks per SM, {grid / 10:.2f} waves | " in kernel_line, kernel_line
    assert str(Resources(255, 16, 1, 0.5)) == (
        "255 registers a thread, 16 bytes of local memory a thread, 1 block per SM, 0.50 waves")
    fn.last = dataclasses.replace(emulated_spec, device=torch.device("cuda", 0), module=_SilentDriver())
    (report,) = explain(jitted)
    assert report.resources is None and report.launch is not None
    fn.last = emulated_spec


def _teams_of_four(generator):
    """``(fusion, wider)`` of pythia's RoPE (rows of 64 in 4-lane chunks, teams of 4 threads) over 1536
    rows (24 blocks of 256), and its plan again with teams twice as wide."""
    from thunder_padvec import schedule, vectorize
    from thunder_padvec.examples import litgpt_rope
    from thunder_padvec.explain import fusions

    x = randn(2, 12, 64, 64, dtype=torch.bfloat16, generator=generator)
    cos, sin = (randn(64, 16, dtype=torch.bfloat16, generator=generator) for _ in range(2))
    _, out, trace = jit_and_run(litgpt_rope, x, cos, sin, 16)
    assert torch.equal(out, litgpt_rope(x, cos, sin, 16))
    ((fn, _),) = fusions(trace)
    plan = fn.last.plan
    assert [(s.threads_per_row, s.rows_per_thread) for s in plan.segments] == [(4, 1)] and fn.last.params.grid == 24

    def wider():
        tuning = schedule.TUNING
        return vectorize.plan(fn.projection, plan.layouts, plan.output_alignments, tuning.max_row_bytes,
                              tuning.min_threads, plan.output_strides, True, 1, 2)
    return fn, wider


@pytest.mark.parametrize("sms, blocks, wide_blocks, wide_local, kept", [
    (20, 1, 1, 0, True),  # 24 blocks on 20 SMs: 1.2 waves (0.6 full); 48 blocks: 2.4 (0.8 full)
    (10, 2, 2, 0, True),  # the same at 2 blocks per SM
    (20, 1, 2, 0, False),  # 48 blocks at 2 per SM: 1.2 waves again
    (20, 1, 1, 16, False),  # fuller waves, but spilling
    (24, 1, 1, 0, False),  # one whole wave
    (30, 1, 1, 0, False),  # less than one wave: every block runs at once
    (14, 1, 1, 0, False),  # 1.71 waves: 0.86 full already
    (20, 0, 1, 0, False),  # no occupancy figure
    (20, 1, 0, 0, False),  # ... of the wider build
])
def test_a_launch_whose_last_wave_is_mostly_idle_takes_teams_twice_as_wide(emulated, generator, sms, blocks,
                                                                           wide_blocks, wide_local, kept):
    """A launch of more than one wave whose waves are less than ``FULL_WAVES`` full on average is planned
    again with twice the threads a row, and keeps that build where its waves are at least ``WAVE_GAIN``
    fuller without spilling more; the launch keeps the variant's hints. The GPU parts (loading,
    occupancy, the SM count) stand in here."""
    from dataclasses import replace

    from thunder_padvec import codegen, fusion, schedule

    fn, wider = _teams_of_four(generator)
    spec = fn.last
    loads = []

    def load(plan, params, source):
        loads.append((plan, params, source))
        return params, source, None, _FakeModule(wide_blocks, wide_local)

    variant = replace(spec.params, keep_hints=False)
    build = (variant, spec.source, None, _FakeModule(blocks))
    plan, chosen, note = fusion._with_wider_teams(spec.plan, build, wider, load, variant, sms)
    before = 24 / (blocks * sms) if blocks else 0
    if before <= 1 or before / -(-before // 1) >= fusion.FULL_WAVES:
        assert not loads and (plan, chosen, note) == (spec.plan, build, "")
        return
    ((wide, wide_params, wide_source),) = loads
    assert [(s.threads_per_row, s.rows_per_thread) for s in wide.segments] == [(8, 1)]
    assert wide_params == replace(schedule.schedule(wide), keep_hints=False) and wide_params.grid == 48
    assert wide_source == codegen.device_source(codegen.render(wide, wide_params))
    if kept:
        after = 48 / (wide_blocks * sms)
        assert plan is wide and chosen[0] is wide_params
        assert note == (f"twice the threads a row: 48 blocks, {wide_blocks} per SM, {after:.2f} waves; as planned, "
                        f"24 blocks, {blocks} per SM, {before:.2f} waves")
    else:
        assert (plan, chosen, note) == (spec.plan, build, "")


def test_a_kernel_planned_again_with_wider_teams_says_so(emulated, generator, monkeypatch):
    """``_build_cuda`` plans again with wider teams where the waves ask for it (unless ``TUNING.wave_fit``
    is off) and its specialization says what was weighed. The GPU parts stand in here."""
    from thunder_padvec import fusion, schedule

    fn, wider = _teams_of_four(generator)
    spec = fn.last
    monkeypatch.setattr(fusion.PadvecFusion, "_fitted_build",
                        lambda self, plan, params, source, device: (params, source, None, _FakeModule(1)))
    monkeypatch.setattr(fusion, "_few_blocks", lambda build, device: False)
    monkeypatch.setattr(fusion, "_sms", lambda device: 20)
    for fit in (True, False):
        monkeypatch.setattr(schedule.TUNING, "wave_fit", fit)
        built = fn._build_cuda(spec.plan, spec.params, spec.source, torch.device("cuda", 0), 2, wider=wider)
        assert [s.threads_per_row for s in built.plan.segments] == [8 if fit else 4]
        assert built.replanned == ("twice the threads a row: 48 blocks, 1 per SM, 2.40 waves; as planned, 24 blocks, "
                                   "1 per SM, 1.20 waves" if fit else "")


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("shape, order", [((2, 3, 4, 5), None), ((2, 3, 4, 5), (0, 2, 1, 3)), ((3, 1, 4), (1, 0, 2)),
                                          ((2, 0, 4, 5), (0, 2, 1, 3)), ((4, 2, 3, 6), (2, 0, 1, 3))])
def test_outputs_are_allocated_in_the_order_their_consumer_reads_them(shape, order, device):
    """A fusion's outputs come from one ``empty_strided`` each (on a GPU, PyTorch's C++ one): the same
    shape and strides as the row-major tensor of the permuted shape permuted back, so ``out.permute(order)``
    is contiguous, on the device asked for."""
    from thunder_padvec import ir
    from thunder_padvec.fusion import PadvecFusion

    t = ir.TensorType(shape, ir.DType.float32)
    kernel = ir.Kernel((ir.Input("x", t, 0),), (ir.Elementwise("y", t, "neg", ("x",)),), ("y",))
    fusion = PadvecFusion(kernel, "padvec_test")
    fusion.set_output_orders((order,))
    device = torch.device(device, 0 if device == "cuda" else None)
    (out,) = fusion._allocate(device)
    assert out.device == device
    if order is None:
        want = torch.empty(shape)
    else:
        want = torch.empty([shape[d] for d in order]).permute([order.index(d) for d in range(len(order))])
    assert (tuple(out.shape), out.stride(), out.dtype) == (tuple(want.shape), want.stride(), torch.float32)
    assert out.permute(order or tuple(range(len(shape)))).is_contiguous()
    assert out.untyped_storage().nbytes() == want.untyped_storage().nbytes()


def test_the_fast_allocation_is_taken_only_on_the_current_cuda_device(monkeypatch):
    """PyTorch's C++ ``empty_strided`` allocates on the current CUDA device: taken only where the
    outputs' device is that one; elsewhere ``torch.empty_strided`` with the device named."""
    from thunder_padvec import fusion, ir

    t = ir.TensorType((2, 3), ir.DType.float32)
    kernel = ir.Kernel((ir.Input("x", t, 0),), (ir.Elementwise("y", t, "neg", ("x",)),), ("y",))
    padvec = fusion.PadvecFusion(kernel, "padvec_test")
    calls, empty_strided = [], torch.empty_strided

    def fast(shape, strides, dtype):
        calls.append("fast")
        return empty_strided(shape, strides, dtype=dtype)

    def named(shape, strides, dtype, device):
        calls.append(("named", device))
        return torch.empty(0)

    monkeypatch.setattr(fusion.torch, "empty_strided", named, raising=True)
    for current, device, want in ((0, torch.device("cuda", 0), "fast"), (1, torch.device("cuda", 0), "named"),
                                  (0, torch.device("cpu"), "named")):
        monkeypatch.setattr(fusion, "_FAST_EMPTY", (fast, lambda: current))
        calls.clear()
        padvec._allocate(device)
        assert calls == (["fast"] if want == "fast" else [("named", device)])


def _counting_target(compile_fn):
    calls = []

    def compile(source, path):
        calls.append(threading.current_thread().name)
        return compile_fn(source)

    return cache.Target("cubin", f"counting {len(calls)} {id(calls)}", compile, ".cu"), calls


def test_threads_asking_for_one_source_at_once_compile_it_once(tmp_path, monkeypatch):
    """The first thread compiles; the others wait for its binary instead of compiling it again."""
    monkeypatch.setenv("THUNDER_PADVEC_CACHE_DIR", str(tmp_path))
    release = threading.Event()
    target, calls = _counting_target(lambda source: release.wait(30) and source.encode()[::-1])
    results = []
    threads = [threading.Thread(target=lambda: results.append(cache.binary("one source", target)[0]))
               for _ in range(4)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 30
    while not calls and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)  # the other threads reach the pending compile and wait on it
    release.set()
    for thread in threads:
        thread.join(30)
    assert len(calls) == 1 and results == [b"ecruos eno"] * 4 and not cache._pending


def _compile_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "padvec-compile"]


def test_a_failed_compile_raises_in_every_thread_that_asked_and_is_tried_again_later(tmp_path, monkeypatch):
    """The error reaches each caller that asks for the binary, as the typed error; the thread that built
    ahead raises nothing of its own (no unhandled exception) and ends."""
    monkeypatch.setenv("THUNDER_PADVEC_CACHE_DIR", str(tmp_path))
    unhandled = []
    monkeypatch.setattr(threading, "excepthook", lambda args: unhandled.append(args.exc_type))

    def fail(source):
        raise CompileError("test", "no", source, None)

    target, calls = _counting_target(fail)
    cache.prefetch(["bad source"], target)
    with pytest.raises(CompileError):
        cache.binary("bad source", target)
    assert not cache._pending and len(calls) in (1, 2)  # the prefetch's failure, or the call's own
    with pytest.raises(CompileError):
        cache.binary("bad source", target)
    assert len(calls) in (2, 3)  # never remembered: compiled again
    for thread in _compile_threads():
        thread.join(30)
    assert not _compile_threads() and not unhandled


def test_prefetched_variants_compile_side_by_side_with_nvrtc_and_once_each(tmp_path, monkeypatch, emulated,
                                                                            generator):
    """A first call's launch variants (here the evict_last hints on and off) compile in worker threads
    while the default builds; each source is compiled once, and the binaries are CUBIN."""
    from dataclasses import replace

    from thunder_padvec import codegen
    from thunder_padvec.explain import fusions
    from thunder_padvec.runtime import nvrtc

    monkeypatch.setenv("THUNDER_PADVEC_CACHE_DIR", str(tmp_path))
    _, _, trace = jit_and_run(rope_one_entry, *_rope_args(generator))
    ((fn, _),) = fusions(trace)
    spec = fn.last
    sources = [codegen.device_source(codegen.render(spec.plan, replace(spec.params, keep_hints=keep)))
               for keep in (True, False)]
    assert sources[0] != sources[1]
    target, calls = _counting_target(lambda source: nvrtc.compile_cubin(source, "sm_90"))
    cache.prefetch(sources[1:], target)
    binaries = [cache.binary(source, target)[0] for source in sources]
    cache.binary(sources[1], target)
    assert len(calls) == 2 and all(b[:4] == b"\x7fELF" for b in binaries) and not cache._pending
    for thread in _compile_threads():  # they end with their builds: nothing is left running for a fork
        thread.join(30)
    assert not _compile_threads()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_child_forked_while_a_compile_is_under_way_compiles_for_itself(monkeypatch):
    """A compile under way in a worker thread at a fork is not pending in the child (that thread does not
    exist there): the child compiles the source itself instead of waiting for ever."""
    import signal

    monkeypatch.setenv("THUNDER_PADVEC_CACHE_DIR", "off")
    release = threading.Event()
    target, calls = _counting_target(lambda source: release.wait(30) and b"compiled")
    cache.prefetch(["forked source"], target)
    deadline = time.monotonic() + 30
    while not calls and time.monotonic() < deadline:
        time.sleep(0.01)
    assert cache._pending
    pid = os.fork()
    if pid == 0:  # the child: a waiter for the parent's compile would hang; the alarm ends it as a failure
        signal.alarm(20)
        release.set()
        ok = cache.binary("forked source", target)[0] == b"compiled" and len(calls) == 2 and not cache._pending
        os._exit(0 if ok else 1)
    release.set()
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert cache.binary("forked source", target)[0] == b"compiled"


def test_a_first_calls_variants_compile_with_nvrtc_while_the_default_builds(tmp_path, monkeypatch, emulated,
                                                                            generator):
    """``_specialize_cuda`` as on a GPU, with NVRTC compiling for sm_90 and the GPU parts (loading the
    module, timing) standing in: the default's compile waits until a variant's has started in a thread
    of its own (so the two run side by side), every variant is built from a binary compiled once, and the
    variant the timing picks is the one returned."""
    from thunder_padvec import fusion, schedule
    from thunder_padvec.explain import fusions
    from thunder_padvec.runtime import launch, nvrtc, tune

    monkeypatch.setenv("THUNDER_PADVEC_CACHE_DIR", str(tmp_path))
    for knob in ("fit_registers", "one_row_fit", "wave_fit"):
        monkeypatch.setattr(schedule.TUNING, knob, False)
    monkeypatch.setattr(fusion, "_few_blocks", lambda build, device: False)
    monkeypatch.setattr(tune, "may_time", lambda device: True)
    monkeypatch.setattr(tune, "decision_key", lambda sources, device: cache.digest("tune", "fake GPU", *sources))
    _, _, trace = jit_and_run(rope_one_entry, *_rope_args(generator))
    ((fn, _),) = fusions(trace)
    spec = fn.last
    variant_started, compiled = threading.Event(), []

    def compile(source, path):
        compiled.append((threading.current_thread().name, source))
        if threading.current_thread() is threading.main_thread():
            assert variant_started.wait(30), "no variant compiled beside the default"
        else:
            variant_started.set()
        return nvrtc.compile_cubin(source, "sm_90", path)

    monkeypatch.setattr(fusion, "_cuda_target", lambda device: cache.Target("cubin", "sm_90 side by side", compile,
                                                                            ".cu"))
    loaded = []

    class Module:
        def __init__(self, cubin, device):
            assert cubin[:4] == b"\x7fELF"
            loaded.append(cubin)

    monkeypatch.setattr(launch, "CudaModule", Module)

    def measure(runs, device):
        names = [name for name, _ in runs]
        return tune.Rounds(tuple((name, (10.0 - k,) * tune.ROUNDS) for k, name in enumerate(names)))

    monkeypatch.setattr(tune, "measure", measure)
    args = _rope_args(generator)[:3]
    chosen = fusion.PadvecFusion._specialize_cuda(fn, spec.plan, spec.params, torch.device("cuda", 0), args,
                                                  [torch.empty_like(args[0])])
    sources = [source for _, source in compiled]
    assert len(sources) == len(set(sources)) == len(loaded) >= 2  # each variant compiled once, each loaded
    assert any(name.startswith("padvec-compile") for name, _ in compiled)
    assert chosen.choice.chosen == chosen.choice.microseconds[-1][0] != "keep"  # the last: the fastest here
    assert chosen.source in sources and chosen.params != spec.params
