"""The benchmark suite's cases and executors, checked on the CPU at tiny shapes (timing needs a GPU)."""

import pytest
import torch

from thunder_padvec import configs
from thunder_padvec.bench.block import BlockCase, BuiltBlock, checked, fusion_counts
from thunder_padvec.bench.cases import Case, Unavailable, build, cases, executor, forms, with_backward
from thunder_padvec.bench.measure import check

TINY = [configs.RopeConfig("tiny-gqa", 1, 4, 2, 32, 32, 8), configs.RopeConfig("tiny-seed", 2, 2, 2, 32, 8, 8)]


def test_every_configuration_has_both_passes():
    found = {(c.config.id, c.form, c.dtype, c.pass_) for c in cases()}
    for cfg in configs.ALL:
        for form in forms(cfg):
            assert {(cfg.id, form, "bfloat16", p) for p in ("fwd", "fwd+bwd")} <= found
    assert forms(configs.INTERLEAVED[0]) == ["gptj_rope"] and forms(configs.LITGPT[0]) == ["rope", "qkv_split_rope"]


@pytest.mark.parametrize("cfg", TINY, ids=lambda c: c.name)
@pytest.mark.parametrize("form", ["rope", "qkv_split_rope", "gptj_rope"])
@pytest.mark.parametrize("pass_", ["fwd", "fwd+bwd"])
@pytest.mark.parametrize("name", ["eager", "thunder", "padvec"])
def test_executors_agree_with_eager(emulated, cfg, form, pass_, name):
    if form == "qkv_split_rope" and cfg.name == "tiny-seed":
        pytest.skip("the seed has no qkv form")
    case = Case(cfg, form, "bfloat16", pass_)
    fn, args, expected, io_bytes, cotangents = build(case, torch.Generator().manual_seed(0), device="cpu")
    run = jitted = executor(name, case, fn)
    if cotangents is not None:
        run = with_backward(run, cotangents)
        assert expected[0].shape == args[0].shape  # the gradient of x
    check(name, run(*args), expected)
    assert io_bytes > sum(a.nbytes for a in args)
    if name == "padvec":  # what the results file records of padvec's kernels
        from thunder_padvec.bench.measure import kernels

        lines = kernels(jitted)
        assert [line.split(" | ")[0] for line in lines] == (
            ["padvec0 (forward)"] + (["padvec1 (backward)"] if cotangents is not None else [])), lines
        assert all(" | grid " in line and ("thread" in line or "lanes" in line) for line in lines), lines


@pytest.mark.parametrize("name, raised", [("eager", "Unavailable"), ("padvec", "AssertionError")])
def test_a_peer_that_disagrees_is_reported_and_padvec_fails_the_suite(emulated, name, raised):
    """The suite's own executor must agree with eager; a peer that does not is skipped with the reason."""
    from thunder_padvec.bench.measure import Built, Unavailable, measure

    case = Case(TINY[0], "rope", "bfloat16", "fwd")
    built = Built.__new__(Built)  # no copy timing: that needs a GPU
    built.case = case
    built.fn, built.args, expected, built.io_bytes, built.cotangents = build(case, torch.Generator().manual_seed(0),
                                                                             device="cpu")
    built.expected = tuple(e + 1 for e in expected)  # a reference nobody matches
    with pytest.raises((Unavailable, AssertionError)) as info:
        measure(built, name)
    assert type(info.value).__name__ == raised
    if raised == "Unavailable":
        assert "not close" in str(info.value)


def test_each_executor_is_measured_after_the_memory_cached_before_it_is_released(emulated, monkeypatch):
    """Blocks that an earlier executor left in PyTorch's caching allocator slowed the executors timed
    after it on the H200 (up to 10%): ``measure`` hands them back before it runs its executor."""
    from thunder_padvec.bench import measure as measure_module

    events = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: events.append("released"))
    monkeypatch.setattr(measure_module, "executor",
                        lambda name, case, fn: events.append(name) or (lambda *a: fn(*a) + 1))
    case = Case(TINY[0], "rope", "bfloat16", "fwd")
    built = measure_module.Built.__new__(measure_module.Built)  # no copy timing: that needs a GPU
    built.case = case
    built.fn, built.args, built.expected, built.io_bytes, built.cotangents = build(
        case, torch.Generator().manual_seed(0), device="cpu")
    with pytest.raises(measure_module.Unavailable):  # its outputs are off by one: stops before any timing
        measure_module.measure(built, "eager")
    assert events == ["released", "eager"]


@pytest.mark.parametrize("layout", ["row-major", "outputs"])
def test_a_backward_reads_its_cotangents_as_the_suite_lays_them_out(emulated, monkeypatch, layout):
    """``PADVEC_COTANGENTS=outputs``: each executor's backward gets the suite's cotangents (the same values)
    laid out as its own forward's outputs are, as an attention's backward hands them over in training; the
    record says so. In the grouped-query qkv form padvec's q, k and v have heads inner to tokens (rows of
    whole lines), eager's are row-major, as the drawn cotangents are."""
    from thunder_padvec.bench import measure as measure_module
    from thunder_padvec.bench.cases import in_output_layouts

    case = Case(configs.RopeConfig("gqa64", 1, 4, 2, 64, 64, 8), "qkv_split_rope", "bfloat16", "fwd+bwd")
    built = measure_module.Built.__new__(measure_module.Built)  # no copy timing: that needs a GPU
    built.case, built.copy_ms, built.pass_copy_ms = case, 1.0, None
    built.fn, built.args, built.expected, built.io_bytes, built.cotangents = build(
        case, torch.Generator().manual_seed(0), device="cpu")
    drawn = [c.stride() for c in built.cotangents]
    for name in ("eager", "padvec"):
        fn = executor(name, case, built.fn)
        laid = in_output_layouts(fn, built.args, built.cotangents)
        outs = fn(*built.args)
        assert [c.stride() for c in laid] == [o.stride() for o in outs]
        assert ([c.stride() for c in laid] == drawn) == (name == "eager")
        assert all(torch.equal(c, d) for c, d in zip(laid, built.cotangents))
    seen = []
    monkeypatch.setattr(measure_module, "COTANGENTS", layout)
    monkeypatch.setattr(measure_module, "with_backward",
                        lambda fn, cotangents: seen.append(cotangents) or with_backward(fn, cotangents))
    monkeypatch.setattr(measure_module, "peak_bytes", lambda fn, args: 0)
    monkeypatch.setattr(measure_module, "graph_median_ms", lambda run: 1.0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda: "GPU X")
    record, _ = measure_module.measure(built, "padvec")  # its gradient checked against eager's on the way
    assert ([c.stride() for c in seen[0]] == drawn) == (layout == "row-major")
    assert record.get("cotangents") == (None if layout == "row-major" else "outputs")


def test_a_forward_and_backward_counts_each_pass_once():
    """fwd+bwd's minimal IO is the forward's plus the backward's (cotangents, cos, sin read; x's gradient
    written): the split behind the per-pass copies."""
    from thunder_padvec.bench.cases import backward_bytes

    fwd, both = (Case(TINY[0], "rope", "bfloat16", p) for p in ("fwd", "fwd+bwd"))
    _, _, _, fwd_io, _ = build(fwd, torch.Generator().manual_seed(0), device="cpu")
    _, args, _, io, cotangents = build(both, torch.Generator().manual_seed(0), device="cpu")
    x, cos, sin = args
    assert backward_bytes(args, cotangents) == 2 * x.nbytes + cos.nbytes + sin.nbytes
    assert io == fwd_io + backward_bytes(args, cotangents)


def _record(executor, ms, pass_="fwd+bwd", **extra):
    return {"config": "c", "form": "rope", "pass_": pass_, "dtype": "bfloat16", "executor": executor,
            "median_ms": ms, "io_bytes": 1000, "gbps": 1.0, "roofline_fraction": 0.8 / ms, "peak_memory_bytes": 0,
            **extra}


@pytest.mark.parametrize("passes", [True, False])
def test_the_table_shows_padvec_against_the_per_pass_copies_where_they_were_timed(passes):
    from thunder_padvec.bench.report import markdown, records

    extra = (lambda f: {"pass_copy_ms": 0.9, "pass_roofline_fraction": f}) if passes else (lambda f: {})
    run = {"benchmarks": [{"extra_info": r} for r in (
        _record("copy", 0.8, **extra(0.9 / 0.8)), _record("padvec", 1.0, **extra(0.9)),
        _record("torch.compile", 1.1), _record("copy", 0.4, pass_="fwd"), _record("padvec", 0.5, pass_="fwd"))]}
    rows = records(run)
    assert [r["pass_copy_ms"] for r in rows[:2]] == ([0.9, 0.9] if passes else [None, None])
    table = markdown(rows, "t")
    assert ("per-pass copies µs (padvec %)" in table) == passes
    lines = [line for line in table.splitlines() if line.startswith("| c |")]
    assert lines[0].endswith("| 1.10x | 900.0 (90.0%) |" if passes else "| 1.10x |")
    assert lines[1].endswith("| - | - |" if passes else "| - |")


def test_the_table_counts_padvecs_rows_against_the_targets_and_names_those_behind():
    """Below the table: rows ahead of torch.compile (of those where both ran), at least 95% of the copy, and
    fwd+bwd rows at least 95% of the per-pass copies; the rows behind torch.compile by name."""
    from thunder_padvec.bench.report import markdown, records, targets

    def case(config, pass_, padvec_ms, compile_ms, split=None):
        extra = {"pass_roofline_fraction": split} if split else {}
        found = [{**_record("copy", 0.8, pass_=pass_), "config": config},
                 {**_record("padvec", padvec_ms, pass_=pass_, **extra), "config": config}]
        return found + ([{**_record("torch.compile", compile_ms, pass_=pass_), "config": config}] if compile_ms else [])

    run = {"benchmarks": [{"extra_info": r} for r in (
        *case("a", "fwd", 0.82, 0.9), *case("b", "fwd", 1.0, 0.95), *case("c", "fwd+bwd", 0.9, 1.2, split=0.97),
        *case("d", "fwd+bwd", 0.84, 1.0, split=0.9), *case("e", "fwd", 0.8, None))]}
    rows = records(run)
    summary = targets(rows)
    assert summary.startswith("padvec against the targets: ahead of torch.compile on 3 of 4 rows; at least 95% of "
                              "the copy on 3 of 5; fwd+bwd at least 95% of the per-pass copies on 1 of 2."), summary
    assert summary.endswith(" Behind torch.compile: b rope fwd bfloat16 (0.950x)."), summary
    assert markdown(rows, "t").endswith(f"|\n\n{summary}\n")
    assert targets([r for r in rows if r["executor"] != "padvec"]) == ""


def test_rows_with_cotangents_laid_out_as_outputs_are_cases_of_their_own():
    """A fwd+bwd row timed with cotangents as the outputs are laid out (``PADVEC_COTANGENTS=outputs``) keeps
    ``pass`` "fwd+bwd" and says so in ``cotangents``; the table shows it apart from the row-major row."""
    from thunder_padvec.bench.report import markdown, merged, records

    plain = [_record(e, ms) for e, ms in (("copy", 0.8), ("padvec", 1.0))]
    laid = [{**_record(e, ms), "cotangents": "outputs"} for e, ms in (("copy", 0.8), ("padvec", 0.9))]
    run, replaced = merged([{"benchmarks": [{"extra_info": r} for r in plain]},
                            {"benchmarks": [{"extra_info": r} for r in laid]}])
    assert replaced == {}
    rows = records(run)
    assert [(r["pass"], r.get("cotangents")) for r in rows] == [("fwd+bwd", None)] * 2 + [("fwd+bwd", "outputs")] * 2
    lines = [line for line in markdown(rows, "t").splitlines() if line.startswith("| c |")]
    assert [line.split(" | ")[2] for line in lines] == ["fwd+bwd", "fwd+bwd, cotangents as outputs"]


def test_two_results_files_compare_case_by_case(tmp_path, capsys):
    """``--compare``: the cases both files measured, padvec's times and ratio and torch.compile's ratio, and
    each file's count against the targets; a case only one file has is left out. A run compares as its
    records; a file that is neither, or can't be read, stops with the parser's error (and so it does
    where a table is asked for)."""
    import json

    from thunder_padvec.bench.report import main, records

    def results(configs, padvec_ms, compile_ms):
        return records({"benchmarks": [{"extra_info": {**_record(e, ms, pass_="fwd"), "config": c}}
                                       for c in configs for e, ms in (("copy", 0.8), ("padvec", padvec_ms),
                                                                     ("torch.compile", compile_ms))]})

    paths = [tmp_path / "early.json", tmp_path / "late.json"]
    paths[0].write_text(json.dumps(results(["a", "b"], 1.0, 1.1)))
    paths[1].write_text(json.dumps(results(["a", "c"], 0.9, 0.88)))
    main(["--compare", *map(str, paths)])
    text = capsys.readouterr().out
    assert text.startswith("### A: early; B: late\n")
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| config")]
    assert rows == ["| a | rope | fwd | bfloat16 | 1000.0 µs (80.0%) | 900.0 µs (88.9%) | 0.900 | 0.800 "
                    "| 1.10x -> 0.98x |"]
    assert "A: padvec against the targets: ahead of torch.compile on 2 of 2 rows" in text
    assert "B: padvec against the targets: ahead of torch.compile on 0 of 2 rows" in text
    with pytest.raises(SystemExit):
        main(["--compare", str(paths[0])])
    # a run (pytest-benchmark's JSON) compares as its records do; any other JSON is refused
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"benchmarks": [{"extra_info": {**_record(e, ms, pass_="fwd"), "config": "a"}}
                                              for e, ms in (("copy", 0.8), ("padvec", 0.7))]}))
    main(["--compare", str(paths[0]), str(run)])
    shown = capsys.readouterr().out
    assert "| a | rope | fwd | bfloat16 | 1000.0 µs (80.0%) | 700.0 µs (114.3%) | 0.700 | - |" in shown
    # two files of the same name (one part's runs on two days) are named by their folders
    (tmp_path / "day2").mkdir()
    (tmp_path / "day2" / "early.json").write_text(paths[1].read_text())
    main(["--compare", str(paths[0]), str(tmp_path / "day2" / "early.json")])
    assert capsys.readouterr().out.startswith(f"### A: {tmp_path.name}/early; B: day2/early\n")
    for bad in (json.dumps({"rows": []}), "{not json", None):
        if bad is None:
            paths[1].unlink()
        else:
            paths[1].write_text(bad)
        with pytest.raises(SystemExit):
            main(["--compare", str(paths[0]), str(paths[1])])
        with pytest.raises(SystemExit):  # nor can it make a table
            main([str(paths[1]), "--out", str(tmp_path / "out")])


def test_a_case_measured_again_in_a_later_run_shows_that_runs_rows(tmp_path):
    """Runs given together: a case measured in two shows every executor of it from the last one (side by
    side), the other cases stay, and the table says how many cases a later run measured again."""
    import json

    from thunder_padvec.bench.report import main

    def run(stamp, ms, configs):
        return {"datetime": stamp, "machine_info": {"gpu": "GPU X"},
                "benchmarks": [{"extra_info": {**_record(e, ms * f), "config": c}}
                               for c in configs for e, f in (("copy", 0.8), ("padvec", 1.0), ("torch.compile", 1.1))]}

    paths = [tmp_path / "early.json", tmp_path / "late.json"]
    paths[0].write_text(json.dumps(run("2026-01-01T10:00:00", 1.0, ["a", "b", "c"])))
    paths[1].write_text(json.dumps(run("2026-01-01T12:00:00", 2.0, ["b"])))
    main([*map(str, paths), "--out", str(tmp_path / "out")])
    rows = json.loads((tmp_path / "out" / "2026-01-01-gpu-x.json").read_text())
    assert [(r["config"], r["executor"], round(r["median_ms"], 6)) for r in rows] == [
        ("a", "copy", 0.8), ("a", "padvec", 1.0), ("a", "torch.compile", 1.1),
        ("b", "copy", 1.6), ("b", "padvec", 2.0), ("b", "torch.compile", 2.2),  # in its first place
        ("c", "copy", 0.8), ("c", "padvec", 1.0), ("c", "torch.compile", 1.1)]
    table = (tmp_path / "out" / "2026-01-01-gpu-x.md").read_text()
    assert "1 case(s) measured again in a later run, `late.json` (2026-01-01T12:00): its rows are shown." in table
    assert [line.split(" |")[0] for line in table.splitlines() if line[:4] in ("| a ", "| b ", "| c ")] == [
        "| a", "| b", "| c"]


def test_the_host_path_is_reported_by_rounds_and_against_the_bare_launch(tmp_path):
    from thunder_padvec.bench.report import host_records, write

    infos = [{"kind": "host", "what": "padvec fusion call", "per_call_us": 11.0, "min_us": 9.5, "rounds": 15,
              "calls_per_round": 500, "above_bare_us": 6.2},
             {"kind": "host", "what": "bare cuLaunchKernel", "per_call_us": 4.8, "min_us": 4.1, "rounds": 15,
              "calls_per_round": 500},
             {"kind": "host", "what": "cold NVRTC compile", "seconds": 0.21}]
    host = host_records({"benchmarks": [{"extra_info": i} for i in infos] + [{"extra_info": {"kind": "gpu"}}]})
    assert host == infos
    text = write([], host, "GPU X", "2026-01-01", tmp_path)
    assert ("- padvec fusion call: 11.0 µs per call (median of 15 rounds; fastest round 9.5 µs), "
            "6.2 µs above the bare launch in the same rounds") in text
    assert "- bare cuLaunchKernel: 4.8 µs per call (median of 15 rounds; fastest round 4.1 µs)\n" in text
    assert "- cold NVRTC compile: 0.21 s" in text
    assert (tmp_path / "2026-01-01-gpu-x-host.json").exists()
    # a run without host records shows the day's earlier ones, and says so
    assert "an earlier run, `2026-01-01-gpu-x-host.json`" in write([], [], "GPU X", "2026-01-01", tmp_path)


def test_a_keyboard_interrupt_that_thunders_tracing_wrapped_ends_the_run():
    """A time limit's SIGINT lands while Thunder traces: its interpreter raises an error from the
    KeyboardInterrupt, and the hook ends the run (pytest then stops, and pytest-benchmark still writes
    its records); other failures do not."""
    from types import SimpleNamespace

    from thunder_padvec.bench import stops

    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as cause:
            raise RuntimeError("Encountered exception KeyboardInterrupt") from cause
    except RuntimeError as err:
        wrapped = err
    assert stops.interrupted(wrapped) and stops.interrupted(KeyboardInterrupt())
    assert not stops.interrupted(RuntimeError("no")) and not stops.interrupted(None)
    for err, stop in ((wrapped, True), (ValueError("a failed check"), False), (None, False)):
        session = SimpleNamespace(shouldstop=False)
        call = SimpleNamespace(excinfo=None if err is None else SimpleNamespace(value=err))
        stops.pytest_runtest_makereport(SimpleNamespace(session=session), call)
        assert bool(session.shouldstop) == stop


TINY_BLOCK = BlockCase(configs.RopeConfig("tiny-block", 1, 4, 2, 16, 16, 8), 64, 96)


@pytest.mark.parametrize("name, counts", [
    ("eager", None),
    ("thunder", {"forward": 0, "padvec forward": 0, "backward": 0, "padvec backward": 0}),
    ("padvec_cat", {"forward": 1, "padvec forward": 1, "backward": 1, "padvec backward": 1}),
    ("padvec", None),
])
def test_block_executors_agree_with_eager_and_their_fusions_are_counted(emulated, name, counts):
    built = BuiltBlock(TINY_BLOCK, device="cpu")
    assert built.rope_pass_bytes[0] > 0 and built.rope_pass_bytes[1] > 0
    step, jitted = checked(built, name)
    assert len(step(*built.args)) == 1 + len(built.params)
    if name == "padvec":  # the norms' scaling, the gating and the residual adds are fusions of their own
        found = fusion_counts(jitted)
        assert found["padvec forward"] > 1 and found["padvec backward"] > 1, found
    elif counts is not None:
        assert fusion_counts(jitted) == counts


@pytest.mark.parametrize("name, raised", [("thunder", "Unavailable"), ("padvec_cat", "AssertionError")])
def test_a_block_executor_that_disagrees_is_reported_and_padvec_fails_the_suite(emulated, name, raised):
    built = BuiltBlock(TINY_BLOCK, device="cpu")
    built.expected = [e + 1 for e in built.expected]  # a reference nobody matches
    with pytest.raises((Unavailable, AssertionError)) as info:
        checked(built, name)
    assert type(info.value).__name__ == raised
    assert "relative error" in str(info.value)


def test_the_block_benchmark_has_a_table_of_its_own(tmp_path):
    """Block records stay out of the RoPE table: they get their own file and section, with each executor's
    time against torch.compile's and its fusions; a later report without them keeps the day's earlier ones."""
    import json

    from thunder_padvec.bench.report import main

    def block(executor, ms, fusions=None):
        return {"config": "L-b1", "form": "block", "pass_": "fwd+bwd", "dtype": "bfloat16", "executor": executor,
                "median_ms": ms, "call_ms": ms + 0.5, "peak_memory_bytes": 2**30,
                **({"fusions": fusions} if fusions else {})}

    counts = {"forward": 3, "padvec forward": 1, "backward": 3, "padvec backward": 1}
    run = {"datetime": "2026-01-01T10:00:00", "machine_info": {"gpu": "GPU X"}, "benchmarks": [
        {"extra_info": i} for i in (_record("padvec", 1.0), _record("torch.compile", 1.1), block("torch.compile", 12.0),
                                    block("padvec_cat+torchcompile", 10.0, counts), block("copy", 0.2))]}
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run))
    main([str(path), "--out", str(tmp_path / "out")])
    rows = json.loads((tmp_path / "out" / "2026-01-01-gpu-x.json").read_text())
    assert [r["form"] for r in rows] == ["rope", "rope"]
    blocks = json.loads((tmp_path / "out" / "2026-01-01-gpu-x-block.json").read_text())
    assert [(b["executor"], b["speedup_vs_compile"]) for b in blocks] == [
        ("torch.compile", 1.0), ("padvec_cat+torchcompile", 1.2), ("copy", None)]  # the copy: RoPE's bytes only
    table = (tmp_path / "out" / "2026-01-01-gpu-x.md").read_text()
    assert "| L-b1 | padvec_cat+torchcompile | 10.000 | 10.500 | 1.200x | 3 (1) / 3 (1) | 1.00 |" in table
    assert "| L-b1 | copy | 0.200 | 0.700 | - | - | 1.00 |" in table
    # the RoPE rows alone, later that day: the block section is the earlier run's
    run["benchmarks"] = run["benchmarks"][:2]
    path.write_text(json.dumps(run))
    main([str(path), "--out", str(tmp_path / "out")])
    table = (tmp_path / "out" / "2026-01-01-gpu-x.md").read_text()
    assert "A Llama-style block, forward and backward (an earlier run, `2026-01-01-gpu-x-block.json`)" in table
    assert "| L-b1 | padvec_cat+torchcompile |" in table


def test_a_suite_row_records_its_measure_and_skips_an_executor_that_cannot_run():
    from types import SimpleNamespace

    from thunder_padvec.bench.measure import bench, built_once

    made = []
    assert built_once("a", lambda: made.append("a") or "A") == "A"
    assert built_once("a", lambda: made.append("again") or "B") == "A"  # the same case: built once
    assert built_once("b", lambda: made.append("b") or "B") == "B" and made == ["a", "b"]
    timed = []
    benchmark = SimpleNamespace(extra_info={}, pedantic=lambda fn, rounds, warmup_rounds: timed.append(rounds))
    bench(benchmark, lambda: ({"executor": "padvec", "median_ms": 1.0}, lambda: None), rounds=3)
    assert benchmark.extra_info == {"executor": "padvec", "median_ms": 1.0} and timed == [3]

    def unavailable():
        raise Unavailable("liger-kernel does not import")

    with pytest.raises(pytest.skip.Exception, match="liger-kernel does not import"):
        bench(benchmark, unavailable, rounds=3)


@pytest.mark.parametrize("name", ["padvec_cat", "eager"])
def test_a_block_record_has_the_times_the_fusions_and_padvecs_kernels(emulated, monkeypatch, name):
    """``bench.block.measure`` on the CPU, its GPU timers replaced: the record the report reads."""
    from thunder_padvec import timing
    from thunder_padvec.bench import block
    from thunder_padvec.bench import measure as measure_module

    timed = []
    monkeypatch.setattr(timing, "graph_median_ms", lambda run, repeats: timed.append("graph") or run() and 2.0)
    monkeypatch.setattr(timing, "median_ms", lambda run, repeats, warmup, flush: timed.append(flush) or run() and 3.0)
    monkeypatch.setattr(measure_module, "peak_bytes", lambda fn, args: fn(*args) and 123)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda: "GPU X")
    record, run = block.measure(BuiltBlock(TINY_BLOCK, device="cpu"), name)
    assert len(run()) == 1 + 7  # the input's gradient and the block's seven weights'
    assert timed == [False, "graph"]  # the call with its host work, then the graph's replays
    assert {k: record[k] for k in ("config", "form", "pass_", "executor", "median_ms", "call_ms",
                                   "peak_memory_bytes", "gpu")} == {
        "config": "tiny-block-b1", "form": "block", "pass_": "fwd+bwd", "executor": name, "median_ms": 2.0,
        "call_ms": 3.0, "peak_memory_bytes": 123, "gpu": "GPU X"}
    if name == "padvec_cat":
        assert record["fusions"] == {"forward": 1, "padvec forward": 1, "backward": 1, "padvec backward": 1}
        assert [line.split(" | ")[0] for line in record["kernels"]] == ["padvec_cat0 (forward)",
                                                                         "padvec_cat1 (backward)"]
    else:
        assert "fusions" not in record and "kernels" not in record
