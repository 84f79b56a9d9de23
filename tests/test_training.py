"""Training: RoPE's backward through padvec, and a small attention block trained for a few steps.

Gradients are compared with eager's and with a float64 reference: padvec's error is at most twice
eager's (it keeps the same rounding steps, so it is usually equal). The CPU cases run in emulation at
tiny shapes; the ``gpu`` cases repeat them on the device, where backward runs on autograd's thread.
"""

import functools
import importlib
import re

import pytest
import thunder
import torch

from helpers import grads, randn, train_beside_eager
from thunder_padvec import explain, padvec, padvec_cat
from thunder_padvec.bench.cases import in_output_layouts
from thunder_padvec.examples import AttentionBlock, LlamaBlock, litgpt_rope, qkv_split_rope, rope_one_entry
from thunder_padvec.executor import _whole_lines

# (id, program, x shape, rope_n_elem, extra kwargs) ; programs take (x, cos, sin)
GRAD_CASES = [
    ("seed", rope_one_entry, (2, 3, 8, 32), 8, {}),
    ("llama-full", litgpt_rope, (2, 3, 8, 64), 64, {}),
    ("phi2-partial", litgpt_rope, (2, 3, 8, 80), 32, {}),
    ("qkv-gqa", qkv_split_rope, (2, 8, (4 + 2 * 2) * 32), 32, dict(n_head=4, n_query_groups=2, head_size=32)),
    ("qkv-gqa4", qkv_split_rope, (1, 8, (8 + 2 * 2) * 32), 32, dict(n_head=8, n_query_groups=2, head_size=32)),
    # a key and value head per query head, rows of 128 bytes in bf16: q and k in eager's order, heads inner to tokens
    ("qkv-mha", qkv_split_rope, (2, 8, (4 + 2 * 4) * 64), 64, dict(n_head=4, n_query_groups=4, head_size=64)),
]


def _check_gradients(case, device, dtype, generator, cotangents_as_outputs=False):
    """``cotangents_as_outputs``: the cotangents laid out as padvec's forward outputs are (heads inner to
    tokens where its qkv-form outputs are), as an attention's backward hands them over in training."""
    _, program, shape, n, kwargs = case
    fn = functools.partial(program, rope_n_elem=n, **kwargs)
    x = randn(*shape, dtype=dtype, device=device, generator=generator)
    cos = randn(shape[-2] if program is not qkv_split_rope else shape[1], n, dtype=dtype, device=device,
                generator=generator)
    sin = randn(*cos.shape, dtype=dtype, device=device, generator=generator)
    reference_outs = fn(x, cos, sin)
    reference_outs = reference_outs if isinstance(reference_outs, tuple) else (reference_outs,)
    cotangents = [randn(*o.shape, dtype=dtype, device=device, generator=generator) for o in reference_outs]

    jitted = thunder.jit(fn, executors=[padvec])
    if cotangents_as_outputs:
        cotangents = in_output_layouts(jitted, (x.detach().requires_grad_(True), cos, sin), cotangents)
    outs, grad = grads(jitted, x, cos, sin, cotangents)
    eager_outs, eager_grad = grads(fn, x, cos, sin, cotangents)
    _, exact_grad = grads(fn, x.double(), cos.double(), sin.double(), [c.double() for c in cotangents])
    for out, want in zip(outs, eager_outs):
        assert torch.equal(out, want)
        # where rows are whole cache lines, the qkv form's outputs are heads inner to tokens, as qkv holds them
        # (eager's order for qkv-mha's q and k, executor._eager_orders; the grouped form's q, k and v, row-major
        # in eager, executor._source_orders) and the others eager's; else row-major (rows of 64 bytes in bf16)
        # (a view of qkv is eager's view: qkv-mha's v)
        if not _whole_lines(want.shape, want.element_size()):
            laid_out = out.is_contiguous()
        else:
            laid_out = program is qkv_split_rope and out.permute(0, 2, 1, 3).is_contiguous()
        assert out.stride() == want.stride() or laid_out, (out.stride(), want.stride())
    padvec_error = (grad.double() - exact_grad).abs().max().item()
    eager_error = (eager_grad.double() - exact_grad).abs().max().item()
    assert padvec_error <= 2 * eager_error + 1e-6, (padvec_error, eager_error)
    reports = explain(jitted)
    assert {r.trace for r in reports} == {"forward", "backward"}  # both passes run padvec kernels
    if program is qkv_split_rope:  # qkv's gradient: written in the order of the permute that follows
        orders = [order for r in reports if r.trace == "backward" for order in r.output_orders.values()]
        assert orders == [(0, 3, 1, 2, 4)], [str(r) for r in reports]
        assert grad.is_contiguous()
        # the whole backward in one kernel (the sums over each group's heads too), a segment per q, k, v piece
        # (rows cut into pieces, see vectorize.segments.ROW_PIECES, add a segment per piece after the first)
        (backward,) = [r for r in reports if r.trace == "backward"]
        first_pieces = [seg for seg in backward.plan.segments if not seg.segment.stores[0].offsets[-1]]
        assert [seg.segment.shape[2] for seg in first_pieces] == [kwargs["n_head"] // kwargs["n_query_groups"], 1, 1]
        # q's, k's and v's segments run one after the other; only pieces of cut rows interleave
        assert backward.launch.interleave == (len(backward.plan.segments) > 3), str(backward)
    return grad, eager_grad, jitted


@pytest.mark.parametrize("case", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
def test_rope_gradients(emulated, generator, case, dtype):
    _check_gradients(case, "cpu", dtype, generator)


# the qkv form where padvec's outputs are heads inner to tokens (rows of whole cache lines)
LAID_OUT_CASES = [GRAD_CASES[5], ("qkv-gqa-lines", qkv_split_rope, (1, 8, (4 + 2 * 2) * 64), 64,
                                  dict(n_head=4, n_query_groups=2, head_size=64))]


@pytest.mark.parametrize("case", LAID_OUT_CASES, ids=[c[0] for c in LAID_OUT_CASES])
def test_rope_gradients_with_cotangents_laid_out_as_the_outputs(emulated, generator, case):
    """The qkv form's backward reading cotangents in the layout of padvec's outputs (q, k and v heads inner to
    tokens, as qkv holds them), as an attention's backward hands them over in training: its gradient is
    eager's within the float64 bound, and the kernel was specialized to those strides (not row-major ones)."""
    _, _, jitted = _check_gradients(case, "cpu", torch.bfloat16, generator, cotangents_as_outputs=True)
    (backward,) = [r for r in explain(jitted) if r.trace == "backward"]
    read = {layout.strides for layout in backward.plan.layouts}
    _, _, shape, n, _ = case
    x = randn(*shape, dtype=torch.bfloat16, generator=generator).requires_grad_(True)
    cos = randn(shape[1], n, dtype=torch.bfloat16, generator=generator)
    outs = jitted(x, cos, cos)
    laid = [torch.empty_like(o.detach()).stride() for o in outs]
    assert all(s != torch.empty(o.shape).stride() for s, o in zip(laid, outs)), laid  # none row-major
    assert set(laid) <= read, (laid, read)


@pytest.mark.parametrize("case", GRAD_CASES[1:4], ids=[c[0] for c in GRAD_CASES[1:4]])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_float_twins_and_word_pairs_leave_the_gradients_bit_for_bit(emulated, generator, monkeypatch, case, dtype):
    """Float twins (selects, pads and casts of a 16-bit value read as the float it came from) and word
    pairs are exact: forward and backward built with both and with neither give the same bits."""
    render = importlib.import_module("thunder_padvec.codegen.render")
    from thunder_padvec import schedule

    _, program, shape, n, kwargs = case
    fn = functools.partial(program, rope_n_elem=n, **kwargs)
    x = randn(*shape, dtype=dtype, generator=generator)
    cos = randn(shape[-2] if program is not qkv_split_rope else shape[1], n, dtype=dtype, generator=generator)
    sin = randn(*cos.shape, dtype=dtype, generator=generator)
    outs = fn(x, cos, sin)
    outs = outs if isinstance(outs, tuple) else (outs,)
    cotangents = [randn(*o.shape, dtype=dtype, generator=generator) for o in outs]
    results, sources = [], []
    for lean in (True, False):
        monkeypatch.setattr(render, "FLOAT_TWINS", lean)
        monkeypatch.setattr(schedule.TUNING, "word_pairs", lean)
        jitted = thunder.jit(fn, executors=[padvec])
        results.append(grads(jitted, x, cos, sin, cotangents))
        sources.append({r.trace: r.source for r in explain(jitted)})
    (outs, grad), (plain_outs, plain_grad) = results
    assert all(torch.equal(a, b) for a, b in zip(outs, plain_outs))
    assert torch.equal(grad, plain_grad)
    twin = re.compile(r"float t\d+\[\d+\];")  # a twin's declaration
    assert twin.search(sources[0]["backward"]) and not twin.search(sources[1]["backward"])


def test_a_segment_without_rows_takes_several_vectors_a_thread_and_loads_them_all_before_its_stores(
        emulated, generator, monkeypatch):
    """``vectorize.plan.PLAIN_VECTORS`` (an experiment, 1 by default): the grouped-query backward's v piece
    (the cotangent's heads of a group summed) takes two 16-byte vectors a thread; every load of the thread
    comes before its stores, and the gradients stay right."""
    plan = importlib.import_module("thunder_padvec.vectorize.plan")
    monkeypatch.setattr(plan, "PLAIN_VECTORS", 2)
    _, _, jitted = _check_gradients(GRAD_CASES[3], "cpu", torch.bfloat16, generator)
    (backward,) = [r for r in explain(jitted) if r.trace == "backward"]
    index, v_piece = next((i, s) for i, s in enumerate(backward.plan.segments) if not s.whole_rows)
    assert (v_piece.lanes, v_piece.chunk) == (16, 16) and v_piece.segment.shape[-1] == 32, v_piece.mapping
    body = backward.source.split(f"padvec_segment{index}(", 1)[1].split("\n}\n", 1)[0]
    loads = [m.start() for m in re.finditer(r"padvec_load\w*<", body)]
    stores = [m.start() for m in re.finditer(r"padvec_store\w*<", body)]
    # the two heads of each group summed: one load of two vectors for each, both before the stores
    assert len(loads) == 2 and stores and max(loads) < min(stores), body
    assert body.count("for (int j = 0; j < 16; j += 8)") == 3, body  # two loads and the store, two vectors each


@pytest.mark.gpu
@pytest.mark.parametrize("case", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_rope_gradients_on_the_gpu(generator, case):
    grad, eager_grad, _ = _check_gradients(case, "cuda", torch.bfloat16, generator)
    assert torch.equal(grad, eager_grad)


# Phi-3-mini's rows of 96: halves of 6 chunks of 8, taken by teams of 6 threads (where the launch keeps
# its thread floor; lifted in these tests so that tiny shapes take them too)
TEAM_CASES = [
    ("phi3-rows", litgpt_rope, (1, 4, 8, 96), 96, {}),
    ("qkv-phi3-rows", qkv_split_rope, (1, 8, (4 + 2 * 4) * 96), 96, dict(n_head=4, n_query_groups=4, head_size=96)),
]


def _check_teams_of_six(case, device, generator, monkeypatch):
    from thunder_padvec import schedule

    monkeypatch.setattr(schedule.TUNING, "min_threads", 0)
    grad, eager_grad, jitted = _check_gradients(case, device, torch.bfloat16, generator)
    teams = {r.trace: {seg.threads_per_row for seg in r.plan.segments} for r in explain(jitted)}
    assert 6 in teams["forward"] and 6 in teams["backward"], teams
    return grad, eager_grad


# phi-2's partial rotary (rows of 80, 32 rotated), its rows cut into the rotated and the passed features
PIECE_CASES = [
    ("phi2-rows", litgpt_rope, (1, 4, 8, 80), 32, {}),
    ("qkv-phi2-rows", qkv_split_rope, (1, 8, (4 + 2 * 2) * 80), 32, dict(n_head=4, n_query_groups=2, head_size=80)),
]


def _check_row_pieces(case, device, generator, monkeypatch):
    grad, eager_grad, jitted = _check_gradients(case, device, torch.bfloat16, generator)
    split = set()
    for report in explain(jitted):  # rotated rows of 80 in two pieces: columns 0-32 and 32-80
        pieces = [(seg.segment.stores[0].offsets[-1], seg.segment.shape[-1]) for seg in report.plan.segments]
        if (0, 32) in pieces:
            assert pieces.count((0, 32)) == pieces.count((32, 48)), (report.trace, pieces)
            assert report.launch.interleave, str(report)  # the pieces of a row run side by side
            split.add(report.trace)
    assert split == {"forward", "backward"}, split  # the qkv forward's joint q-and-k segment too
    return grad, eager_grad


# each row plan's cases and the check of the plan the kernels took
ROW_PLAN_CASES = [(_check_teams_of_six, c) for c in TEAM_CASES] + [(_check_row_pieces, c) for c in PIECE_CASES]
ROW_PLAN_IDS = [c[0] for _, c in ROW_PLAN_CASES]


@pytest.mark.parametrize("check, case", ROW_PLAN_CASES, ids=ROW_PLAN_IDS)
def test_rope_gradients_through_teams_of_six_and_rows_in_pieces(emulated, generator, monkeypatch, check, case):
    check(case, "cpu", generator, monkeypatch)


@pytest.mark.gpu
@pytest.mark.parametrize("check, case", ROW_PLAN_CASES, ids=ROW_PLAN_IDS)
def test_rope_gradients_through_teams_of_six_and_rows_in_pieces_on_the_gpu(generator, monkeypatch, check, case):
    grad, eager_grad = check(case, "cuda", generator, monkeypatch)
    assert torch.equal(grad, eager_grad)


# grouped-query qkv with 64 positions: blocks of whole planes (a batch's group of 4 heads), 2 to 4 a plane
PLANE_CASE = ("qkv-gqa4-planes", qkv_split_rope, (2, 64, (8 + 2 * 2) * 64), 64,
              dict(n_head=8, n_query_groups=2, head_size=64))


def _check_plane_order(device, generator, monkeypatch):
    """Plane order (a launch variant the first call on a GPU times, ``runtime.tune``), here the default:
    consecutive blocks take the same positions of each group of heads, in the forward and in the
    backward, and the outputs and gradients are eager's."""
    from thunder_padvec import schedule

    monkeypatch.setattr(schedule.TUNING, "min_threads", 0)
    monkeypatch.setattr(schedule.TUNING, "plane_order", True)
    monkeypatch.setattr(schedule.TUNING, "reload_variant", False)  # a plan of one row a thread has no planes
    grad, eager_grad, jitted = _check_gradients(PLANE_CASE, device, torch.bfloat16, generator)
    ordered = {r.trace for r in explain(jitted) if "tile_index = (b %" in r.kernel_source}
    assert ordered == {"forward", "backward"}, [str(r) for r in explain(jitted)]
    return grad, eager_grad


def test_rope_gradients_in_plane_order(emulated, generator, monkeypatch):
    _check_plane_order("cpu", generator, monkeypatch)


@pytest.mark.gpu
def test_rope_gradients_in_plane_order_on_the_gpu(generator, monkeypatch):
    grad, eager_grad = _check_plane_order("cuda", generator, monkeypatch)
    assert torch.equal(grad, eager_grad)


TILE_CASES = [GRAD_CASES[2], GRAD_CASES[4], PLANE_CASE]


@pytest.mark.parametrize("case", TILE_CASES, ids=[c[0] for c in TILE_CASES])
def test_rows_taken_in_tiles_of_tokens_across_the_heads_change_no_value(emulated, monkeypatch, case):
    """Token tiles in every kernel that can take them (``codegen.render.ALL_TOKEN_TILES``, an experiment): each
    kernel of both passes renumbers its rows, 2 tokens of every head in turn. The outputs are eager's and the
    gradient is the one padvec gives in its own row order, bit for bit: the order moves no element's arithmetic."""
    render = importlib.import_module("thunder_padvec.codegen.render")
    monkeypatch.setattr(render, "ALL_TOKEN_TILES", True)
    monkeypatch.setattr(render, "TOKEN_TILES", 2)
    grad, _, jitted = _check_gradients(case, "cpu", torch.bfloat16, torch.Generator().manual_seed(7))
    assert {r.trace for r in explain(jitted) if "in_tile" in r.kernel_source} == {"forward", "backward"}
    monkeypatch.setattr(render, "TOKEN_TILES", 0)
    plain, _, jitted = _check_gradients(case, "cpu", torch.bfloat16, torch.Generator().manual_seed(7))
    assert not any("in_tile" in r.kernel_source for r in explain(jitted))
    assert torch.equal(grad, plain)


# Phi-3-mini's shape of heads: rows of 96 bf16, 192 bytes, each ending in the middle of a 128-byte line of qkv
SPLIT_LINE_CASE = ("qkv-mha-96", qkv_split_rope, (2, 8, (4 + 2 * 4) * 96), 96,
                   dict(n_head=4, n_query_groups=4, head_size=96))


def _check_token_tiles(device, generator):
    """Rows that end inside a cache line and lie apart along the tokens (qkv's heads of 192 bytes, read by the
    forward and written by the backward) are taken 4 tokens of every head in turn, in both passes; rows of whole
    lines (qkv-mha's 128 bytes) and rows that lie one after the other along the tokens (the RoPE form's x) keep
    their order."""
    grad, eager_grad, jitted = _check_gradients(SPLIT_LINE_CASE, device, torch.bfloat16, generator)
    tiled = [r for r in explain(jitted) if "in_tile" in r.kernel_source]
    assert {r.trace for r in tiled} == {"forward", "backward"}, [str(r) for r in explain(jitted)]
    assert all("% 4;" in r.kernel_source for r in tiled)  # tiles of TOKEN_TILES = 4 tokens
    for r in tiled:  # the explanation says which segments: those that read (forward) or write (backward) qkv
        assert any(r.token_tiles) and "rows in tiles of 4 tokens across the heads" in str(r), str(r)
        said = [line for line in r.segments if "tiles of 4 tokens" in line]
        assert len(said) == sum(t == 4 for t in r.token_tiles) and len(said) <= len(r.segments)
    for case in (GRAD_CASES[5], GRAD_CASES[1], GRAD_CASES[2]):  # qkv-mha, llama-full, phi2-partial
        _, _, other = _check_gradients(case, device, torch.bfloat16, generator)
        assert not any("in_tile" in r.kernel_source for r in explain(other)), case[0]
        assert not any(any(r.token_tiles) or "tiles of" in str(r) for r in explain(other)), case[0]
    return grad, eager_grad


def test_rows_that_end_inside_a_line_are_taken_in_tiles_of_tokens(emulated, generator):
    _check_token_tiles("cpu", generator)


@pytest.mark.gpu
def test_rows_that_end_inside_a_line_are_taken_in_tiles_of_tokens_on_the_gpu(generator, monkeypatch):
    from thunder_padvec import schedule

    monkeypatch.setattr(schedule.TUNING, "tokens_first_variant", False)  # the rule's tiles, not a timed variant's
    grad, eager_grad = _check_token_tiles("cuda", generator)
    assert torch.equal(grad, eager_grad)


def _check_tokens_first(device, generator, monkeypatch):
    """The launch variant tokens first (``LaunchParams.tokens_first``) as the default: the kernels that read
    qkv (the forward) or write its gradient (the backward), whose rows lie apart along the tokens, take a
    token of every head in turn (tiles of one token), whole-line rows (qkv-gqa's 64 bytes, qkv-mha's 128) and
    rows of 192 bytes alike, and the explanation says so; the RoPE form's kernels keep their order. Outputs
    and gradients are those of the default order, bit for bit."""
    from thunder_padvec import schedule

    monkeypatch.setattr(schedule.TUNING, "tokens_first_variant", False)  # no timed variant beside it on a GPU
    reloading = set()
    for case in (GRAD_CASES[3], GRAD_CASES[5], SPLIT_LINE_CASE):
        seed = generator.initial_seed()
        monkeypatch.setattr(schedule.TUNING, "tokens_first", True)
        grad, eager_grad, jitted = _check_gradients(case, device, torch.bfloat16, torch.Generator().manual_seed(seed))
        reports = explain(jitted)
        assert {r.trace for r in reports if 1 in r.token_tiles} == {"forward", "backward"}, case[0]
        reloading.update(seg.reloads for r in reports for seg in r.plan.segments)
        for r in reports:
            assert r.launch.tokens_first and "tokens first" in str(r.launch)
            said = [line for line in r.segments if "a token of every head in turn" in line]
            assert len(said) == r.token_tiles.count(1) and ("in_tile" in r.kernel_source) == bool(said)
        monkeypatch.setattr(schedule.TUNING, "tokens_first", False)
        plain, _, jitted = _check_gradients(case, device, torch.bfloat16, torch.Generator().manual_seed(seed))
        assert not any(1 in r.token_tiles for r in explain(jitted))
        assert torch.equal(grad, plain), case[0]
    monkeypatch.setattr(schedule.TUNING, "tokens_first", True)
    _, _, jitted = _check_gradients(GRAD_CASES[1], device, torch.bfloat16, generator)  # llama-full: x's rows in order
    assert not any("in_tile" in r.kernel_source or any(r.token_tiles) for r in explain(jitted))
    assert True in reloading or not importlib.import_module("thunder_padvec.vectorize.plan").ALL_RELOADS
    return grad, eager_grad


@pytest.mark.parametrize("reloads", [False, True], ids=["default", "lanes-reload"])
def test_rows_apart_along_the_tokens_taken_tokens_first_change_no_value(emulated, generator, monkeypatch, reloads):
    """... in the default plan and in the plan whose lanes reload (a chunk of one row a lane, forced), the
    two the first call on a GPU times tokens first."""
    monkeypatch.setattr(importlib.import_module("thunder_padvec.vectorize.plan"), "ALL_RELOADS", reloads)
    _check_tokens_first("cpu", generator, monkeypatch)


@pytest.mark.gpu
def test_rows_apart_along_the_tokens_taken_tokens_first_on_the_gpu(generator, monkeypatch):
    grad, eager_grad = _check_tokens_first("cuda", generator, monkeypatch)
    assert torch.equal(grad, eager_grad)


def _check_prefetches(case, device, generator, monkeypatch):
    """The gradients and the backward's report built with the L2 prefetches (``TUNING.prefetch``: every
    launch with ``LaunchParams.prefetch``) and without, the first call's timing off; both equal, bit for bit."""
    from thunder_padvec import schedule

    monkeypatch.setattr(schedule.TUNING, "tune_hints", False)
    seed = generator.initial_seed()
    built = []
    for prefetch in (True, False):
        monkeypatch.setattr(schedule.TUNING, "prefetch", prefetch)
        grad, eager_grad, jitted = _check_gradients(case, device, torch.bfloat16, torch.Generator().manual_seed(seed))
        (backward,) = [r for r in explain(jitted) if r.trace == "backward"]
        assert backward.launch.prefetch == prefetch
        assert ("padvec_prefetch<" in backward.kernel_source) == prefetch
        built.append((grad, backward))
    (grad, fetching), (plain, backward) = built
    assert torch.equal(grad, plain)
    return grad, eager_grad, fetching, backward


def test_lines_asked_of_the_l2_first_change_no_value_and_compile(emulated, monkeypatch):
    """The launch variant ``LaunchParams.prefetch``: the grouped-query backward's tiled segments ask the L2 for
    each hoisted load's line, under the load's own guard, before any load. The gradient is the one without
    it, bit for bit, and the device source compiles for sm_90, where the prefetches come before the loads.
    The first call on a GPU times the variant beside the default and its tokens-first variant where
    ``TUNING.prefetch_variant`` is on."""
    from dataclasses import replace

    from thunder_padvec import codegen, schedule
    from thunder_padvec.runtime import nvrtc, tune

    _, _, fetching, backward = _check_prefetches(GRAD_CASES[4], "cpu", torch.Generator().manual_seed(3), monkeypatch)
    source = fetching.kernel_source
    fetched = re.findall(r"^\s*(?:if \((.*?)\) )?padvec_prefetch<(?:true|false)>\((.*?)\);", source, re.M)
    loaded = re.findall(r"^\s*(?:if \((.*?)\) )?padvec_load\w*<\d+>\(g\d+, (.*?)\);", source, re.M)
    assert fetched and sorted(fetched) == sorted(loaded)
    assert source.index("padvec_prefetch<") < source.index("padvec_load_keep<")
    device = codegen.device_source(codegen.render(fetching.plan, fetching.launch))
    assert "prefetch.global.L2" in device and nvrtc.compile_cubin(device, "sm_90")[:4] == b"\x7fELF"
    assert codegen.device_source(codegen.render(backward.plan, replace(backward.launch, prefetch=True))) == device
    options = {name: codegen.device_source(codegen.render(backward.plan, p)) for name, p in
               tune.variants(backward.launch)}
    assert not any("padvec_prefetch<" in source for source in options.values())
    monkeypatch.setattr(schedule.TUNING, "prefetch_variant", True)
    fetching = {name: codegen.device_source(codegen.render(backward.plan, p)) for name, p in
                tune.variants(backward.launch) if name not in options}
    assert sorted(fetching) == ["keep, L2 prefetches", "keep, tokens first, L2 prefetches"]
    assert fetching["keep, L2 prefetches"] == device
    assert fetching["keep, tokens first, L2 prefetches"] != options["keep, tokens first"]
    assert "padvec_prefetch<" in fetching["keep, tokens first, L2 prefetches"]


@pytest.mark.gpu
def test_lines_asked_of_the_l2_first_on_the_gpu_keep_the_backwards_blocks_per_sm(generator, monkeypatch):
    """Llama-3-8B's grouped-query qkv backward (4 query heads a key head, heads of 128) at 2048 tokens: with
    the L2 prefetches its gradient is eager's, bit for bit, and the build keeps the blocks per SM of the
    build without (their addresses take about 4 more registers: ``schedule.PREFETCH_SLACK``), without spilling."""
    case = ("llama-3", qkv_split_rope, (1, 2048, (32 + 2 * 8) * 128), 128,
            dict(n_head=32, n_query_groups=8, head_size=128))
    grad, eager_grad, fetching, backward = _check_prefetches(case, "cuda", generator, monkeypatch)
    assert torch.equal(grad, eager_grad)
    fetched, plain = fetching.resources, backward.resources
    assert fetched.blocks_per_sm == plain.blocks_per_sm and fetched.local_bytes == plain.local_bytes == 0, (
        fetched, plain)


@pytest.mark.gpu
def test_a_backward_a_few_registers_over_one_more_block_per_sm_is_built_again_to_fit(generator, monkeypatch):
    """Phi-3-mini's RoPE backward (rows of 96) takes 84 registers with NVRTC for sm_90: 2 blocks of 256
    per SM, where 80 give 3. padvec builds it again with ``__launch_bounds__(256, 3)`` (no spill): the
    same gradients as the first build and as eager. The forward (28 registers, 8 blocks of 256, the
    most an SM holds) keeps its build. The kernels with the evict_last hints, as built (no measured
    choice: the variant without them may fit by itself), and ``-x`` rounded through float as traced
    (with its sign bit flipped instead, ptxas gives this backward 90 registers, more than
    ``schedule.REGISTER_SLACK`` over), without word pairs or float twins (they change the registers too)."""
    from thunder_padvec import schedule

    monkeypatch.setattr(schedule.TUNING, "tune_hints", False)
    monkeypatch.setattr(schedule.TUNING, "word_pairs", False)
    monkeypatch.setattr(schedule.TUNING, "one_row_fit", False)  # one row a thread: 6 blocks (the next tests)
    render = importlib.import_module("thunder_padvec.codegen.render")
    monkeypatch.setattr(render, "NEG_FLIP", False)
    monkeypatch.setattr(render, "FLOAT_TWINS", False)
    case = ("phi-3", litgpt_rope, (1, 32, 4096, 96), 96, {})
    seed = generator.initial_seed()
    builds = {}
    for fit in (False, True):
        monkeypatch.setattr(schedule.TUNING, "fit_registers", fit)
        grad, eager_grad, jitted = _check_gradients(case, "cuda", torch.bfloat16, torch.Generator().manual_seed(seed))
        assert torch.equal(grad, eager_grad)
        builds[fit] = grad, {r.trace: r for r in explain(jitted)}
    (plain, plain_reports), (fitted, fitted_reports) = builds[False], builds[True]
    assert torch.equal(plain, fitted)
    assert [r.launch.min_blocks for r in plain_reports.values()] == [0, 0]
    assert fitted_reports["forward"].launch.min_blocks == 0
    assert fitted_reports["backward"].launch.min_blocks == 3, str(fitted_reports["backward"])
    assert "__launch_bounds__(256, 3)" in fitted_reports["backward"].source


@pytest.mark.gpu
def test_a_heavy_backward_is_built_without_word_pairs_where_they_cost_a_block_per_sm(generator, monkeypatch):
    """Llama-2-7b's RoPE backward (rows of 128): with word pairs NVRTC for sm_90 gives it 94 registers,
    2 blocks of 256 per SM; without, 73 and 3 blocks. padvec keeps the build without; the forward (40
    registers either way, 6 blocks) keeps its word pairs. The gradients are eager's, bit for bit. (With 4
    rows a thread, as planned: one row a thread holds 6 blocks, see the next test.)"""
    from thunder_padvec import schedule

    monkeypatch.setattr(schedule.TUNING, "tune_hints", False)
    monkeypatch.setattr(schedule.TUNING, "one_row_fit", False)
    case = ("llama-2", litgpt_rope, (1, 32, 4096, 128), 128, {})
    grad, eager_grad, jitted = _check_gradients(case, "cuda", torch.bfloat16, generator)
    assert torch.equal(grad, eager_grad)
    reports = {r.trace: r for r in explain(jitted)}
    assert reports["forward"].launch.word_pairs, str(reports["forward"])
    assert not reports["backward"].launch.word_pairs, str(reports["backward"])
    assert "padvec_pack_bf16x2<false>(&" in reports["backward"].source


ONE_ROW_CASES = [
    # (the RoPE backward: 73 registers without word pairs, 3 blocks of 256 per SM; 39 and 6 with one row)
    ("llama-2", litgpt_rope, (1, 32, 4096, 128), 128, {}, 1),
    # (98 registers, 2 blocks; 40 and 6 with one row)
    ("llama-2-qkv", qkv_split_rope, (1, 4096, 96 * 128), 128, dict(n_head=32, n_query_groups=32, head_size=128), 1),
    # (fitted to 3 blocks; 80 registers, 3 blocks, with one row: its k piece sums 4 heads' gradients)
    ("llama-3-qkv", qkv_split_rope, (1, 8192, 48 * 128), 128, dict(n_head=32, n_query_groups=8, head_size=128), 4),
]


@pytest.mark.gpu
@pytest.mark.parametrize("case", ONE_ROW_CASES, ids=[c[0] for c in ONE_ROW_CASES])
def test_a_backward_takes_one_row_a_thread_where_that_fits_twice_the_blocks_per_sm(generator, monkeypatch, case):
    """A LitGPT-sized backward planned with 4 rows a thread (sharing the loads of cos and sin) is built
    again with one row a thread and keeps that build where it holds at least twice the blocks per SM
    (NVRTC for sm_90): Llama-2-7b's RoPE and qkv backward take one row, the grouped-query qkv backward of
    Llama-3-8B keeps its 4 rows in the q piece. The forward keeps its plan. The gradients are the same
    bits either way, and within twice eager's error of a float64 reference."""
    from thunder_padvec import schedule

    monkeypatch.setattr(schedule.TUNING, "tune_hints", False)
    *grad_case, rows = case
    seed = generator.initial_seed()
    builds = {}
    for fit in (False, True):
        monkeypatch.setattr(schedule.TUNING, "one_row_fit", fit)
        grad, _, jitted = _check_gradients(grad_case, "cuda", torch.bfloat16, torch.Generator().manual_seed(seed))
        builds[fit] = grad, {r.trace: r for r in explain(jitted)}
    (planned, planned_reports), (fitted, fitted_reports) = builds[False], builds[True]
    assert torch.equal(planned, fitted)
    forward_plans = [[seg.mapping for seg in r["forward"].plan.segments] for r in (planned_reports, fitted_reports)]
    assert forward_plans[0] == forward_plans[1]
    planned_rows = [seg.rows_per_thread for seg in planned_reports["backward"].plan.segments]
    fitted_rows = [seg.rows_per_thread for seg in fitted_reports["backward"].plan.segments]
    assert 4 in planned_rows, planned_reports["backward"].plan
    assert max(fitted_rows) == rows, str(fitted_reports["backward"])
    # the report says what was weighed where the plan changed, and nothing where it did not
    assert fitted_reports["backward"].replanned.startswith("one row a thread: ") == (rows == 1)
    assert not planned_reports["backward"].replanned and not fitted_reports["forward"].replanned


def _compare_training(device, dtype, generator, rtol):
    losses, eager_losses, jitted = train_beside_eager(AttentionBlock, [padvec], device, dtype, generator, steps=4)
    assert eager_losses[-1] < eager_losses[0]  # it trains
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(eager_losses), rtol=rtol, atol=0)
    assert {r.trace for r in explain(jitted)} == {"forward", "backward"}


@pytest.mark.parametrize("dtype, rtol", [(torch.float32, 1e-5), (torch.bfloat16, 2e-2)], ids=["fp32", "bf16"])
def test_attention_block_trains_like_eager(emulated, generator, dtype, rtol):
    _compare_training("cpu", dtype, generator, rtol)


@pytest.mark.gpu
def test_attention_block_trains_like_eager_on_the_gpu(generator):
    _compare_training("cuda", torch.bfloat16, generator, 2e-2)


def _llama_block() -> LlamaBlock:
    block = LlamaBlock()
    with torch.no_grad():  # norm weights other than ones
        for norm in (block.norm1, block.norm2):
            norm.weight.add_(0.1 * torch.randn(norm.weight.shape))
    return block


def _train_llama_block(executors, device, dtype, generator):
    return train_beside_eager(_llama_block, executors, device, dtype, generator)


def _fusion_names(jitted) -> dict[str, list[str]]:
    return {label: [b.sym.name for b in traces(jitted)[-1].bound_symbols if b.sym.is_fusion]
            for label, traces in (("forward", thunder.last_traces), ("backward", thunder.last_backward_traces))}


def _claims_rope_only(reports) -> bool:
    return [(r.trace, r.name.startswith("padvec_cat")) for r in reports] == [("forward", True), ("backward", True)] \
        and "cat" in reports[0].ops and "pad" in reports[1].ops


def test_padvec_cat_fuses_only_the_regions_with_a_cat_or_a_pad(emulated, generator):
    """In a whole block ``padvec`` also fuses the norms' and the MLP's pointwise ops; ``padvec_cat`` fuses
    RoPE's forward (a cat) and its backward (pads) only, and leaves the rest to PyTorch."""
    losses, eager, jitted = _train_llama_block([padvec], "cpu", torch.float32, generator)
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(eager), rtol=1e-5, atol=0)
    assert any("cat" not in r.ops and "pad" not in r.ops for r in explain(jitted))

    losses, eager, jitted = _train_llama_block([padvec_cat], "cpu", torch.float32, generator)
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(eager), rtol=1e-5, atol=0)
    reports = explain(jitted)
    assert _claims_rope_only(reports), [str(r) for r in reports]
    assert _fusion_names(jitted) == {"forward": ["padvec_cat0"], "backward": ["padvec_cat1"]}


def test_padvec_cat_leaves_the_rest_of_a_block_to_the_executor_after_it(emulated, generator):
    """``executors=[padvec_cat, torchcompile]``: torch.compile fuses what lies between the RoPE regions
    (norms with their reductions, matmuls, the MLP), one fusion on each side; ``[padvec, torchcompile]``
    cuts the same block into many more fusions."""
    losses, eager, jitted = _train_llama_block([padvec_cat, thunder.get_executor("torchcompile")], "cpu",
                                               torch.float32, generator)
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(eager), rtol=1e-5, atol=0)
    assert _claims_rope_only(explain(jitted))
    names = _fusion_names(jitted)
    assert names == {"forward": ["TorchCompile0", "padvec_cat0", "TorchCompile1"],
                     "backward": ["TorchCompile2", "padvec_cat1", "TorchCompile3"]}, names


@pytest.mark.gpu
def test_padvec_cat_leaves_the_rest_of_a_block_to_the_executor_after_it_on_the_gpu(generator):
    losses, eager, jitted = _train_llama_block([padvec_cat, thunder.get_executor("torchcompile")], "cuda",
                                               torch.bfloat16, generator)
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(eager), rtol=2e-2, atol=0)
    reports = explain(jitted)
    assert _claims_rope_only(reports) and all(r.launch is not None for r in reports), [str(r) for r in reports]
