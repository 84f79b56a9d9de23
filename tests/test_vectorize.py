"""The vectorization analysis: its decisions (widths per tensor) and, in emulation, the numbers.

Cases follow the seed change (nvFuser's resize-aware vectorization) and its follow-ups.
"""

import importlib
import re

import pytest
import torch
import thunder
import torch.nn.functional as F

from helpers import fusions, grads, jit_and_run, randn, unfused_ops
from thunder_padvec import codegen, explain, padvec, schedule, vectorize
from thunder_padvec.runtime import nvrtc
from thunder_padvec.examples import rope_one_entry


vectorize_plan = importlib.import_module("thunder_padvec.vectorize.plan")
vectorize_segments = importlib.import_module("thunder_padvec.vectorize.segments")
render = importlib.import_module("thunder_padvec.codegen.render")


def _report(jitted):
    (report,) = explain(jitted)
    return report


def _roped(generator, shape, n):
    """``(report, segment)`` of LitGPT's RoPE of ``n`` features through padvec, on random bf16 x of ``shape``
    and cos and sin of ``(shape[-2], n)``: its output checked against eager's, its one segment."""
    from thunder_padvec.examples import litgpt_rope

    x = randn(*shape, dtype=torch.bfloat16, generator=generator)
    cos, sin = (randn(shape[-2], n, dtype=torch.bfloat16, generator=generator) for _ in range(2))
    jitted, out, _ = jit_and_run(litgpt_rope, x, cos, sin, n)
    assert torch.equal(out, litgpt_rope(x, cos, sin, n))
    report = _report(jitted)
    (seg,) = report.plan.segments
    return report, seg


def _rows_as_if_close(monkeypatch):
    """Small shapes put a RoPE's heads 16 KiB apart, where a thread whose steps go side by side takes two
    at most (``rows_apart``); the tests of other decisions made with four rows a thread lift that cap."""
    monkeypatch.setattr(vectorize_plan, "APART_ROWS", vectorize_plan.MAX_ROWS_PER_THREAD)


def _store_widths(report):
    """Widths of the global writes of the outputs: stores, or the copies of staged rows."""
    return [a.width for a in report.accesses if a.role == "output"]


def _input_accesses(report, name):
    return [a for a in report.accesses if a.role == "input" and a.tensor == name]


# (id, program, input shapes, widths of the inputs, widths of the outputs); float32
CASES = [
    ("pad-4-4", lambda x: F.pad(x, (4, 4)), [(1024,)], {"x": 4}, [4]),
    ("pad-2-2", lambda x: F.pad(x, (2, 2)), [(1024,)], {"x": 2}, [4]),
    ("pad-0-2", lambda x: F.pad(x, (0, 2)), [(1024,)], {"x": 2}, [2]),
    ("pad-middle-4-4", lambda x: F.pad(x, (0, 0, 4, 4)), [(1024, 1024, 2)], {"x": 4}, [4]),
    ("pad-middle-crop-4-grow-4", lambda x: F.pad(x, (0, 0, -4, 4)), [(1024, 1024, 2)], {"x": 4}, [4]),
    ("slice-at-2", lambda x: x[2:1026] * 2.0, [(1032,)], {"x": 2}, [4]),
    ("slice-at-3", lambda x: x[3:1027] * 2.0, [(1032,)], {"x": 1}, [4]),
    ("slice-at-4", lambda x: x[4:1028] * 2.0, [(1032,)], {"x": 4}, [4]),
    ("cat-64-64", lambda a, b: torch.cat((a, b), -1), [(8, 64), (8, 64)], {"a": 4, "b": 4}, [4]),
    ("cat-8-24", lambda a, b: torch.cat((a, b), -1), [(8, 8), (8, 24)], {"a": 4, "b": 4}, [4]),
    ("cat-3-5", lambda a, b: torch.cat((a, b), -1), [(8, 3), (8, 5)], {"a": 1, "b": 1}, [4]),
    ("cat-rows", lambda a, b: torch.cat((a, b), 0), [(3, 8), (5, 8)], {"a": 4, "b": 4}, [4]),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_widths_and_numbers(emulated, generator, case):
    _, fn, shapes, input_widths, output_widths = case
    args = [randn(*s, generator=generator) for s in shapes]
    jitted, out, trace = jit_and_run(fn, *args)
    assert unfused_ops(trace) == []
    assert torch.equal(out, fn(*args))
    report = _report(jitted)
    for name, width in input_widths.items():
        assert report.widths[name] == width, str(report)
    assert _store_widths(report) == output_widths, str(report)


def test_input_used_by_pad_and_relu_is_loaded_once(emulated, generator):
    def fn(x):
        return F.pad(x, (4, 4)), torch.relu(x)

    x = randn(1024, generator=generator)
    jitted, (padded, relu), trace = jit_and_run(fn, x)
    assert torch.equal(padded, F.pad(x, (4, 4))) and torch.equal(relu, torch.relu(x))
    report = _report(jitted)
    assert report.launch is not None and len(report.launch.segments) == 1  # both outputs in one pass
    (load,) = _input_accesses(report, "x")  # one load serves the pad and the relu
    assert load.width == 4
    assert _store_widths(report) == [4, 4]


@pytest.mark.parametrize(
    "dtype, vector, half",
    [(torch.bfloat16, 8, 4), (torch.float16, 8, 4), (torch.float32, 4, 4)],
    ids=["bf16", "fp16", "fp32"],
)
def test_seed_rope_widths(emulated, generator, monkeypatch, dtype, vector, half):
    # at the seed's own size (millions of rows) rows are staged, not split into narrower chunks
    monkeypatch.setattr(vectorize_plan, "NARROW_MAX_THREADS", 0)
    x = randn(2, 3, 13, 32, dtype=dtype, generator=generator)  # 78 rows: the block's tile is partial
    cos, sin = randn(13, 8, dtype=dtype, generator=generator), randn(13, 8, dtype=dtype, generator=generator)
    jitted, out, _ = jit_and_run(rope_one_entry, x, cos, sin, 8)
    assert torch.equal(out, rope_one_entry(x, cos, sin, 8))
    report = _report(jitted)
    (seg,) = report.plan.segments
    w = report.widths
    assert (w["x"], w["cos"], w["sin"], w["x1"], w["x2"]) == (vector, vector, vector, half, half), str(report)
    (out,) = [a for a in report.accesses if a.role == "output"]
    assert (out.access, out.width) == ("staged", vector)
    kinds = sorted((a.access, a.width) for a in _input_accesses(report, "x"))
    if dtype.itemsize == 2:
        # 16-bit rows are 4 chunks of 8 and the halves of 4 lie inside the first: a row's chunks go to 4
        # threads, each loading its own chunk into registers, one coalesced access each way, no barriers
        assert (seg.in_registers, seg.column_groups, seg.repeats) == (True, 4, 1), str(report)
        assert "__shared__" not in report.kernel_source and "__sync" not in report.kernel_source
        assert kinds == sorted([("staged", vector), ("register", vector), ("register", half), ("register", half)])
    else:
        # float32 rows are 8 chunks of 4: the first reads the second's columns, so rows go through shared
        # memory, each split between two warps that share the block's tile
        assert (seg.in_registers, seg.column_groups) == (False, 2), str(report)
        assert "__syncthreads()" in report.kernel_source and "__syncwarp()" not in report.kernel_source
        assert kinds == sorted([("staged", vector), ("shared", vector), ("shared", half), ("shared", half)])


@pytest.mark.parametrize("repeats", [1, 2, 4])
def test_register_rows_take_several_rows_per_thread(emulated, generator, monkeypatch, repeats):
    """A thread of register rows takes ``repeats`` rows a block apart, as far as the launch keeps
    MIN_THREADS threads; rows past the end (here 3 * 5 * 29 = 435, not a multiple of any tile) are
    neither read nor written."""
    monkeypatch.setattr(vectorize_plan, "NARROW_MAX_THREADS", 0)
    monkeypatch.setattr(vectorize_plan, "REGISTER_REPEATS", repeats)
    monkeypatch.setattr(schedule.TUNING, "min_threads", 64)
    x = randn(3, 5, 29, 32, dtype=torch.bfloat16, generator=generator)
    cos, sin = (randn(29, 8, dtype=torch.bfloat16, generator=generator) for _ in range(2))
    jitted, out, trace = jit_and_run(rope_one_entry, x, cos, sin, 8)
    assert torch.equal(out, rope_one_entry(x, cos, sin, 8))
    (seg,) = _report(jitted).plan.segments
    assert (seg.in_registers, seg.repeats, seg.tile_rows) == (True, repeats, 64 * repeats)
    ((fusion, _),) = fusions(trace)
    source = codegen.device_source(codegen.render(fusion.last.plan, fusion.last.params))
    assert source.count("switch (column_group)") == repeats and "__shared__" not in source
    assert nvrtc.compile_cubin(source, "sm_90")[:4] == b"\x7fELF"


def test_register_rows_only_where_one_chunk_computes(emulated, generator, monkeypatch):
    """The seed's backward adds in every chunk of a row (the sum of the pads of its slices' gradients):
    a warp would run four chunks' arithmetic one after another, so its rows stay in shared memory,
    while the forward (arithmetic in the first chunk only) stages them in registers."""
    monkeypatch.setattr(vectorize_plan, "NARROW_MAX_THREADS", 0)
    x = randn(2, 3, 13, 32, dtype=torch.bfloat16, generator=generator).requires_grad_()
    cos, sin = (randn(13, 8, dtype=torch.bfloat16, generator=generator) for _ in range(2))
    jitted = thunder.jit(rope_one_entry, executors=[padvec])
    out = jitted(x, cos, sin, 8)
    grad = randn(*out.shape, dtype=out.dtype, generator=generator)
    out.backward(grad)
    x_eager = x.detach().clone().requires_grad_()
    expected = rope_one_entry(x_eager, cos, sin, 8)
    expected.backward(grad)
    assert torch.equal(out, expected)
    torch.testing.assert_close(x.grad, x_eager.grad, rtol=1e-2, atol=1e-2)
    modes = []
    for trace in (thunder.last_traces(jitted)[-1], thunder.last_backward_traces(jitted)[-1]):
        ((fusion, _),) = fusions(trace)
        (seg,) = fusion.last.plan.segments
        modes.append(seg.in_registers)
    assert modes == [True, False]  # forward, backward


def test_misaligned_view_gets_a_narrower_variant(emulated, generator):
    def fn(x):
        return F.pad(x, (4, 4)) * 2.0

    base = randn(1025, generator=generator)
    jitted, out, _ = jit_and_run(fn, base[:1024])
    assert _report(jitted).widths["x"] == 4
    shifted = base[1:]  # starts one element (4 bytes) past an aligned address
    out = jitted(shifted)
    assert torch.equal(out, fn(shifted))
    assert _report(jitted).widths["x"] == 1
    assert torch.equal(jitted(base[:1024]), fn(base[:1024]))


def test_outer_stride_limits_the_width(emulated, generator):
    def fn(x):
        return F.pad(x, (0, 4)) + 1.0

    base = randn(16, 31, generator=generator)
    view = base[:, :28]  # rows 31 elements apart
    jitted, out, _ = jit_and_run(fn, view)
    assert torch.equal(out, fn(view))
    assert _report(jitted).widths["x"] == 1


# --------------------------------------------------------------------------------------------
# The rules, on their own
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "frontier, shape, strides, run",
    [
        (((0, 1032),), (1032,), None, 8),
        (((1, 4), (2, 2)), (1024, 1024, 2), None, 8),
        (((1, 1024), (2, 6)), (4, 1024, 6), None, 2),  # 6 is not a power of two: lanes stay in a row
        (((0, 4), (1, 8)), (16, 8), (9, 1), 8),  # rows are not contiguous: the run stops at one row
        (((0, 4), (1, 8)), (16, 8), (8, 1), 32),
        ((), (16, 8), None, 1),
    ],
)
def test_inner_run(frontier, shape, strides, run):
    assert vectorize.inner_run(frontier, shape, strides)[0] == run


def test_frontier_merge_keeps_common_trailing_dims():
    assert vectorize.merge_frontiers(((1, 8), (2, 4)), ((2, 6),)) == ((2, 2),)
    assert vectorize.merge_frontiers(((0, 3), (1, 8)), ((0, 6), (1, 4))) == ((0, 3), (1, 4))


# --------------------------------------------------------------------------------------------
# Row modes: threads that share a row (tiled) or a row per thread (staged)
# --------------------------------------------------------------------------------------------

# (head_size, rope_n_elem, dtype, threads per row or 1 for a staged row, lanes per chunk)
ROW_CASES = [
    (128, 128, torch.bfloat16, 8, 8),  # Llama: halves of 64 = 8 chunks of 8
    (256, 256, torch.bfloat16, 16, 8),  # Gemma
    (80, 32, torch.bfloat16, 4, 8),  # phi-2: halves of 16, 48 passed through: steps of 2, 2, 4, 2 chunks
    (96, 96, torch.bfloat16, 8, 8),  # Phi-3: halves of 48 = 6 chunks, 8 threads, 6 busy
    (64, 16, torch.bfloat16, 4, 4),  # pythia: halves of 8, in a small launch 4-lane chunks (large: staged, below)
    (128, 128, torch.float32, 16, 4),
    (128, 128, torch.float16, 8, 8),
]


@pytest.mark.parametrize("case", ROW_CASES, ids=lambda c: f"hs{c[0]}-rope{c[1]}-{str(c[2])[6:]}")
def test_row_mode_threads_and_numbers(emulated, generator, monkeypatch, case):
    """Whole rows (phi-2's rows in pieces: ``test_rows_split_where_their_pieces_read_no_common_columns``)."""
    from thunder_padvec.examples import litgpt_rope

    monkeypatch.setattr(vectorize_segments, "ROW_PIECES", False)
    hs, n, dtype, threads, chunk = case
    x = randn(2, 3, 5, hs, dtype=dtype, generator=generator)
    cos, sin = randn(5, n, dtype=dtype, generator=generator), randn(5, n, dtype=dtype, generator=generator)
    jitted, out, trace = jit_and_run(litgpt_rope, x, cos, sin, n)
    assert unfused_ops(trace) == []
    assert torch.equal(out, litgpt_rope(x, cos, sin, n))
    report = _report(jitted)
    (seg,) = report.plan.segments
    assert (seg.whole_rows, seg.threads_per_row, seg.chunk) == (True, threads, chunk), str(report)
    assert bool(seg.staged) == (threads == 1), str(report)
    vector = min(16 // x.element_size(), chunk)
    assert (report.widths["x"], report.widths["cos"], report.widths["sin"]) == (vector,) * 3, str(report)
    assert _store_widths(report) == [vector]


@pytest.mark.parametrize(
    "fn, shape, threads, chunk, narrow_max_threads",
    [
        (lambda x: F.pad(x, (0, 16)) * 2.0, (6, 48), 8, 4, None),  # slabs of 12 and 4 chunks: steps of 8, 4, 4
        (lambda x: torch.cat((x[..., 32:], x[..., :32]), -1) + 1.0, (6, 64), 8, 4, None),
        (lambda x: torch.cat((x[..., 4:], x[..., :4]), -1) + 1.0, (6, 64), 8, 4, None),  # steps of 8, 7 and 1 chunks
        # an edge inside a 16-byte chunk: 2-lane chunks in a small launch, else a staged row
        (lambda x: torch.cat((x[..., 2:], x[..., :2]), -1) + 1.0, (6, 64), 16, 2, None),
        (lambda x: torch.cat((x[..., 2:], x[..., :2]), -1) + 1.0, (6, 64), 1, 4, 0),
    ],
    ids=["pad-tail", "swap-halves", "rotate-by-4", "rotate-by-2", "rotate-by-2-large"],
)
def test_threads_per_row_follow_the_breakpoints(emulated, generator, monkeypatch, fn, shape, threads, chunk,
                                                narrow_max_threads):
    if narrow_max_threads is not None:
        monkeypatch.setattr(vectorize_plan, "NARROW_MAX_THREADS", narrow_max_threads)
    x = randn(*shape, generator=generator)
    jitted, out, _ = jit_and_run(fn, x)
    assert torch.equal(out, fn(x))
    (seg,) = _report(jitted).plan.segments
    assert (seg.threads_per_row, seg.chunk) == (threads, chunk)


@pytest.mark.parametrize("case", ROW_CASES[:4], ids=lambda c: f"hs{c[0]}-rope{c[1]}")
def test_threads_take_several_heads_sharing_cos_and_sin(emulated, generator, monkeypatch, case):
    """With the launch-size floor lifted, a tiled thread takes rows of several heads: cos and sin,
    broadcast along the heads, are loaded once for all of them. Where that leaves a row's loads above
    ``ROW_SHARING`` of what one row needs (phi-2: 12 vectors for 2 rows against 8 for one), a
    thread takes one row. (Counts of threads that keep every slot busy are off here: see
    ``test_a_row_whose_slabs_leave_slots_idle_takes_the_count_of_threads_that_fills_them``.)"""
    from thunder_padvec import schedule
    from thunder_padvec.examples import litgpt_rope

    monkeypatch.setattr(schedule.TUNING, "min_threads", 0)
    monkeypatch.setattr(vectorize_plan, "EXACT_THREADS", False)
    monkeypatch.setattr(vectorize_segments, "ROW_PIECES", False)  # whole rows
    hs, n, dtype, threads, _ = case
    x = randn(2, 4, 3, hs, dtype=dtype, generator=generator)
    cos, sin = randn(3, n, dtype=dtype, generator=generator), randn(3, n, dtype=dtype, generator=generator)
    jitted, out, _ = jit_and_run(litgpt_rope, x, cos, sin, n)
    assert torch.equal(out, litgpt_rope(x, cos, sin, n))
    report = _report(jitted)
    (seg,) = report.plan.segments
    if hs == 80:
        assert (seg.threads_per_row, seg.row_dim, seg.rows_per_thread) == (threads, None, 1), str(report)
        assert report.source.count("alignas(16) padvec_bf16 g") == 8  # x at 0, 16, 32, 64; cos, sin at 0, 16
        return
    assert (seg.threads_per_row, seg.row_dim) == (threads, 1), str(report)
    assert seg.rows_per_thread == min(4, 8 // len(seg.steps)), str(report)
    # one load of cos per step that ropes, whatever the rows per thread
    roping_steps = sum(1 for first, _ in seg.steps if first * seg.chunk < n)
    assert report.source.count("args.in1 +") == roping_steps


@pytest.mark.parametrize("hs, n, floor, threads, steps, rows", [
    (96, 96, 0, 6, ((0, 6), (6, 6)), 4),  # Phi-3: halves of 6 chunks, 6 threads instead of 8 with 2 idle
    # (in turn: where the lanes may reload, see the test below, Phi-3's forward takes both halves side by side)
    (96, 96, 10 ** 9, 8, ((0, 6), (6, 6)), 1),  # ... unless the launch then falls under the floor
    (80, 32, 0, 4, ((0, 2), (2, 2), (4, 4), (8, 2)), 1),  # phi-2: 2 would fill them, but teams take at least 4
    (128, 128, 0, 8, ((0, 8), (8, 8)), 4),  # Llama: 8 threads, all busy already
])
def test_a_row_whose_slabs_leave_slots_idle_takes_the_count_of_threads_that_fills_them(
        emulated, generator, monkeypatch, hs, n, floor, threads, steps, rows):
    """Where a power of two of threads leaves some idle at a row's steps, the greatest common divisor
    of its slabs' chunks takes the row, every thread busy at every step, if it is at least 4 and the
    launch keeps ``min_threads`` threads. A team of 6 does not divide a block of 256: its last 4 threads sit out,
    and every element is still written once (outputs poisoned with NaN)."""

    monkeypatch.setattr(schedule.TUNING, "min_threads", floor)
    monkeypatch.setattr(vectorize_segments, "ROW_PIECES", False)  # whole rows
    monkeypatch.setattr(vectorize_plan, "LANE_RELOADS", False)  # one team taking a row's steps in turn
    report, seg = _roped(generator, (1, 8, 37, hs), n)  # 296 rows: blocks of 42 rows of 6
    assert (seg.threads_per_row, seg.steps, seg.rows_per_thread) == (threads, steps, rows), str(report)
    assert ("threadIdx.x < 252u" in report.kernel_source) == (threads == 6)


def test_steps_side_by_side_in_teams_that_do_not_fit_a_warp_load_the_other_half_again(emulated, generator,
                                                                                        monkeypatch):
    """Phi-3's rows of 96 (halves of 6 chunks): teams of 6 lanes a half do not divide a warp, so the two
    teams of a row take its halves side by side with each lane loading the other half's chunk again
    (from the L1, where the lane that owns it has just loaded it), one row a thread: 4 loads a lane (x,
    x's other half, cos, sin). The lanes are laid end to end over the grid (296 rows of 12 lanes: 28
    blocks of 128, rows across blocks, the last block partly idle), the cat's halves are selected once a chunk,
    and -x is x's sign bit flipped. Every element is written (outputs poisoned with NaN) and equals
    eager's; with ``LANE_RELOADS`` off one team of 6 takes both halves of 4 rows in turn."""
    from thunder_padvec.examples import litgpt_rope

    monkeypatch.setattr(schedule.TUNING, "min_threads", 0)
    x = randn(1, 8, 37, 96, dtype=torch.bfloat16, generator=generator)
    cos, sin = (randn(37, 96, dtype=torch.bfloat16, generator=generator) for _ in range(2))
    jitted, out, _ = jit_and_run(litgpt_rope, x, cos, sin, 96)
    assert torch.equal(out, litgpt_rope(x, cos, sin, 96))
    report = _report(jitted)
    (seg,) = report.plan.segments
    assert (seg.threads_per_row, seg.lane_steps, seg.team, seg.rows_per_thread, seg.reloads) == (6, 2, 12, 1, True)
    assert "2 steps side by side (chunks loaded by each lane)" in seg.mapping
    assert (report.launch.block, report.launch.grid) == (128, -(-296 * 12 // 128))
    source = report.kernel_source
    assert len(re.findall(r"padvec_load\w*<8>\(g\d+(?:_\d+)?, args\.in", source)) == 4
    assert "padvec_exchange<" not in source
    assert "const padvec_uidx i = (padvec_uidx)(block - 0u) * 128u + threadIdx.x;" in source
    assert "(c) < 48 ?" in source and "(l) < 48" not in source  # one select a chunk
    assert "= padvec_flip_sign(" in source
    assert {a.access for a in report.accesses if a.tensor == "x" and a.role == "input"} == {"cached", "reloaded"}

    monkeypatch.setattr(vectorize_plan, "LANE_RELOADS", False)
    jitted, out, _ = jit_and_run(litgpt_rope, x, cos, sin, 96)
    assert torch.equal(out, litgpt_rope(x, cos, sin, 96))
    (seg,) = _report(jitted).plan.segments
    assert (seg.threads_per_row, seg.lane_steps, seg.rows_per_thread, seg.reloads) == (6, 1, 4, False)


@pytest.mark.parametrize("form", ["rope", "qkv", "partial"])
def test_lanes_that_reload_everywhere_take_a_chunk_of_a_row_each_and_compute_eagers_values(emulated, generator,
                                                                                         monkeypatch, form):
    """The plan the first call times beside the default (``all_reloads``; forced here with ``ALL_RELOADS``):
    where the steps of a row go side by side with lanes that exchange their chunks (LitGPT's RoPE of 4 heads
    a thread; the qkv form with grouped queries, whose k and v rows 4 heads share; phi-2's rotated piece of
    32 features beside its 48 passed through), every such segment instead takes one chunk of one row a
    lane and loads the other half's chunk again: no shuffles, one row a thread, blocks of 128 where every
    segment reloads. Outputs poisoned with NaN first; each equals eager's bit for bit."""
    from thunder_padvec.examples import litgpt_rope, qkv_split_rope

    monkeypatch.setattr(schedule.TUNING, "min_threads", 0)
    cos, sin = (randn(64, 128, dtype=torch.bfloat16, generator=generator) for _ in range(2))
    if form == "qkv":
        qkv = randn(2, 64, (8 + 2 * 2) * 128, dtype=torch.bfloat16, generator=generator)
        fn, args = qkv_split_rope, (qkv, cos, sin, 8, 2, 128, 128)
    else:
        rope_n = 128 if form == "rope" else 32
        x = randn(2, 8, 64, 128 if form == "rope" else 80, dtype=torch.bfloat16, generator=generator)
        fn, args = litgpt_rope, (x, cos[:, :rope_n], sin[:, :rope_n], rope_n)

    def run():
        jitted, out, _ = jit_and_run(fn, *args)
        want = fn(*args)
        for got, expected in zip(*((o,) if torch.is_tensor(o) else o for o in (out, want))):
            assert torch.equal(got, expected)
        return _report(jitted)

    before = run()
    exchanged = [seg for seg in before.plan.segments if seg.lane_steps > 1 and not seg.reloads]
    assert exchanged and "padvec_exchange<" in before.kernel_source
    monkeypatch.setattr(vectorize_plan, "ALL_RELOADS", True)
    after = run()
    for seg in after.plan.segments:
        assert not seg.tiled or seg.lane_steps == 1 or (seg.reloads and seg.rows_per_thread == 1), seg.mapping
    assert sum(seg.reloads for seg in after.plan.segments) >= len(exchanged)
    assert "padvec_exchange<" not in after.kernel_source
    assert after.launch.block == (128 if all(seg.reloads for seg in after.plan.segments) else 256)


@pytest.mark.parametrize("threads, slots", [(1, 1), (2, 2), (3, 4), (4, 4), (6, 8), (8, 8), (12, 16), (32, 32)])
def test_a_team_takes_the_rows_per_thread_of_the_power_of_two_it_stands_in_for(threads, slots):
    assert vectorize_plan.team_slots(threads) == slots


@pytest.mark.parametrize("seq, apart_bytes, rows", [(64, 4096, 2), (64, 32768, 4), (8, 4096, 4)])
def test_heads_lying_apart_take_at_most_two_rows_a_thread(emulated, generator, monkeypatch, seq, apart_bytes, rows):
    """LitGPT's RoPE form reads and writes its heads ``seq * 128`` elements apart: where that is at
    least ``APART_BYTES`` (64 positions: 16 KiB) and a thread's steps go side by side (the forward), each
    head it takes is a stream of its own, and it takes two (``APART_ROWS``); heads closer than that (8
    positions: 2 KiB) or a higher bar keep four. cos and sin, broadcast along the heads, do not count.
    The backward's steps go in turn: it keeps four. Every element and gradient equals eager's."""
    from thunder_padvec.examples import litgpt_rope

    monkeypatch.setattr(schedule.TUNING, "min_threads", 0)
    monkeypatch.setattr(vectorize_plan, "APART_BYTES", apart_bytes)
    x = randn(2, 8, seq, 128, dtype=torch.bfloat16, generator=generator).requires_grad_()
    cos, sin = (randn(seq, 128, dtype=torch.bfloat16, generator=generator) for _ in range(2))
    cotangent = randn(2, 8, seq, 128, dtype=torch.bfloat16, generator=generator)
    jitted = thunder.jit(litgpt_rope, executors=[padvec])
    out = jitted(x, cos, sin, 128)
    (grad,) = torch.autograd.grad(out, x, cotangent)
    want = litgpt_rope(x, cos, sin, 128)
    assert torch.equal(out, want)
    assert torch.equal(grad, torch.autograd.grad(want, x, cotangent)[0])
    forward, backward = explain(jitted)
    (seg,) = forward.plan.segments
    assert (seg.row_dim, seg.rows_per_thread, seg.lane_steps) == (1, rows, 2), str(forward)
    assert f"{rows} rows per thread along dim 1" in seg.mapping
    assert [(s.rows_per_thread, s.lane_steps) for s in backward.plan.segments] == [(4, 1)], str(backward)


@pytest.mark.parametrize("groups", [8, 2])
def test_the_qkv_forms_heads_adjacent_in_qkv_keep_four_rows_a_thread(emulated, generator, monkeypatch, groups):
    """The qkv form reads q's and k's heads one row apart in qkv (with all heads and with grouped
    queries), though it writes them ``T * head_size`` apart: not a stream each, four rows a thread.
    Every element equals eager's."""
    from thunder_padvec.examples import qkv_split_rope

    monkeypatch.setattr(schedule.TUNING, "min_threads", 0)
    qkv = randn(2, 64, (8 + 2 * groups) * 128, dtype=torch.bfloat16, generator=generator)
    cos, sin = (randn(64, 128, dtype=torch.bfloat16, generator=generator) for _ in range(2))

    def fn(qkv, cos, sin):
        return qkv_split_rope(qkv, cos, sin, 8, groups, 128, 128)

    jitted, out, _ = jit_and_run(fn, qkv, cos, sin)
    for got, want in zip(out, fn(qkv, cos, sin)):
        assert torch.equal(got, want)
    (report,) = explain(jitted)
    assert [(s.row_dim, s.rows_per_thread) for s in report.plan.segments] == [(1, 4)], str(report)


@pytest.mark.parametrize("seq, planes", [(64, (4, 2)), (48, None)])
def test_plane_order_puts_the_blocks_sharing_cos_and_sin_together(emulated, generator, monkeypatch, seq, planes):
    """With ``plane_order``, consecutive blocks take the same positions of each plane (a batch's group
    of 4 heads): block b computes tile (b % planes) * per_plane + b / planes. Where a block's 32 rows
    would straddle two planes (48 positions), the tiles keep their order. Every element is written."""
    from thunder_padvec import schedule

    monkeypatch.setattr(schedule.TUNING, "min_threads", 0)
    monkeypatch.setattr(schedule.TUNING, "plane_order", True)
    monkeypatch.setattr(vectorize_plan, "LANE_STEPS", False)  # a team of 8 a row, 32 rows a block
    report, seg = _roped(generator, (2, 8, seq, 128), 128)
    assert (seg.threads_per_row, seg.row_dim, seg.rows_per_thread, seg.tile_rows) == (8, 1, 4, 32), str(report)
    if planes is None:
        assert "tile_index = (block - 0u);" in report.kernel_source
    else:
        n, per_plane = planes
        assert f"tile_index = (b % {n}u) * {per_plane}u + b / {n}u;" in report.kernel_source


def _loads_into_registers(source: str) -> int:
    return len(re.findall(r"padvec_load\w*<\d+>\(g\d+, args\.in", source))


def test_steps_side_by_side_take_a_rows_other_half_from_the_lane_that_loaded_it(emulated, generator, monkeypatch):
    """LitGPT's full-rotary RoPE with 4 heads a thread: two teams of 8 lanes take a row's halves side
    by side. A lane loads its own chunk of x (4 heads), cos and sin once (6 loads, where one team taking
    both halves in turn loads 12) and takes x's other half from the lane 8 along, with ``__shfl_sync``
    (the host loads it again). Every element is written and equals eager's."""
    _rows_as_if_close(monkeypatch)
    from thunder_padvec.examples import litgpt_rope

    monkeypatch.setattr(schedule.TUNING, "min_threads", 0)
    x = randn(2, 8, 64, 128, dtype=torch.bfloat16, generator=generator)
    cos, sin = (randn(64, 128, dtype=torch.bfloat16, generator=generator) for _ in range(2))
    jitted, out, _ = jit_and_run(litgpt_rope, x, cos, sin, 128)
    assert torch.equal(out, litgpt_rope(x, cos, sin, 128))
    report = _report(jitted)
    (seg,) = report.plan.segments
    assert (seg.threads_per_row, seg.lane_steps, seg.team, seg.rows_per_thread, seg.tile_rows) == (8, 2, 16, 4, 16)
    assert "2 steps side by side" in seg.mapping
    source = report.kernel_source
    assert _loads_into_registers(source) == 6
    assert source.count("padvec_exchange<8>(") == 4  # x's other half, for each of the 4 heads
    assert source.count("const int c = own;") == 4  # one code for both halves: the column at run time
    assert {a.access for a in report.accesses if a.tensor == "x" and a.role == "input"} == {"cached", "exchanged"}

    monkeypatch.setattr(render, "EXCHANGE", False)  # an experiment's knob: the other half loaded again
    jitted, out, _ = jit_and_run(litgpt_rope, x, cos, sin, 128)
    assert torch.equal(out, litgpt_rope(x, cos, sin, 128))
    source = _report(jitted).kernel_source
    assert "padvec_exchange<" not in source and _loads_into_registers(source) == 6
    assert len(re.findall(r"padvec_load\w*<8>\(g\d+_1, args\.in", source)) == 4

    monkeypatch.setattr(render, "EXCHANGE", True)
    monkeypatch.setattr(vectorize_plan, "LANE_STEPS", False)
    jitted, out, _ = jit_and_run(litgpt_rope, x, cos, sin, 128)
    assert torch.equal(out, litgpt_rope(x, cos, sin, 128))
    report = _report(jitted)
    assert report.plan.segments[0].lane_steps == 1 and _loads_into_registers(report.kernel_source) == 12


def test_steps_side_by_side_only_where_the_lanes_own_every_load(emulated, generator, monkeypatch):
    """Not side by side: one head a thread (the registers they would save are the heads'), rows that
    leave a block's last team partly past the end (every lane of a warp must exchange), and phi-2's
    partial rotary, whose passed-through features read x at columns no step starts at."""
    from thunder_padvec.examples import litgpt_rope

    x = randn(1, 4, 8, 128, dtype=torch.bfloat16, generator=generator)
    cos, sin = (randn(8, 128, dtype=torch.bfloat16, generator=generator) for _ in range(2))
    jitted, out, _ = jit_and_run(litgpt_rope, x, cos, sin, 128)  # the launch floor: one head a thread
    assert torch.equal(out, litgpt_rope(x, cos, sin, 128))
    (seg,) = _report(jitted).plan.segments
    assert (seg.rows_per_thread, seg.lane_steps) == (1, 1)

    monkeypatch.setattr(schedule.TUNING, "min_threads", 0)
    x = randn(1, 4, 6, 128, dtype=torch.bfloat16, generator=generator)  # 6 teams of 4 heads: 16 a block
    cos, sin = (randn(6, 128, dtype=torch.bfloat16, generator=generator) for _ in range(2))
    jitted, out, _ = jit_and_run(litgpt_rope, x, cos, sin, 128)
    assert torch.equal(out, litgpt_rope(x, cos, sin, 128))
    (seg,) = _report(jitted).plan.segments
    assert (seg.rows_per_thread, seg.lane_steps) == (4, 1)

    x = randn(1, 8, 64, 80, dtype=torch.bfloat16, generator=generator)
    cos, sin = (randn(64, 32, dtype=torch.bfloat16, generator=generator) for _ in range(2))
    monkeypatch.setattr(importlib.import_module("thunder_padvec.vectorize.segments"), "ROW_PIECES", False)
    jitted, out, _ = jit_and_run(litgpt_rope, x, cos, sin, 32)
    assert torch.equal(out, litgpt_rope(x, cos, sin, 32))
    assert all(s.lane_steps == 1 for s in _report(jitted).plan.segments)


def _halves_of_two_inputs(a, b, cos, sin):
    return torch.cat((a, b), -1) * cos + sin


def test_steps_side_by_side_where_only_one_team_may_load_an_input(emulated, generator, monkeypatch):
    """A row made of two inputs of 64 features each: the first team loads both (b at its own column
    is b's first chunk), and the second team takes b's from it; the second team's own column (64)
    is past the end of a and b, so their loads are the first team's alone."""
    _rows_as_if_close(monkeypatch)
    monkeypatch.setattr(schedule.TUNING, "min_threads", 0)
    a, b = (randn(2, 8, 64, 64, dtype=torch.bfloat16, generator=generator) for _ in range(2))
    cos, sin = (randn(64, 128, dtype=torch.bfloat16, generator=generator) for _ in range(2))
    jitted, out, _ = jit_and_run(_halves_of_two_inputs, a, b, cos, sin)
    assert torch.equal(out, _halves_of_two_inputs(a, b, cos, sin))
    report = _report(jitted)
    (seg,) = report.plan.segments
    assert (seg.lane_steps, seg.rows_per_thread) == (2, 4), str(report)
    source = report.kernel_source
    assert len(re.findall(r"if \(step == 0\) padvec_load\w*<8>\(g\d+, args\.in[01]", source)) == 8
    assert source.count("padvec_exchange<8>(") == 4  # b, for each of the 4 heads


def test_a_rows_shifted_reads_share_the_loads_of_its_aligned_ones(emulated, generator):
    """Llama's halves: the thread that owns columns c and c + 64 of a row needs x at both for either
    output chunk (x * cos plus the rotated half), and loads each once."""
    from thunder_padvec.examples import litgpt_rope

    x = randn(1, 2, 4, 128, dtype=torch.bfloat16, generator=generator)
    cos, sin = randn(4, 128, dtype=torch.bfloat16, generator=generator), randn(4, 128, dtype=torch.bfloat16,
                                                                               generator=generator)
    jitted, out, _ = jit_and_run(litgpt_rope, x, cos, sin, 128)
    assert torch.equal(out, litgpt_rope(x, cos, sin, 128))
    report = _report(jitted)
    (seg,) = report.plan.segments
    assert (seg.threads_per_row, seg.steps, seg.rows_per_thread) == (8, ((0, 8), (8, 8)), 1)
    source = report.kernel_source
    assert source.count("args.in0 +") == 2  # x at c and c + 64: four uses, two loads
    assert source.count("args.in1 +") == 2 and source.count("args.in2 +") == 2  # cos and sin per step


def _gptj(generator, shape=(2, 4, 16, 32)):
    x = randn(*shape, dtype=torch.bfloat16, generator=generator)
    cos, sin = (randn(shape[-2], shape[-1] // 2, dtype=torch.bfloat16, generator=generator).repeat_interleave(2, -1)
                for _ in range(2))
    return x, cos, sin


def _gathered(fn, *args):
    """``(report, segment, gathers, output)`` of ``fn`` through padvec, its output checked against eager's."""
    from thunder_padvec.vectorize import gathers

    jitted, out, _ = jit_and_run(fn, *args)
    assert torch.equal(out, fn(*args))
    report = _report(jitted)
    (seg,) = report.plan.segments
    return report, seg, gathers.gathers(report.plan, seg), out


def test_gptj_halves_are_moved_from_the_registers_of_xs_own_vector(emulated, generator, monkeypatch):
    """GPT-J's strided halves of x read one element a lane, and each lane's element is one that x's own
    16-byte vector in the chunk holds: lane j of ``x[..., ::2]`` what lane ``j & ~1`` holds, of
    ``x[..., 1::2]`` what ``j | 1`` holds. They become register moves: x is read by one load a chunk,
    and the numbers do not change (bit for bit, as without the moves)."""
    from thunder_padvec.examples import gptj_rope
    from thunder_padvec.vectorize import gathers

    x, cos, sin = _gptj(generator)
    report, seg, found, out = _gathered(gptj_rope, x, cos, sin)
    sites = seg.segment.sites
    assert sorted(tuple(k for _, k in lanes) for lanes in found.values()) == [(0, 0, 2, 2, 4, 4, 6, 6),
                                                                            (1, 1, 3, 3, 5, 5, 7, 7)]
    (source,) = {s for lanes in found.values() for s, _ in lanes}
    kernel = report.kernel
    assert {kernel.node(sites[i].node).operand for i in found} == {"x"}  # the strided views of x
    assert getattr(kernel.node(sites[source].node), "operand", "x") == "x"
    assert dict(zip((s.id for s in sites), seg.widths))[source] == 8
    assert [a.access for a in report.accesses if a.width == 1] == ["gathered", "gathered"]
    assert report.kernel_source.count("args.in0 +") == 1  # x: one load a chunk

    monkeypatch.setattr(gathers, "GATHERS", False)
    jitted, without, _ = jit_and_run(gptj_rope, x, cos, sin)
    assert torch.equal(without, out)
    assert _report(jitted).kernel_source.count("args.in0 +") == 3


@pytest.mark.parametrize("fn", [
    lambda x, y: x[..., :16] * 2 + x[..., ::2],  # lanes 4 to 7 read x[8:16:2], past the full load's chunk
    lambda x, y: y[..., :16] * 2 + x[..., ::2],  # the full load is of another input
], ids=["outside-the-chunk", "another-input"])
def test_a_narrow_load_whose_elements_no_full_load_holds_reads_memory(emulated, generator, fn):
    from thunder_padvec.vectorize import gathers

    x, y = (randn(2, 4, 8, 32, dtype=torch.bfloat16, generator=generator) for _ in range(2))
    jitted, out, _ = jit_and_run(fn, x, y)
    assert torch.equal(out, fn(x, y))
    report = _report(jitted)
    assert all(gathers.gathers(report.plan, seg) == {} for seg in report.plan.segments)
    assert "gathered" not in [a.access for a in report.accesses]
    assert 1 in [a.width for a in report.accesses if a.role == "input"]


def test_a_half_that_every_batch_reads_from_the_first_is_not_moved_from_its_own_batchs_registers(emulated,
                                                                                                     generator):
    """GPT-J's rotary with ``x[..., ::2]`` taken from the first batch for both: in the first batch's
    threads its lanes are those of x's own vector, in the second's they are not (the address moves
    along the batch by 0 where x's moves by a whole batch): only ``x[..., 1::2]`` is moved."""

    def fn(x, cos, sin):
        x1 = x[:1, ..., ::2].expand(2, -1, -1, -1)
        rotated = torch.stack((-x[..., 1::2], x1), dim=-1).flatten(-2)
        return (x * cos + rotated * sin).to(x.dtype)

    report, seg, found, _ = _gathered(fn, *_gptj(generator))
    assert [tuple(k for _, k in lanes) for lanes in found.values()] == [(1, 1, 3, 3, 5, 5, 7, 7)]
    assert sorted(a.access for a in report.accesses if a.width == 1) == ["cached", "gathered"]


def _window_lanes(report, seg, name):
    """Per site of input ``name`` (through views) served by a window: its (window width, lane map)."""
    from thunder_padvec.vectorize import gathers

    found = gathers.gathers(report.plan, seg)
    out = []
    for site in seg.segment.sites:
        node = report.kernel.node(site.node)
        if site.id in found and getattr(node, "operand", node.name) == name:
            (width,) = {w.width for w, _ in found[site.id]}
            out.append((width, tuple(k for _, k in found[site.id])))
    return sorted(out)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_gptj_backward_reads_sin_through_one_window(emulated, generator, dtype):
    """GPT-J's backward reads sin at the even features of each pair for one output lane and at the odd
    ones for the other, one element a load; together they read every element of the chunk's 16 bytes:
    one vector load the kernel adds (a window), the lanes moved from it. Gradient as eager's."""
    from thunder_padvec.examples import gptj_rope

    x, cos, sin = (t.to(dtype) for t in _gptj(generator))
    cotangent = randn(*x.shape, dtype=dtype, generator=generator)
    jitted = thunder.jit(gptj_rope, executors=[padvec])
    (out,), grad = grads(jitted, x, cos, sin, (cotangent,))
    (want,), want_grad = grads(gptj_rope, x, cos, sin, (cotangent,))
    assert torch.equal(out, want)
    torch.testing.assert_close(grad, want_grad, rtol=0, atol=0) if dtype == torch.float32 else \
        torch.testing.assert_close(grad, want_grad)
    backward = explain(jitted)[-1]
    (seg,) = backward.plan.segments
    chunk = seg.chunk
    evens = tuple(j & ~1 for j in range(chunk))
    odds = tuple(j | 1 for j in range(chunk))
    assert _window_lanes(backward, seg, "sin") == sorted([(chunk, evens), (chunk, odds)])
    assert [a.access for a in backward.accesses if a.tensor.startswith("sin")] == ["window", "window"]


def test_hugging_faces_gptj_rotary_reads_its_repeated_sin_and_cos_through_windows(emulated, generator):
    """Its sin and cos: two lanes a pair read one element of ``sincos`` (float32): a window of 16
    bytes for every 8 lanes (lane j reads element j // 2), forward and backward; numbers as eager's.
    The forward's 16 rotated float32 features (64 bytes) take a segment of their own, cut along the
    pairs' dim, and only that segment reads ``sincos``; the backward's (bfloat16, 32 bytes) do not."""
    from thunder_padvec.examples import hf_gptj_rope

    x = randn(2, 8, 4, 64, dtype=torch.bfloat16, generator=generator)
    sincos = randn(2, 8, 16, generator=generator)
    cotangent = randn(2, 8, 4, 64, generator=generator)
    jitted = thunder.jit(hf_gptj_rope, executors=[padvec])
    (out,), grad = grads(jitted, x, sincos, 16, (cotangent,))  # (sincos and the rotary dim in cos's and sin's place)
    (want,), want_grad = grads(hf_gptj_rope, x, sincos, 16, (cotangent,))
    assert torch.equal(out, want)
    torch.testing.assert_close(grad, want_grad)
    for report, pieces in zip(explain(jitted), ([(8, 2), (24, 2)], [(32, 2)])):
        assert [s.segment.shape[-2:] for s in report.plan.segments] == pieces
        (sincos_name,) = [n.name for n in report.kernel.inputs if n.type.dtype.itemsize == 4 and n.type.rank == 3]
        rotated, *passed = report.plan.segments
        halves = tuple(j // 2 % 4 for j in range(rotated.chunk))
        lanes = _window_lanes(report, rotated, sincos_name)
        assert lanes and all(lane_map == halves for _, lane_map in lanes), lanes
        assert not [s for seg in passed for s in seg.segment.sites
                    if getattr(report.kernel.node(s.node), "operand", s.node) == sincos_name]


def test_hugging_faces_llama_rotary_reads_transposed_q_and_k_in_16_byte_vectors(emulated, generator):
    """Hugging Face's Llama rotary: q and k the transposes of ``[B, T, heads, head_size]`` views (rows
    of a head strided by the heads), cos and sin one row per position of each sequence. One kernel each
    way, every tensor at 16 bytes (8 bf16 lanes) though q and k are not contiguous; outputs and
    gradients as eager's."""
    from thunder_padvec.examples import hf_llama_rope

    q, k = (randn(2, 16, heads, 64, dtype=torch.bfloat16, generator=generator).transpose(1, 2) for heads in (4, 2))
    cos, sin = (randn(2, 16, 64, dtype=torch.bfloat16, generator=generator) for _ in range(2))
    cotangents = [randn(2, heads, 16, 64, dtype=torch.bfloat16, generator=generator) for heads in (4, 2)]

    def run(fn):
        leaves = [t.detach().requires_grad_(True) for t in (q, k)]
        outs = fn(*leaves, cos, sin)
        torch.autograd.backward(outs, cotangents)
        return [o.detach() for o in outs] + [leaf.grad for leaf in leaves]

    jitted = thunder.jit(hf_llama_rope, executors=[padvec])
    for got, want in zip(run(jitted), run(hf_llama_rope)):
        assert torch.equal(got, want)
    reports = explain(jitted)
    assert [r.trace for r in reports] == ["forward", "backward"]
    for report in reports:
        assert report.widths and set(report.widths.values()) == {8}, report.widths
    assert not q.is_contiguous() and any(a.tensor == "q" and a.width == 8 for a in reports[0].accesses)


def test_no_window_where_a_bound_of_the_rotated_features_falls_inside_a_chunk(emulated, generator):
    """GPT-J's rotary of 4 of 16 bf16 features: a chunk of 8 lanes holds the 4 rotated and 4 passed
    through, so a window of sin's 8 elements would reach past sin's row of 4 (into the next row, or past
    the end of sin) for lanes that do not need it: the backward's sin loads stay the lanes' own (emulation
    checks every access against the tensors), and the numbers are eager's."""
    from thunder_padvec.examples import gptj_rope

    def rotate_four(x, cos, sin):
        return gptj_rope(x, cos, sin, 4)

    x = randn(2, 4, 8, 16, dtype=torch.bfloat16, generator=generator)
    cos, sin = (randn(8, 2, dtype=torch.bfloat16, generator=generator).repeat_interleave(2, -1) for _ in range(2))
    cotangent = randn(*x.shape, dtype=torch.bfloat16, generator=generator)
    jitted = thunder.jit(rotate_four, executors=[padvec])
    (out,), grad = grads(jitted, x, cos, sin, (cotangent,))
    (want,), want_grad = grads(rotate_four, x, cos, sin, (cotangent,))
    assert torch.equal(out, want)
    torch.testing.assert_close(grad, want_grad)
    backward = explain(jitted)[-1]
    assert [a.access for a in backward.accesses if a.tensor.startswith("sin")] == ["cached", "direct"]


@pytest.mark.parametrize("groups, sharing", [(1, None), (2, None), (8, None), (8, 0.6)])
def test_grouped_query_heads_of_a_thread_share_their_key_and_value_loads(
        emulated, generator, monkeypatch, groups, sharing):
    """The qkv form with grouped queries: a thread's rows are heads of one query group, so the
    expanded key and value rows they read are loaded once for all of them. Without grouping, 4 heads
    cut a row's loads from 8 vectors to 5 (cos and sin shared): taken at ``ROW_SHARING`` 0.7, not at 0.6."""
    import functools

    from thunder_padvec import schedule
    from thunder_padvec.examples import qkv_split_rope

    monkeypatch.setattr(schedule.TUNING, "min_threads", 0)
    if sharing is not None:
        monkeypatch.setattr(vectorize_plan, "ROW_SHARING", sharing)
    nh, hs, T = 8, 128, 3
    qkv = randn(2, T, (nh + 2 * groups) * hs, dtype=torch.bfloat16, generator=generator)
    cos, sin = (randn(T, hs, dtype=torch.bfloat16, generator=generator) for _ in range(2))
    fn = functools.partial(qkv_split_rope, n_head=nh, n_query_groups=groups, head_size=hs, rope_n_elem=hs)
    jitted, outs, _ = jit_and_run(fn, qkv, cos, sin)
    for out, ref in zip(outs, fn(qkv, cos, sin)):
        assert torch.equal(out, ref)
    report = _report(jitted)
    (seg,) = report.plan.segments
    # hoisted loads, plain or kept in the L2 (the shared keys of these small tensors)
    loads = [line for line in report.kernel_source.splitlines() if re.search(r"padvec_load(_keep)?<8>\(g", line)]
    if sharing == 0.6:  # no group shares keys: q's and k's loads per row are 2 + 2 + 4 for cos and sin, and
        # 4 rows cut them to 5 per row only (more than 0.6 of 8): one row per thread
        assert (seg.threads_per_row, seg.row_dim, seg.rows_per_thread) == (8, None, 1), str(report)
        assert len([x for x in loads if "args.in0" in x]) == 2 + 2, "\n".join(loads)
        return
    assert (seg.threads_per_row, seg.row_dim, seg.rows_per_thread) == (8, 1, 4), str(report)
    # q: x at c and c + 64 for each of the 4 rows; k the same and v one per step, for each distinct
    # group among the rows (v is a view of qkv, made by PyTorch, without grouping; one group: k is broadcast)
    expected = {1: 8 + 2, 2: 8 + 4, 8: 8 + 2 * 4}[groups]
    assert len([x for x in loads if "args.in0" in x]) == expected, "\n".join(loads)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_an_output_permuted_by_its_consumer_is_written_in_that_order(emulated, generator, dtype):
    """A fused value whose one consumer permutes it (keeping the innermost dim) is allocated so the
    permute is contiguous: the reshape after it is a view, and stores keep their full width."""
    def fn(a, b):
        y = torch.cat([a * 2, F.pad(b, (0, 0, 0, 0, 0, 1)) + 1], dim=1)  # [2, 5, 3, 16]
        return y.permute(0, 2, 1, 3).reshape(2, 3, 80)

    a = randn(2, 3, 3, 16, dtype=dtype, generator=generator)
    b = randn(2, 1, 3, 16, dtype=dtype, generator=generator)
    jitted, out, _ = jit_and_run(fn, a, b)
    assert torch.equal(out, fn(a, b)) and out.is_contiguous()
    report = _report(jitted)
    assert list(report.output_orders.values()) == [(0, 2, 1, 3)], str(report)
    assert "allocated so that its permute (0, 2, 1, 3) is contiguous" in str(report)
    assert set(_store_widths(report)) == {16 // dtype.itemsize}, str(report)


@pytest.mark.parametrize("narrow_max_threads, mapping", [
    (1 << 20, "rows shared by 4 threads, 4-lane chunks, 5 steps"),
    (0, "a row per thread in 8-lane chunks, staged in shared memory, 2 column group(s)"),
])
def test_small_launches_split_short_slabs_into_narrower_chunks(emulated, generator, monkeypatch, narrow_max_threads,
                                                               mapping):
    """pythia's rows (64 features, halves of 8): 8-lane chunks leave too many threads idle, so a small
    launch shares rows in 4-lane chunks whose edges meet the halves; a large one stages its rows."""

    monkeypatch.setattr(vectorize_plan, "NARROW_MAX_THREADS", narrow_max_threads)
    report, seg = _roped(generator, (2, 3, 8, 64), 16)
    assert seg.mapping.endswith(mapping)
    if seg.staged:  # two warps split each row: the block's tile is shared, so the block waits
        assert "__syncthreads()" in report.kernel_source and "__syncwarp()" not in report.kernel_source
    assert set(seg.widths) | set(seg.store_widths) <= {seg.chunk} | {1, 2, 4} and max(seg.store_widths) == seg.chunk


@pytest.mark.parametrize("team_scale, mapping", [
    (1, "rows shared by 4 threads, 4-lane chunks, 5 steps"),
    (2, "rows shared by 8 threads, 4-lane chunks, 4 steps"),
    (4, "rows shared by 16 threads, 4-lane chunks, 3 steps"),
    (16, "rows shared by 4 threads, 4-lane chunks, 5 steps"),  # 64 threads a row: more than a warp
])
def test_wider_teams_share_a_row_among_more_threads(emulated, generator, monkeypatch, team_scale, mapping):
    """pythia's rows (64 features, halves of 8, in 4-lane chunks) in teams ``team_scale`` times wider,
    as a launch whose last wave is mostly idle is planned again (``fusion._with_wider_teams``): the same
    chunks, fewer a thread, and every element written once (outputs poisoned) and equal to eager's. A
    team wider than a warp stays as planned, and so does a team of 6 (``exact_threads``)."""

    monkeypatch.setattr(schedule.TUNING, "team_scale", team_scale)
    report, seg = _roped(generator, (2, 3, 8, 64), 16)
    assert seg.mapping.endswith(mapping), seg.mapping
    assert (seg.groups, seg.rows_per_thread, seg.lane_steps) == (2 * 3 * 8, 1, 1)  # a team a row, in turn
    assert report.launch.segments[0].groups == 2 * 3 * 8  # teams launched: their threads take the row's chunks
    kernel = report.plan.projection.kernel
    assert vectorize_plan.wider_teams(kernel, seg.segment, seg.chunk, (6, seg.steps), 2) == (6, seg.steps)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_a_sum_of_a_few_elements_reads_each_at_full_width(emulated, generator, dtype):
    """The gradient of an expand: a sum over an outer dim of 4 reads its operand at 4 index maps, each
    a whole row at full width; the sum runs in float32 and matches eager and a float64 reference."""
    def fn(x, c):
        return (x * c).sum(dim=1)

    x = randn(3, 4, 5, 32, dtype=dtype, generator=generator)
    c = randn(32, dtype=dtype, generator=generator)
    jitted, out, trace = jit_and_run(fn, x, c)
    assert not unfused_ops(trace)
    want, exact = fn(x, c), fn(x.double(), c.double())
    torch.testing.assert_close(out, want, rtol=0 if dtype == torch.float32 else 1e-2, atol=1e-5)
    assert (out.double() - exact).abs().max() <= 2 * (want.double() - exact).abs().max() + 1e-6
    report = _report(jitted)
    (seg,) = report.plan.segments
    x_name = next(i.name for i in report.kernel.inputs if i.type.rank == 4)
    x_sites = [s for s in seg.segment.sites if s.node == x_name]
    assert sorted(s.index_map[1] for s in x_sites) == [(None, r) for r in range(4)]
    vector = 16 // dtype.itemsize
    assert {seg.widths[s.id] for s in x_sites} == {vector} and seg.store_widths == (vector,)


def test_a_sum_over_a_padded_dim_never_loads_the_points_the_pad_fills(emulated, generator):
    """A sum over a dim that a pad widened reads the padded value at each point of the dim, constant
    coordinates; at a point the pad fills, x's index is out of bounds and x is not loaded there (it was
    loaded and dropped once: a read before x's first element, which emulation's access check catches),
    and at a point a negative width cut, nothing is read either. Matches eager."""
    def fn(x):
        return torch.nn.functional.pad(x, (0, 0, 2, -1, 1, 1), value=0.25).sum(dim=1)

    x = randn(2, 5, 3, generator=generator)
    jitted, out, trace = jit_and_run(fn, x)
    assert not unfused_ops(trace)
    torch.testing.assert_close(out, fn(x), rtol=1e-6, atol=1e-6)
    (seg,) = _report(jitted).plan.segments
    x_name = _report(jitted).kernel.inputs[0].name
    rows = sorted(s.index_map[1] for s in seg.segment.sites if s.node == x_name)
    assert rows == [(None, r) for r in range(4)]  # x's rows 0 to 3: 4 is cut, points 0 and 1 are the pad's


def test_a_sum_over_a_cat_dim_loads_each_piece_at_its_own_points(emulated, generator):
    """A sum over the dim a cat joins: each piece is loaded at its own points of the dim only (2 of a's,
    5 of b's), none at the points the other piece covers. Matches eager."""
    def fn(a, b):
        return torch.cat([a * 2, -b], dim=1).sum(dim=1)

    a, b = randn(3, 2, 8, generator=generator), randn(3, 5, 8, generator=generator)
    jitted, out, trace = jit_and_run(fn, a, b)
    assert not unfused_ops(trace)
    torch.testing.assert_close(out, fn(a, b), rtol=1e-6, atol=1e-6)
    report = _report(jitted)
    (seg,) = report.plan.segments
    a_name, b_name = (i.name for i in report.kernel.inputs)
    points = {name: sorted(s.index_map[1] for s in seg.segment.sites if s.node == name) for name in (a_name, b_name)}
    assert points == {a_name: [(None, r) for r in range(2)], b_name: [(None, r) for r in range(5)]}


def test_sums_padvec_leaves_to_pytorch(emulated, generator):
    """More than 16 elements per sum, and integer sums, are not claimed; the results still match."""
    x = randn(3, 17, 8, generator=generator)
    jitted, out, _ = jit_and_run(lambda t: (t * 2).sum(dim=1), x)
    assert torch.equal(out, (x * 2).sum(dim=1))
    assert all("sum" not in r.ops for r in explain(jitted))


def test_an_outer_cat_output_takes_a_segment_per_piece(emulated, generator):
    """Each piece of a cat along an outer dim is a segment of its own: its threads load only their
    piece's inputs and store at the piece's offset."""
    def fn(a, b, c):
        return torch.cat([a * 2, b.sum(dim=1, keepdim=True), -c], dim=1)

    a = randn(2, 3, 4, 16, dtype=torch.bfloat16, generator=generator)
    b = randn(2, 3, 4, 16, dtype=torch.bfloat16, generator=generator)
    c = randn(2, 1, 4, 16, dtype=torch.bfloat16, generator=generator)
    jitted, out, _ = jit_and_run(fn, a, b, c)
    assert torch.equal(out, fn(a, b, c))
    report = _report(jitted)
    segments = report.plan.segments
    assert [s.segment.shape for s in segments] == [(2, 3, 4, 16), (2, 1, 4, 16), (2, 1, 4, 16)]
    assert [s.segment.stores[0].offsets for s in segments] == [(0, 0, 0, 0), (0, 3, 0, 0), (0, 4, 0, 0)]
    names = [i.name for i in report.kernel.inputs]
    loaded = [sorted({names.index(s.node) for s in seg.segment.sites if s.node in names}) for seg in segments]
    assert loaded == [[0], [1], [2]]


# (id, head size, rotated features, column ranges of the segments); bf16 rows
ROW_PIECE_CASES = [
    ("phi-2-partial", 80, 32, [(0, 32), (32, 80)]),  # rotated halves read each other's x; the rest is passed on
    ("llama-full", 64, 64, [(0, 64)]),  # both halves read each other's x: one piece
    ("rotated-16-bytes", 32, 8, [(0, 32)]),  # the seed's: a rotated piece of 16 bytes is below the minimum
]


@pytest.mark.parametrize("sharing, rows", [(None, 2), (0.6, 1)])
def test_the_rotated_piece_of_partial_rotary_takes_two_heads_per_thread(emulated, generator, monkeypatch,
                                                                       sharing, rows):
    """phi-2's rotated piece loads x, cos and sin at its 4 columns of a row (6 vectors); 2 heads per
    thread share cos and sin, 8 vectors for 2 rows: 67% of a row's loads, within ``ROW_PIECE_SHARING``
    (0.8, the threshold of pieces of rows), so the piece takes 2 heads (a launch floor that allows 2, not
    4); at 0.6 one. The piece passed through loads nothing broadcast: one head. Every element is written
    once and equals eager."""
    from thunder_padvec.examples import litgpt_rope

    monkeypatch.setattr(vectorize_segments, "ROW_PIECES", True)
    monkeypatch.setattr(schedule.TUNING, "min_threads", 500)  # 296 rows: 148 pairs of 4 threads, not 74
    if sharing is not None:
        monkeypatch.setattr(vectorize_plan, "ROW_PIECE_SHARING", sharing)
    x = randn(2, 4, 37, 80, dtype=torch.bfloat16, generator=generator)
    cos, sin = (randn(37, 32, dtype=torch.bfloat16, generator=generator) for _ in range(2))
    jitted, out, _ = jit_and_run(litgpt_rope, x, cos, sin, 32)
    assert torch.equal(out, litgpt_rope(x, cos, sin, 32))
    report = _report(jitted)
    rotated, passed = report.plan.segments
    assert (rotated.row_dim, rotated.rows_per_thread) == ((1, rows) if rows > 1 else (None, 1)), str(report)
    assert passed.rows_per_thread == 1, str(report)


@pytest.mark.parametrize("sharing, rows", [(None, 2), (0.7, 1)])
def test_the_rotated_pieces_of_the_qkv_form_take_two_heads_per_thread(emulated, generator, monkeypatch,
                                                                      sharing, rows):
    """phi-2's qkv form: q's and k's rotated pieces cut a row's loads to 75% with 2 heads a thread,
    above ``ROW_SHARING`` (0.7) but within ``ROW_PIECE_SHARING`` (0.8), the threshold of pieces of rows
    (a piece holds fewer registers than a whole row): 2 heads; at 0.7 one."""
    import functools

    from thunder_padvec.examples import qkv_split_rope

    monkeypatch.setattr(vectorize_segments, "ROW_PIECES", True)
    monkeypatch.setattr(schedule.TUNING, "min_threads", 500)  # 296 rows a piece: 2 heads a thread, not 4
    if sharing is not None:
        monkeypatch.setattr(vectorize_plan, "ROW_PIECE_SHARING", sharing)
    qkv = randn(2, 37, (4 + 2 * 4) * 80, dtype=torch.bfloat16, generator=generator)
    cos, sin = (randn(37, 32, dtype=torch.bfloat16, generator=generator) for _ in range(2))
    fn = functools.partial(qkv_split_rope, n_head=4, n_query_groups=4, head_size=80, rope_n_elem=32)
    jitted, outs, _ = jit_and_run(fn, qkv, cos, sin)
    for out, ref in zip(outs, fn(qkv, cos, sin)):
        assert torch.equal(out, ref)
    report = _report(jitted)
    rotated = [s for s in report.plan.segments if s.segment.row_piece and s.segment.shape[-1] == 32]
    assert rotated and {s.rows_per_thread for s in rotated} == {rows}, str(report)  # q's and k's: one segment


def test_a_plain_cat_of_rows_stays_one_segment(emulated, generator):
    """Pieces that read different tensors but none of them at two shifts (no rotation) keep one segment."""
    a, b = randn(4, 5, 64, dtype=torch.bfloat16, generator=generator), randn(4, 5, 64, dtype=torch.bfloat16,
                                                                             generator=generator)
    jitted, out, _ = jit_and_run(lambda a, b: torch.cat((a, b), -1), a, b)
    assert torch.equal(out, torch.cat((a, b), -1))
    assert len(_report(jitted).plan.segments) == 1


@pytest.mark.parametrize("case", ROW_PIECE_CASES, ids=[c[0] for c in ROW_PIECE_CASES])
def test_rows_split_where_their_pieces_read_no_common_columns(emulated, generator, monkeypatch, case):
    """With ``ROW_PIECES``, partial rotary's rows become two segments: the rotated features (whose
    halves read each other's x, cos and sin) and the features passed through, each stored at its own
    column offset of the output; a thread then holds only its piece's registers. Rows whose slabs all
    read each other's columns, or whose pieces would be narrower than ``MIN_ROW_PIECE_BYTES``, stay whole.
    Every element is written once (outputs poisoned with NaN) and equals eager."""
    from thunder_padvec.examples import litgpt_rope

    monkeypatch.setattr(vectorize_segments, "ROW_PIECES", True)
    _, hs, n, pieces = case
    x = randn(2, 4, 37, hs, dtype=torch.bfloat16, generator=generator)
    cos, sin = (randn(37, n, dtype=torch.bfloat16, generator=generator) for _ in range(2))
    jitted, out, _ = jit_and_run(litgpt_rope, x, cos, sin, n)
    assert torch.equal(out, litgpt_rope(x, cos, sin, n))
    report = _report(jitted)
    widths = [seg.segment.shape[-1] for seg in report.plan.segments]
    offsets = [seg.segment.stores[0].offsets[-1] for seg in report.plan.segments]
    assert list(zip(offsets, [o + w for o, w in zip(offsets, widths)])) == pieces, str(report)
    assert report.launch.interleave == (len(pieces) > 1), str(report)  # pieces' blocks interleaved
    if len(pieces) > 1:  # the passed piece is a copy: one 16-byte chunk per thread, no steps idle
        rotated, passed = report.plan.segments
        assert rotated.tiled and (rotated.chunk, rotated.steps) == (4, ((0, 4), (4, 4))), rotated.mapping
        assert (passed.chunk, passed.widths[0]) == (8, 8), passed.mapping
