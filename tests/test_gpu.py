"""On a GPU: the seed's exact RoPE, the analysis cases at large shapes, misaligned views, streams, graphs.

Each test compares against eager on the same GPU, with fresh random inputs and poisoned outputs.
"""

import pytest
import thunder
import torch
import torch.nn.functional as F

from helpers import jit_and_run, randn
from thunder_padvec import explain, padvec
from thunder_padvec import configs
from thunder_padvec.examples import (SEED_SHAPE, gptj_rope, hf_gptj_rope, hf_llama_rope, hf_mrope, litgpt_rope,
                                     qkv_split_rope, rope_inputs, rope_one_entry)
from thunder_padvec.explain import fusions

pytestmark = pytest.mark.gpu


def _cuda_randn(*shape, dtype=torch.float32, generator=None):
    return randn(*shape, dtype=dtype, generator=generator).cuda()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
def test_seed_rope_exact_shapes(generator, dtype):
    x, cos, sin = rope_inputs(**SEED_SHAPE, dtype=dtype, device="cuda", generator=generator)
    n = SEED_SHAPE["rope_n_elem"]
    jitted, out, trace = jit_and_run(rope_one_entry, x, cos, sin, n)
    assert len(fusions(trace)) == 1
    expected = rope_one_entry(x, cos, sin, n)
    assert torch.equal(out, expected)
    reference = rope_one_entry(x.double(), cos.double(), sin.double(), n)
    padvec_error = (out.double() - reference).abs().max().item()
    eager_error = (expected.double() - reference).abs().max().item()
    assert padvec_error <= eager_error
    (report,) = explain(jitted)
    vector = 16 // x.element_size()
    assert report.widths["x"] == vector and report.widths["cos"] == vector


LARGE_CASES = [
    ("pad-4-4", lambda x: F.pad(x, (4, 4)), (1 << 24,), 4),
    ("pad-middle", lambda x: F.pad(x, (0, 0, 4, 4)), (1024, 1024, 2), 4),
    ("pad-middle-crop", lambda x: F.pad(x, (0, 0, -4, 4)), (1024, 1024, 2), 4),
    ("slice-at-3", lambda x: x[3:-5] * 2.0, (1 << 24,), 1),
    ("cat-8-24", lambda x: torch.cat((x[:, 24:], x[:, :24] + 1.0), -1), (1 << 18, 32), 4),
]


@pytest.mark.parametrize("case", LARGE_CASES, ids=[c[0] for c in LARGE_CASES])
def test_analysis_cases_at_large_shapes(generator, case):
    _, fn, shape, width = case
    x = _cuda_randn(*shape, generator=generator)
    jitted, out, _ = jit_and_run(fn, x)
    assert torch.equal(out, fn(x))
    assert explain(jitted)[0].widths["x"] == width


@pytest.mark.parametrize("offset", [1, 2, 3, 4])
def test_misaligned_views(generator, offset):
    base = _cuda_randn(1 << 20, dtype=torch.bfloat16, generator=generator)
    cos = _cuda_randn(64, 8, dtype=torch.bfloat16, generator=generator)
    sin = _cuda_randn(64, 8, dtype=torch.bfloat16, generator=generator)
    jitted = thunder.jit(rope_one_entry, executors=[padvec])
    n = 4 * 16 * 64 * 32
    aligned = base[:n].view(4, 16, 64, 32)
    assert torch.equal(jitted(aligned, cos, sin, 8), rope_one_entry(aligned, cos, sin, 8))
    shifted = base[offset:offset + n].view(4, 16, 64, 32)
    assert torch.equal(jitted(shifted, cos, sin, 8), rope_one_entry(shifted, cos, sin, 8))
    assert explain(jitted)[0].widths["x"] == min(8, offset & -offset)


def test_launches_on_the_current_non_default_stream(generator):
    x, cos, sin = rope_inputs(8, 4, 128, 32, 8, dtype=torch.bfloat16, device="cuda", generator=generator)
    jitted = thunder.jit(rope_one_entry, executors=[padvec])
    jitted(x, cos, sin, 8)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        torch.cuda._sleep(10_000_000)  # a busy stream: a launch on another stream would race ahead
        out = jitted(x, cos, sin, 8)
    torch.cuda.current_stream().wait_stream(stream)
    assert torch.equal(out, rope_one_entry(x, cos, sin, 8))


def test_runs_inside_cuda_graph_capture_and_replays(generator):
    x, cos, sin = rope_inputs(8, 4, 128, 32, 8, dtype=torch.bfloat16, device="cuda", generator=generator)
    jitted = thunder.jit(rope_one_entry, executors=[padvec])
    jitted(x, cos, sin, 8)  # compile and load outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = jitted(x, cos, sin, 8)
    for _ in range(2):
        x.copy_(torch.randn(x.shape, generator=generator).to(x))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, rope_one_entry(x, cos, sin, 8))


def test_a_view_that_does_not_fold_its_input_strides_reads_a_copy_also_in_a_graph(generator):
    """Steps of 2 over a merge of rows 130 apart, each of 127 elements: the kernel reads a row-major copy
    of x made before each launch (on the launch's stream; inside a graph capture, in its pool)."""
    def fn(x, c):
        return x.reshape(16, 48 * 127)[:, ::2] * c + 1.0

    x = _cuda_randn(16, 48, 130, dtype=torch.bfloat16, generator=generator)[:, :, :127]
    c = _cuda_randn(48 * 127 // 2, dtype=torch.bfloat16, generator=generator)
    jitted, out, _ = jit_and_run(fn, x, c)
    assert torch.equal(out, fn(x, c))
    assert explain(jitted)[0].copied == ("x",)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = jitted(x, c)
    for _ in range(2):
        x.copy_(torch.randn(x.shape, generator=generator).to(x))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(captured, fn(x, c))


def test_explicit_device_index(generator):
    device = torch.device("cuda", torch.cuda.current_device())
    x = randn(1000, 37, generator=generator).to(device)
    jitted, out, _ = jit_and_run(lambda t: torch.cat((t[:, 5:], F.pad(t[:, :5], (1, 0))), 1), x)
    assert out.device == device
    assert torch.equal(out, torch.cat((x[:, 5:], F.pad(x[:, :5], (1, 0))), 1))


@pytest.mark.parametrize("config", [c for c in configs.LITGPT if c.batch == 1], ids=lambda c: c.id)
def test_litgpt_configs(generator, config):
    c = config
    x, cos, sin = rope_inputs(c.batch, c.n_head, c.seq, c.head_size, c.rope_n_elem, torch.bfloat16, "cuda",
                              generator)
    _, out, trace = jit_and_run(litgpt_rope, x, cos, sin, c.rope_n_elem)
    assert len(fusions(trace)) == 1
    assert torch.equal(out, litgpt_rope(x, cos, sin, c.rope_n_elem))
    qkv = _cuda_randn(c.batch, 256, (c.n_head + 2 * c.n_query_groups) * c.head_size, dtype=torch.bfloat16,
                      generator=generator)
    args = (qkv, cos[:256], sin[:256], c.n_head, c.n_query_groups, c.head_size, c.rope_n_elem)
    _, outs, _ = jit_and_run(qkv_split_rope, *args)
    for got, want in zip(outs, qkv_split_rope(*args)):
        assert torch.equal(got, want)


@pytest.mark.parametrize("rope_n_elem", [64, 256], ids=["gptj-6b", "full"])
def test_gptj_rotary_forward_and_backward(generator, rope_n_elem):
    """GPT-J-style interleaved rotary at GPT-J-6B's head shape: the forward one kernel that writes the
    output unmerged into the region's memory and reads x's strided halves through folded views, the
    backward one kernel with the dilated pads inside; the output is eager's bit for bit, the gradient
    within eager's own error of a float64 reference, twice over. On the GPU, the halves of x are register
    moves (``vectorize.gathers``) and the backward reads sin through windows. GPT-J-6B's rows (64 of 256
    features rotated) are cut along the pairs' dim, the rotated pairs and those passed through a segment
    each, both ways; fully rotated rows stay whole."""
    c = configs.INTERLEAVED[0]
    x = _cuda_randn(c.batch, c.n_head, 512, c.head_size, dtype=torch.bfloat16, generator=generator)
    cos, sin = (_cuda_randn(512, rope_n_elem // 2, dtype=torch.bfloat16, generator=generator).repeat_interleave(2, -1)
                for _ in range(2))
    cotangent = _cuda_randn(*x.shape, dtype=torch.bfloat16, generator=generator)
    jitted = thunder.jit(gptj_rope, executors=[padvec])
    grads = []
    for fn, dtype in ((jitted, torch.bfloat16), (gptj_rope, torch.bfloat16), (gptj_rope, torch.float64)):
        leaf = x.detach().to(dtype).requires_grad_(True)
        out = fn(leaf, cos.to(dtype), sin.to(dtype), rope_n_elem)
        out.backward(cotangent.to(dtype))
        grads.append((out.detach(), leaf.grad))
    (out, grad), (want, want_grad), (_, reference) = grads
    assert torch.equal(out, want)
    assert (grad.double() - reference).abs().max() <= 2 * (want_grad.double() - reference).abs().max()
    forward, backward = explain(jitted)
    assert forward.trace == "forward" and backward.trace == "backward"
    pieces = [(rope_n_elem // 2, 2), (96, 2)] if rope_n_elem == 64 else [(128, 2)]
    for report in (forward, backward):
        assert [s.segment.shape[-2:] for s in report.plan.segments] == pieces
    assert [a.width for a in forward.accesses if a.role == "output"] == [8] * len(pieces)
    assert len(fusions(thunder.last_traces(jitted)[-1])) == 1
    # x's strided halves move from the registers of x's own loads; the backward's sin from a window
    assert [a.access for a in forward.accesses if a.width == 1] == ["gathered", "gathered"]
    assert [a.access for a in backward.accesses if a.tensor.startswith("sin")] == ["window", "window"]


def test_hugging_faces_gptj_rotary_forward_and_backward(generator):
    """Hugging Face's GPT-J rotary at GPT-J-6B's shape (64 of 256 features, ``x [B, T, heads, head_size]``,
    float32 ``sincos``): the forward reads the repeated sin and cos through windows and x's halves from x's
    own loads; output as eager's, the gradient within twice eager's error of a float64 reference."""
    c = configs.INTERLEAVED[0]
    x = _cuda_randn(c.batch, 512, c.n_head, c.head_size, dtype=torch.bfloat16, generator=generator)
    sincos = _cuda_randn(c.batch, 512, c.rope_n_elem, generator=generator)
    jitted = thunder.jit(hf_gptj_rope, executors=[padvec])
    cotangent = _cuda_randn(*x.shape, generator=generator)
    results = []
    for fn, dtype in ((jitted, torch.bfloat16), (hf_gptj_rope, torch.bfloat16), (hf_gptj_rope, torch.float64)):
        leaf = x.detach().to(dtype).requires_grad_(True)
        out = fn(leaf, sincos.to(torch.float64 if dtype == torch.float64 else torch.float32), c.rope_n_elem)
        out.backward(cotangent.to(out.dtype))
        results.append((out.detach(), leaf.grad))
    (out, grad), (want, want_grad), (_, reference) = results
    assert torch.equal(out, want)
    assert (grad.double() - reference).abs().max() <= 2 * (want_grad.double() - reference).abs().max()
    forward, _ = explain(jitted)
    assert sorted(a.access for a in forward.accesses if a.access in ("gathered", "window")) == [
        "gathered", "gathered", "window", "window"]


def _q_and_k_rotary_beside_eager(program, q, k, cos, sin, *extra, generator):
    """``program(q, k, cos, sin, *extra)`` through padvec, forward and backward, beside eager in bf16 and in
    float64: outputs as eager's, gradients within twice eager's error of float64's, every access at 16
    bytes. Returns padvec's reports."""
    cotangents = [_cuda_randn(*t.shape, generator=generator) for t in (q, k)]
    jitted = thunder.jit(program, executors=[padvec])
    results = []
    for fn, dtype in ((jitted, torch.bfloat16), (program, torch.bfloat16), (program, torch.float64)):
        leaves = [t.detach().to(dtype).requires_grad_(True) for t in (q, k)]
        outs = fn(*leaves, cos.to(dtype), sin.to(dtype), *extra)
        torch.autograd.backward(outs, [t.to(dtype) for t in cotangents])
        results.append(([o.detach() for o in outs], [leaf.grad for leaf in leaves]))
    (outs, grads), (want, want_grads), (_, references) = results
    assert all(torch.equal(o, w) for o, w in zip(outs, want))
    for grad, want_grad, reference in zip(grads, want_grads, references):
        assert (grad.double() - reference).abs().max() <= 2 * (want_grad.double() - reference).abs().max()
    reports = explain(jitted)
    for report in reports:
        assert set(report.widths.values()) == {8}, report.widths
    return reports


def test_hugging_faces_llama_rotary_forward_and_backward(generator):
    """Hugging Face's Llama rotary at Llama-3-8B's heads (32 query heads, 8 key heads of 128 features, T cut
    to 1024), q and k the transposes of their projections' views, cos and sin per sequence: every tensor
    read and written at 16 bytes, outputs as eager's, gradients within twice eager's error of a float64
    reference."""
    c = next(c for c in configs.LITGPT if c.name == "Llama-3-8B" and c.batch == 2)
    q, k = (_cuda_randn(c.batch, 1024, heads, c.head_size, dtype=torch.bfloat16, generator=generator).transpose(1, 2)
            for heads in (c.n_head, c.n_query_groups))
    cos, sin = (_cuda_randn(c.batch, 1024, c.head_size, dtype=torch.bfloat16, generator=generator) for _ in range(2))
    _q_and_k_rotary_beside_eager(hf_llama_rope, q, k, cos, sin, generator=generator)


def test_hugging_faces_multimodal_rotary_forward_and_backward(generator):
    """Qwen2-VL's multimodal rotary (``hf_mrope``) at Qwen2-VL-7B's heads (28 query heads, 4 key heads of 128
    features, sections of 16, 24 and 24 features, T 1024): the sections of cos and sin, picked by integer index
    from three position streams, fold into the loads; one kernel each way, every tensor read and written at
    16 bytes, outputs as eager's, gradients within twice eager's error of a float64 reference."""
    q, k = (_cuda_randn(2, 1024, heads, 128, dtype=torch.bfloat16, generator=generator).transpose(1, 2)
            for heads in (28, 4))
    cos, sin = (_cuda_randn(3, 2, 1024, 128, dtype=torch.bfloat16, generator=generator) for _ in range(2))
    reports = _q_and_k_rotary_beside_eager(hf_mrope, q, k, cos, sin, (16, 24, 24), generator=generator)
    assert sorted(r.trace for r in reports) == ["backward", "forward"]


def test_the_report_says_the_kernels_registers_and_blocks_per_sm(generator):
    """The report of a fusion run on the GPU carries what the driver says of its kernel: registers a thread,
    local memory, blocks per SM for the launch's block, and waves (the grid over what the SMs hold at once),
    and prints them. The seed's RoPE forward in bf16: no spills, at least one block per SM."""
    x, cos, sin = rope_inputs(**SEED_SHAPE, dtype=torch.bfloat16, device="cuda", generator=generator)
    jitted, out, _ = jit_and_run(rope_one_entry, x, cos, sin, SEED_SHAPE["rope_n_elem"])
    assert torch.equal(out, rope_one_entry(x, cos, sin, SEED_SHAPE["rope_n_elem"]))
    (report,) = explain(jitted)
    ((fusion, _),) = fusions(thunder.last_traces(jitted)[-1])
    registers, local, blocks = fusion.last.module.resources(report.launch.block)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    r = report.resources
    assert (r.registers, r.local_bytes, r.blocks_per_sm) == (registers, local, blocks), r
    assert 0 < r.registers <= 255 and r.local_bytes == 0 and r.blocks_per_sm >= 1, r
    assert r.waves == pytest.approx(report.launch.grid / (sms * blocks)), r
    assert f"resources: {r.registers} registers a thread, {r.blocks_per_sm} block" in str(report)
    assert f"resources: {r}" in report._repr_markdown_()


@pytest.mark.parametrize("batch", [2, 1])
def test_a_launch_whose_last_wave_is_mostly_idle_takes_teams_twice_as_wide(generator, batch):
    """pythia-160m's qkv forward (rows of 64 in 4-lane chunks, teams of 4 threads): on the H200 (132 SMs),
    at batch 2 its 768 blocks of 256 (48 registers, 5 per SM) make 1.16 waves, and padvec plans it again
    with teams of 8 (1536 blocks, 2.33 waves); at batch 1 (0.58 waves) the teams stay. The outputs are
    eager's either way."""
    c = next(c for c in configs.LITGPT if c.name == "pythia-160m")
    qkv = _cuda_randn(batch, c.seq, (c.n_head + 2 * c.n_query_groups) * c.head_size, dtype=torch.bfloat16,
                      generator=generator)
    cos, sin = (_cuda_randn(c.seq, c.rope_n_elem, dtype=torch.bfloat16, generator=generator) for _ in range(2))
    args = (qkv, cos, sin, c.n_head, c.n_query_groups, c.head_size, c.rope_n_elem)
    jitted, outs, _ = jit_and_run(qkv_split_rope, *args)
    for got, want in zip(outs, qkv_split_rope(*args)):
        assert torch.equal(got, want)
    (report,) = explain(jitted)
    wide = report.replanned.startswith("twice the threads a row")
    assert [s.threads_per_row for s in report.plan.segments] == [8 if wide else 4], str(report)
    if torch.cuda.get_device_properties(0).multi_processor_count == 132:  # the H200's
        assert wide == (batch == 2), str(report)


def test_more_than_2_to_the_31_elements_take_64_bit_indices():
    rows, cols = (1 << 20) + 3, 2048  # 2^31 + 6144 elements, 4.3 GB in bf16
    x = torch.empty(rows, cols, dtype=torch.bfloat16, device="cuda").normal_()

    def fn(t):
        return F.pad(t, (0, 8)) * 2.0

    jitted, out, _ = jit_and_run(fn, x)
    (report,) = explain(jitted)
    assert report.launch.index_bits == 64
    expected = fn(x)
    assert torch.equal(out, expected)
    del out, expected
    torch.cuda.empty_cache()


def _halves_of_two_inputs(a, b, cos, sin):
    return torch.cat((a, b), -1) * cos + sin


@pytest.mark.parametrize("heads, head_size", [(8, 128), (8, 256), (4, 64)])
def test_steps_side_by_side_exchange_chunks_in_the_warp(generator, monkeypatch, heads, head_size):
    """Lanes of a warp take the other teams' chunks with ``__shfl_sync`` (the host loads them again,
    so only the GPU runs the exchange): LitGPT's full-rotary RoPE with 4 heads a thread (teams of 8,
    16 and 4 lanes a half) and a row made of two inputs that only the first team loads."""
    from thunder_padvec import schedule

    monkeypatch.setattr(schedule.TUNING, "min_threads", 0)
    x = _cuda_randn(2, heads, 96, head_size, dtype=torch.bfloat16, generator=generator)
    cos, sin = (_cuda_randn(96, head_size, dtype=torch.bfloat16, generator=generator) for _ in range(2))
    jitted, out, _ = jit_and_run(litgpt_rope, x, cos, sin, head_size)
    assert torch.equal(out, litgpt_rope(x, cos, sin, head_size))
    (seg,) = explain(jitted)[0].plan.segments
    assert (seg.lane_steps, seg.team) == (2, head_size // 8)
    half = head_size // 2
    a, b = (_cuda_randn(2, heads, 96, half, dtype=torch.bfloat16, generator=generator) for _ in range(2))
    jitted, out, _ = jit_and_run(_halves_of_two_inputs, a, b, cos, sin)
    assert torch.equal(out, _halves_of_two_inputs(a, b, cos, sin))
    assert explain(jitted)[0].plan.segments[0].lane_steps == 2


def test_the_first_call_times_lanes_that_reload_and_either_plan_gives_eagers_values(generator, monkeypatch, tmp_path):
    """LitGPT's RoPE of a Llama-like shape: the first call times the plan whose lanes take one chunk of one
    row each (the other half's chunk loaded again) beside the default, whose lanes exchange their chunks in
    the warp, and keeps one; the output equals eager's whichever it keeps. Forced (``ALL_RELOADS``, no
    timing), the reloading kernel's output equals eager's too."""
    import importlib

    from thunder_padvec import schedule
    from thunder_padvec.runtime import tune

    monkeypatch.setenv("THUNDER_PADVEC_CACHE_DIR", str(tmp_path))
    x = _cuda_randn(2, 32, 1024, 128, dtype=torch.bfloat16, generator=generator)
    cos, sin = (_cuda_randn(1024, 128, dtype=torch.bfloat16, generator=generator) for _ in range(2))
    before = tune.timings
    jitted, out, _ = jit_and_run(litgpt_rope, x, cos, sin, 128)
    assert torch.equal(out, litgpt_rope(x, cos, sin, 128))
    (report,) = explain(jitted)
    assert tune.timings == before + 1 and "keep, a chunk a lane " in report.choice, report.choice
    reloads = report.choice.endswith(": keep, a chunk a lane")
    assert [seg.reloads for seg in report.plan.segments] == [reloads]
    assert ("padvec_exchange<" in report.kernel_source) != reloads

    monkeypatch.setattr(importlib.import_module("thunder_padvec.vectorize.plan"), "ALL_RELOADS", True)
    monkeypatch.setattr(schedule.TUNING, "tune_hints", False)
    x = _cuda_randn(2, 32, 1024, 128, dtype=torch.bfloat16, generator=generator)
    jitted, out, _ = jit_and_run(litgpt_rope, x, cos, sin, 128)
    assert torch.equal(out, litgpt_rope(x, cos, sin, 128))
    (report,) = explain(jitted)
    assert [seg.reloads for seg in report.plan.segments] == [True] and report.launch.block == 128
    assert "padvec_exchange<" not in report.kernel_source


def test_launch_variants_are_timed_on_the_first_call_and_the_decision_is_read_back(generator, monkeypatch, tmp_path):
    """The first call of a specialization times the kernel with and without the evict_last hints (and in
    plane order where that changes it, and with qkv's rows taken a token of every head in turn) on the
    call's tensors and keeps one; it computes the same values
    either way. A second jit of the function after the in-memory cache is cleared (a new process) reads
    the decision from disk and times nothing."""
    from thunder_padvec.runtime import cache, tune

    monkeypatch.setenv("THUNDER_PADVEC_CACHE_DIR", str(tmp_path))  # no decision of an earlier run on disk

    cfg = configs.RopeConfig("phi-3-like", 1, 32, 32, 96, 96, 512)
    qkv = _cuda_randn(cfg.batch, cfg.seq, 3 * cfg.n_head * cfg.head_size, dtype=torch.bfloat16, generator=generator)
    cos, sin = (_cuda_randn(cfg.seq, 96, dtype=torch.bfloat16, generator=generator) for _ in range(2))
    args = (qkv, cos, sin, cfg.n_head, cfg.n_query_groups, cfg.head_size, cfg.rope_n_elem)
    before = tune.timings
    jitted, outs, _ = jit_and_run(qkv_split_rope, *args)
    for got, want in zip(outs, qkv_split_rope(*args)):
        assert torch.equal(got, want)
    (report,) = explain(jitted)
    assert tune.timings == before + 1
    chosen = report.choice.split(": ")[-1]
    assert report.choice.count(" µs") >= 3 and "keep, tokens first " in report.choice, report.choice
    assert chosen in {"keep", "plain", "keep reused", "keep in plane order", "keep, tokens first",
                      "keep, a chunk a lane", "keep, a chunk a lane, tokens first"}, report.choice
    assert ("padvec_load_keep<" in report.kernel_source) == chosen.startswith("keep")
    assert ("tile_index = (b %" in report.kernel_source) == chosen.endswith("plane order")
    assert report.launch.tokens_first == chosen.endswith("tokens first") == (1 in report.token_tiles), str(report)
    if chosen in ("keep", "plain", "keep reused", "keep in plane order"):  # the rule's tiles: rows of 192 bytes
        assert report.token_tiles == (4,), str(report)
    cache.clear_memory()
    jitted, outs, _ = jit_and_run(qkv_split_rope, *args)
    for got, want in zip(outs, qkv_split_rope(*args)):
        assert torch.equal(got, want)
    assert tune.timings == before + 1
    assert explain(jitted)[0].choice.endswith("(a decision kept on disk)")
