"""Generated code: every elementwise op and cast against eager, and NVRTC builds for real GPUs.

NVRTC needs no GPU, so CI compiles every kernel here to CUBIN for sm_80 and sm_90.
"""

import importlib
import math
import re
from dataclasses import replace

import pytest
import thunder
import torch

from helpers import jit_and_run, randn, unfused_ops
from thunder_padvec import codegen, ir, schedule
from thunder_padvec.codegen import scalar
from thunder_padvec.errors import CompileError
from thunder_padvec.examples import hf_gptj_rope, hf_llama_rope, rope_one_entry
from thunder_padvec.explain import fusions
from thunder_padvec.runtime import cache, nvrtc

# Input ranges inside each op's domain.
DOMAIN = {"acos": (-0.9, 0.9), "asin": (-0.9, 0.9), "atanh": (-0.9, 0.9), "acosh": (1.1, 4.0), "log": (0.1, 4.0),
          "log10": (0.1, 4.0), "log2": (0.1, 4.0), "log1p": (-0.5, 4.0), "sqrt": (0.1, 4.0), "rsqrt": (0.1, 4.0),
          "pow": (0.1, 2.0), "fmod": (0.5, 3.0)}


def _uniform(shape, lo, hi, dtype, generator):
    return (torch.rand(*shape, generator=generator) * (hi - lo) + lo).to(dtype)


def _inputs(op, dtype, generator):
    """Inputs of ``op``, as many as it takes, inside its domain."""
    lo, hi = DOMAIN.get(op, (-3.0, 3.0))
    arity = 3 if op in ir.TERNARY_MATH else 2 if op in ir.BINARY_MATH + ir.COMPARISONS else 1
    return [_uniform((5, 33), lo, hi, dtype, generator) for _ in range(arity)]


# Basic arithmetic rounds exactly like eager; libm functions may differ in the last bit.
EXACT = ("neg", "abs", "add", "sub", "mul", "div", "maximum", "minimum", "floor", "ceil", "trunc", "round", "sqrt",
         "reciprocal", "fmod", "remainder", "sign") + ir.COMPARISONS + ir.UNARY_PREDICATES


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("op", ir.FLOAT_OPS)
def test_elementwise_op_matches_eager(emulated, generator, op, dtype):
    fn = getattr(torch, op)
    args = _inputs(op, dtype, generator)
    _, out, trace = jit_and_run(lambda *a: fn(*a), *args)
    assert fusions(trace), f"{op} was not claimed"
    expected = fn(*args)
    if op == "sqrt" and dtype in (torch.float32, torch.float64):
        # Some CPUs' vectorized sqrt is 1 ulp off; IEEE's is correctly rounded, and so is float64's rounded to float32
        exact_sqrt = [math.sqrt(v) for v in args[0].flatten().tolist()]
        expected = torch.tensor(exact_sqrt, dtype=torch.float64).to(dtype).view_as(expected)
    if op in EXACT:
        assert torch.equal(out, expected)
    else:
        rtol = {torch.float64: 1e-13, torch.float32: 2e-6}.get(dtype, 8e-3)
        torch.testing.assert_close(out, expected, rtol=rtol, atol=rtol / 2)


def test_where_with_literal_branches(emulated, generator):
    def fn(a, b):
        return torch.where(a > b, a, 0.5) + torch.where(a < 0, -1.0, b)

    a, b = randn(7, 9, generator=generator), randn(7, 9, generator=generator)
    _, out, trace = jit_and_run(fn, a, b)
    assert fusions(trace)
    assert torch.equal(out, fn(a, b))


SPECIALS = [0.0, -0.0, math.inf, -math.inf, math.nan, 65504.0, 65520.0, 65519.99, 2.0 ** -24, 2.0 ** -25,
            2.0 ** -25 * 1.0001, 2.0 ** -14, 3.0 * 2.0 ** -16, 1e-40, 3.3895314e38, 1.0 + 2.0 ** -8,
            1.0 + 3 * 2.0 ** -9]


def _same_bits(out: torch.Tensor, expected: torch.Tensor) -> bool:
    """Equal values with equal signs of zero, and NaN where eager has NaN (whatever its bits)."""
    nan = expected.isnan()
    ints = {torch.float64: torch.int64, torch.float32: torch.int32}.get(expected.dtype, torch.int16)
    return out.isnan().equal(nan) and torch.equal(out.view(ints)[~nan], expected.view(ints)[~nan])


def _special_pairs(dtype, generator, device="cpu"):
    """``a`` and ``b``: every pair of special values (NaN, infinities, zeros of either sign, subnormals, ends of the
    ranges) and a few random ones; ``w``: lerp weights at both sides of its switch between ends, and NaN."""
    specials = torch.tensor(SPECIALS + [-v for v in SPECIALS] + [1.0, -1.0, 2.5, -3.0, 0.5])
    specials = torch.cat([specials, torch.randn(21, generator=generator)]).to(device, dtype)
    a, b = specials.repeat_interleave(len(specials)), specials.repeat(len(specials))
    w = torch.tensor([0.25, 0.5, -0.75, 2.0, math.nan]).to(device, dtype).repeat(len(a) // 5 + 1)[:len(a)]
    return a, b, w


def _specials(a, b, w):
    return torch.sign(a), torch.remainder(a, b), torch.remainder(a, 1.5), torch.lerp(a, b, w), torch.lerp(a, b, 0.25)


def _check_specials(a, b, w, expected=None):
    """``_specials`` through padvec, one kernel: sign and remainder equal ``expected`` (eager's by default) bit for
    bit, sign of zero included; lerp too, but for one rounding of its fused multiply-add where eager's kernel
    may skip the fusion."""
    _, outs, trace = jit_and_run(_specials, a, b, w)
    assert len(fusions(trace)) == 1 and not unfused_ops(trace)
    expected = _specials(a, b, w) if expected is None else expected
    for name, out, want in zip(("sign", "remainder", "remainder by 1.5"), outs, expected):
        assert _same_bits(out, want), name
    for out, want in zip(outs[3:], expected[3:]):
        assert out.isnan().equal(want.isnan())
        finite = want.isfinite()
        assert torch.equal(out[~finite & ~want.isnan()], want[~finite & ~want.isnan()])
        torch.testing.assert_close(out[finite], want[finite], rtol={torch.bfloat16: 8e-3}.get(a.dtype, 2e-7), atol=0)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16], ids=str)
def test_sign_remainder_and_lerp_at_special_values_match_eager(emulated, generator, dtype):
    """``_check_specials`` on the CPU."""
    a, b, w = _special_pairs(dtype, generator)
    expected = list(_specials(a, b, w))
    # fmod is exact (so remainder is, but for its last add, rounded once): float64's, rounded to float32 as
    # Thunder's float32 math on bf16 is, then to dtype. (PyTorch's vectorized float32 fmod on the CPU gives NaN
    # where a / b overflows; CUDA's is exact.)
    for k, divisor in ((1, b.double()), (2, 1.5)):
        exact = torch.remainder(a.double(), divisor)
        expected[k] = exact if dtype == torch.float64 else exact.float().to(dtype)
    _check_specials(a, b, w, expected)


def _masks(x, y, keep):
    mask = ((x > 0) & ~keep) | ((y < 0.5) ^ (x < y))
    return torch.where(mask, x, y * 2), mask, keep & True, ~(keep | (x > 1))


def _check_masks(x, y, keep):
    """``&``, ``|``, ``^`` and ``~`` of bool masks (comparisons, a bool input, a Python bool) in one kernel, masks
    as outputs too, equal to eager's."""
    _, outs, trace = jit_and_run(_masks, x, y, keep)
    assert len(fusions(trace)) == 1 and not unfused_ops(trace)
    for out, want in zip(outs, _masks(x, y, keep)):
        assert out.dtype == want.dtype and torch.equal(out, want)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_every_pointwise_op_and_bool_masks_match_eager_on_the_gpu(generator, dtype):
    """Against CUDA's eager: each elementwise op on values in its domain, one kernel each (bit for bit where the
    math is exact, within an ulp or two for libm's functions); ``_check_specials`` and ``_check_masks``."""
    for op in ir.FLOAT_OPS:
        fn = getattr(torch, op)
        args = [a.cuda() for a in _inputs(op, dtype, generator)]
        _, out, trace = jit_and_run(lambda *a: fn(*a), *args)
        assert fusions(trace), op
        expected = fn(*args)
        if op in EXACT:
            assert torch.equal(out, expected), op
        else:
            torch.testing.assert_close(out, expected, rtol={torch.float32: 4e-7}.get(dtype, 8e-3), atol=1e-30)
    _check_specials(*_special_pairs(dtype, generator, "cuda"))
    x, y = (randn(64, 40, dtype=dtype, device="cuda", generator=generator) for _ in range(2))
    _check_masks(x, y, (torch.rand(64, 40, generator=generator) > 0.5).cuda())


def test_bool_masks_combine_in_the_kernel(emulated, generator):
    """``_check_masks`` on the CPU; integer bitwise math and a bool mask with an integer stay in PyTorch."""
    x, y = randn(6, 40, generator=generator), randn(6, 40, generator=generator)
    keep = torch.rand(6, 40, generator=generator) > 0.5
    _check_masks(x, y, keep)

    ints = torch.randint(-9, 9, (6, 40), generator=generator, dtype=torch.int32)
    _, outs, trace = jit_and_run(lambda i, m: ((i & 5) ^ i, m & 1), ints, keep)
    assert not fusions(trace)
    assert torch.equal(outs[0], (ints & 5) ^ ints) and torch.equal(outs[1], keep & 1)


@pytest.mark.parametrize("target", [torch.float16, torch.bfloat16], ids=str)
def test_casts_round_like_pytorch(emulated, generator, target):
    values = torch.cat([torch.tensor(SPECIALS), torch.randn(4096, generator=generator) * 1e3,
                        torch.randn(4096, generator=generator) * 1e-6, torch.randn(4096, generator=generator)])
    _, out, _ = jit_and_run(lambda a: (a * 1.0).to(target), values)
    expected = values.to(target)
    assert torch.equal(out.view(torch.int16)[~expected.isnan()], expected.view(torch.int16)[~expected.isnan()])
    assert out.isnan().equal(expected.isnan())
    back = out.float()  # and back to float32 exactly
    assert torch.equal(back[~back.isnan()], expected.float()[~back.isnan()])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_a_16_bit_value_negated_through_float_is_its_sign_bit_flipped(emulated, generator, dtype, monkeypatch):
    """``-x`` of a 16-bit x, as Thunder traces it (x to float, negated, rounded back), is exact: padvec
    flips x's sign bit instead (zeros, infinities, subnormals and the largest values alike; NaN stays
    NaN). A convert to the type a value has already is a copy. The same bits as eager, either way."""
    values = torch.cat([torch.tensor(SPECIALS), torch.randn(4095, generator=generator) * 1e3,
                        torch.randn(4096, generator=generator) * 1e-6]).to(dtype).reshape(-1, 8)

    def fn(x):  # the halves of a RoPE's rotate_half, and a convert to the type x has
        return torch.cat((-x[:, 4:], x[:, :4]), -1).to(dtype)

    render = importlib.import_module("thunder_padvec.codegen.render")
    expected = fn(values)
    for flip in (True, False):
        monkeypatch.setattr(render, "NEG_FLIP", flip)
        jitted, out, _ = jit_and_run(fn, values)
        numbers = ~expected.isnan()
        assert torch.equal(out.view(torch.int16)[numbers], expected.view(torch.int16)[numbers])
        assert out.isnan().equal(expected.isnan())
        (fusion, _), = fusions(thunder.last_traces(jitted)[-1])
        source = fusion.last.source
        assert ("= padvec_flip_sign(" in source) == flip
        assert not re.search(r"padvec_pack_\w+\(&s\d+\[j\], padvec_to_float\(s\d+\[j\]\)", source)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_word_pairs_and_float_twins_keep_the_bits_of_eager(emulated, generator, dtype, monkeypatch):
    """A RoPE's arithmetic as traced, on 16-bit values with zeros, infinities, NaN, subnormals and the
    largest values: built with word pairs (bf16 lanes widened two from one word, a rounded pair stored
    as one word) or without, and with float twins (the select of ``cat((-x2, x1))`` read as the floats
    it came from) or without, the same bits as eager every time."""
    render = importlib.import_module("thunder_padvec.codegen.render")
    x = torch.cat([torch.tensor(SPECIALS), torch.randn(1007, generator=generator) * 1e3,
                   torch.randn(1024, generator=generator) * 1e-6]).to(dtype).reshape(-1, 16)
    cos, sin = (randn(*x.shape, dtype=dtype, generator=generator) for _ in range(2))

    def fn(x, cos, sin):
        return x * cos + torch.cat((-x[:, 8:], x[:, :8]), -1) * sin

    expected = fn(x, cos, sin)
    numbers = ~expected.isnan()
    for pairs in (True, False):
        for twins in (True, False):
            monkeypatch.setattr(schedule.TUNING, "word_pairs", pairs)
            monkeypatch.setattr(render, "FLOAT_TWINS", twins)
            jitted, out, _ = jit_and_run(fn, x, cos, sin)
            assert torch.equal(out.view(torch.int16)[numbers], expected.view(torch.int16)[numbers]), (pairs, twins)
            assert out.isnan().equal(expected.isnan())
            (fusion, _), = fusions(thunder.last_traces(jitted)[-1])
            source = codegen.render(fusion.last.plan, fusion.last.params)
            pack = "padvec_pack_bf16x2" if dtype == torch.bfloat16 else "padvec_pack_halfx2"
            assert (f"{pack}(&" in source) == pairs and (f"{pack}<false>(&" in source) != pairs
            assert ("padvec_widen_bf16x2(&" in source) == (pairs and dtype == torch.bfloat16)
            assert bool(re.search(r"float t\d+\[\d+\];", source)) == twins
            assert nvrtc.compile_cubin(codegen.device_source(source), "sm_90")[:4] == b"\x7fELF"


@pytest.mark.parametrize("value, dtype, text", [
    (0.5, ir.DType.float32, "((float)0x1.0000000000000p-1)"),
    (math.inf, ir.DType.float32, "padvec_float_from_bits(0x7f800000u)"),
    (-math.inf, ir.DType.float64, "((double)padvec_float_from_bits(0xff800000u))"),
    (True, ir.DType.bool, "true"),
    (1, ir.DType.bfloat16, "padvec_bf16_from_float(((float)0x1.0000000000000p+0))"),
])
def test_literals(value, dtype, text):
    assert scalar.literal(value, dtype) == text


def _programs(generator):
    x = randn(2, 2, 16, 32, dtype=torch.bfloat16, generator=generator)
    cos, sin = randn(16, 8, dtype=torch.bfloat16, generator=generator), randn(16, 8, dtype=torch.bfloat16,
                                                                              generator=generator)
    yield rope_one_entry, (x, cos, sin, 8)
    a = randn(64, 6, generator=generator)
    yield (lambda t: (torch.nn.functional.pad(t, (1, -2)), torch.exp(t[1:]))), (a,)
    yield (lambda t: torch.where(t > 0, t.to(torch.float16), -1.0)), (a,)
    # the ops the prelude computes or that take a libm name of their own, in float32 and float64; bool masks
    for t in (a, a.double()):
        yield (lambda t: (torch.sign(t) + torch.remainder(t, 1.5) + torch.lerp(t, t * 2, t) + torch.maximum(t, -t)
                          + torch.round(t) + torch.abs(t) + torch.rsqrt(t * t))), (t,)
    yield (lambda t: torch.where(((t > 0) & ~(t < 1)) | ((t > 2) ^ (t < -2)), t, 0.0)), (a,)
    d = randn(8, 6, dtype=torch.float64, generator=generator)
    yield (lambda t: torch.cat((torch.sin(t), torch.pow(t.abs(), 0.5), torch.nn.functional.pad(t, (0, 2))), -1)
           .to(torch.bfloat16)), (d,)
    # register moves of gathers and windows (x's strided halves; the repeated sin and cos)
    yield hf_gptj_rope, (randn(2, 8, 4, 64, dtype=torch.bfloat16, generator=generator),
                         randn(2, 8, 16, generator=generator), 16)
    # transposed q and k, cos and sin per sequence (Hugging Face's Llama)
    yield hf_llama_rope, (*(randn(2, 8, heads, 64, dtype=torch.bfloat16, generator=generator).transpose(1, 2)
                            for heads in (4, 2)), *(randn(2, 8, 64, dtype=torch.bfloat16, generator=generator)
                                                    for _ in range(2)))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_generated_sources_compile_to_cubin(emulated, generator, arch):
    compiled = 0
    for fn, args in _programs(generator):
        _, _, trace = jit_and_run(fn, *args)
        for fusion, _ in fusions(trace):
            spec = fusion.last
            source = codegen.device_source(codegen.render(spec.plan, spec.params))
            cubin = nvrtc.compile_cubin(source, arch)
            assert cubin[:4] == b"\x7fELF"
            compiled += 1
    assert compiled >= 7


def test_64_bit_indices_compute_what_32_bit_indices_do(emulated, generator, monkeypatch):
    """Tensors of 2^30 elements or more take 64-bit index arithmetic (``schedule.INDEX32_LIMIT``); a GPU
    test runs one that size. Here every program takes them at small sizes, in emulation and through NVRTC."""
    from thunder_padvec.examples import qkv_split_rope

    qkv = randn(2, 8, (4 + 2 * 2) * 16, dtype=torch.bfloat16, generator=generator)
    cos, sin = (randn(8, 16, dtype=torch.bfloat16, generator=generator) for _ in range(2))
    cases = [*_programs(generator), (lambda q, c, s: qkv_split_rope(q, c, s, 4, 2, 16, 16), (qkv, cos, sin))]
    for fn, args in cases:
        _, narrow, _ = jit_and_run(fn, *args)
        with monkeypatch.context() as m:
            m.setattr(schedule, "INDEX32_LIMIT", 1)
            _, wide, trace = jit_and_run(fn, *args)
        as_tuple = lambda v: v if isinstance(v, tuple) else (v,)  # noqa: E731
        for got, same, want in zip(as_tuple(wide), as_tuple(narrow), as_tuple(fn(*args))):
            assert torch.equal(got, same)
            torch.testing.assert_close(got, want)
        for fusion, _ in fusions(trace):
            spec = fusion.last
            assert spec.params.index_bits == 64
            source = codegen.device_source(codegen.render(spec.plan, spec.params))
            assert "typedef long long" in source and nvrtc.compile_cubin(source, "sm_90")[:4] == b"\x7fELF"


@pytest.mark.parametrize("warp_tiles, min_blocks", [(True, 0), (False, 4)])
def test_staging_barriers_and_launch_bounds_knobs(emulated, generator, monkeypatch, warp_tiles, min_blocks):
    """The seed's staged rows: warp tiles wait with __syncwarp, block tiles with __syncthreads; a
    min_blocks knob reaches __launch_bounds__. Both run right in emulation and compile with NVRTC."""
    monkeypatch.setattr(importlib.import_module("thunder_padvec.vectorize.plan"), "NARROW_MAX_THREADS", 0)
    monkeypatch.setattr(schedule.TUNING, "warp_tiles", warp_tiles)
    monkeypatch.setattr(schedule.TUNING, "min_blocks", min_blocks)
    monkeypatch.setattr(schedule.TUNING, "register_rows", False)  # else these rows are staged in registers
    x = randn(3, 2, 11, 32, dtype=torch.bfloat16, generator=generator)
    cos, sin = (randn(11, 8, dtype=torch.bfloat16, generator=generator) for _ in range(2))
    _, out, trace = jit_and_run(rope_one_entry, x, cos, sin, 8)
    assert torch.equal(out, rope_one_entry(x, cos, sin, 8))
    ((fusion, _),) = fusions(trace)
    spec = fusion.last
    source = codegen.render(spec.plan, spec.params)
    barrier = "__syncwarp();" if warp_tiles else "__syncthreads();"
    assert source.count(barrier) == 2 and "__launch_bounds__(256" in source
    assert ("__launch_bounds__(256, 4)" in source) == bool(min_blocks)
    assert nvrtc.compile_cubin(codegen.device_source(source), "sm_90")[:4] == b"\x7fELF"


@pytest.mark.parametrize("registers, block, blocks, want", [
    (86, 256, 2, 3),  # grouped-query qkv backward: 80 registers give 3 blocks of 256
    (84, 256, 2, 3),
    (80, 256, 3, 0),  # already there; 4 blocks would need 64
    (104, 256, 2, 0),  # 24 over
    (45, 256, 5, 6),  # 40 give 6 (where shared memory does not hold it back)
    (73, 256, 3, 0),
    (30, 256, 8, 0),  # 2048 threads: no room for a ninth block
    (76, 128, 6, 7),  # 7 blocks of 128: 72 registers
    (60, 128, 7, 0),  # below 64 already: something other than registers limits it
])
def test_fit_blocks_asks_for_one_more_block_only_a_few_registers_away(registers, block, blocks, want):
    assert schedule.fit_blocks(registers, block, blocks) == want


def test_fit_blocks_gives_a_prefetching_kernel_its_extra_slack():
    """The grouped-query qkv backward with the L2 prefetches takes 90 registers, 10 over 80 (3 blocks of 256):
    fitted only with ``schedule.PREFETCH_SLACK`` more."""
    from dataclasses import replace

    plain = schedule.LaunchParams(256, 1, (), 32)
    fetching = replace(plain, prefetch=True)
    assert fetching.register_slack == schedule.REGISTER_SLACK + schedule.PREFETCH_SLACK == plain.register_slack + 4
    assert schedule.fit_blocks(90, 256, 2) == schedule.fit_blocks(90, 256, 2, slack=plain.register_slack) == 0
    assert schedule.fit_blocks(90, 256, 2, slack=fetching.register_slack) == 3
    assert schedule.fit_blocks(94, 256, 2, slack=fetching.register_slack) == 0


def test_nvrtc_error_is_typed_and_names_the_dumped_source(tmp_path, monkeypatch):
    monkeypatch.setenv("THUNDER_PADVEC_DUMP_DIR", str(tmp_path))
    source = codegen.device_source("extern \"C\" __global__ void padvec_kernel() { this is not C++; }\n")
    target = cache.Target("cubin", "sm_90 test", lambda src, path: nvrtc.compile_cubin(src, "sm_90", path), ".cu")
    with pytest.raises(CompileError) as info:
        cache.binary(source, target)
    err = info.value
    assert err.source_path is not None and err.source_path.parent == tmp_path
    assert err.source_path.read_text() == source
    assert str(err.source_path) in str(err)
    assert "error" in err.log
    assert "this is not C++" in err.numbered_source


def _inputs_loaded_with(source: str, op: str) -> set[str]:
    """The indices of the inputs (``args.in<i>``) that the source loads with ``op``."""
    return {line.split("args.in")[1][0] for line in source.splitlines() if op in line and "args.in" in line}


@pytest.mark.parametrize("example", ["litgpt", "qkv", "qkv-large"])
def test_cache_hints_stream_what_is_read_once(emulated, generator, monkeypatch, example):
    """With the hint knobs on, inputs read once (x, q) are loaded streaming and outputs stored
    streaming; cos and sin, and grouped-query keys that a group's heads share, are loaded with an L2
    evict_last policy (the default), but only inputs up to ``KEEP_MAX_BYTES``: with the limit below
    the size of qkv ("qkv-large"), its shared keys are loaded plainly. The numbers don't change, and
    the kernel compiles with NVRTC."""
    from thunder_padvec.examples import litgpt_rope, qkv_split_rope

    render = importlib.import_module("thunder_padvec.codegen.render")  # the module, not codegen.render

    assert schedule.TUNING.keep_hints and not schedule.TUNING.load_hints and not schedule.TUNING.store_hints
    monkeypatch.setattr(schedule.TUNING, "load_hints", True)
    monkeypatch.setattr(schedule.TUNING, "store_hints", True)
    if example == "qkv-large":  # qkv: 3072 bytes; cos and sin: 192 each
        monkeypatch.setattr(render, "KEEP_MAX_BYTES", 1024)
    if example == "litgpt":
        fn, args = litgpt_rope, (randn(2, 4, 6, 64, dtype=torch.bfloat16, generator=generator),
                                 *(randn(6, 64, dtype=torch.bfloat16, generator=generator) for _ in range(2)), 64)
    else:  # 4 heads in 2 query groups: k and v are expanded over each group's 2 heads
        fn = qkv_split_rope
        args = (randn(2, 6, 8 * 16, dtype=torch.bfloat16, generator=generator),
                *(randn(6, 16, dtype=torch.bfloat16, generator=generator) for _ in range(2)), 4, 2, 16, 16)
    _, out, trace = jit_and_run(fn, *args)
    expected = fn(*args)
    as_tuple = (lambda t: t if isinstance(t, tuple) else (t,))
    for got, want in zip(as_tuple(out), as_tuple(expected)):
        assert torch.equal(got, want)
    ((fusion, _),) = fusions(trace)
    source = codegen.render(fusion.last.plan, fusion.last.params)
    once, kept, plain = (_inputs_loaded_with(source, op) for op in ("padvec_load_once", "padvec_load_keep",
                                                                     "padvec_load<"))
    # x is input 0, cos and sin 1 and 2; in the qkv form input 0 holds q (read once) and k and v (shared)
    assert once == {"0"} and plain == ({"0"} if example == "qkv-large" else set()), source
    assert kept == ({"0", "1", "2"} if example == "qkv" else {"1", "2"}), source
    global_stores = [line for line in source.splitlines() if "padvec_store" in line and "args.out" in line]
    assert global_stores and all("padvec_store_once<" in line for line in global_stores), source
    assert nvrtc.compile_cubin(codegen.device_source(source), "sm_90")[:4] == b"\x7fELF"


@pytest.mark.parametrize("keep_once", ["on", "off", "launch"])
def test_by_default_inputs_are_loaded_with_the_evict_last_policy(emulated, generator, monkeypatch, keep_once):
    """Without the streaming knobs, x (read once) is loaded with the L2 evict_last policy like cos
    and sin (read again), unless ``KEEP_ONCE`` is off or the launch asks for the policy on inputs read
    again only (``LaunchParams.keep_once``, the "keep reused" variant); stores stay plain."""
    from thunder_padvec.examples import litgpt_rope

    render = importlib.import_module("thunder_padvec.codegen.render")
    assert render.KEEP_ONCE
    monkeypatch.setattr(render, "KEEP_ONCE", keep_once != "off")
    args = (randn(2, 4, 6, 64, dtype=torch.bfloat16, generator=generator),
            *(randn(6, 64, dtype=torch.bfloat16, generator=generator) for _ in range(2)), 64)
    _, out, trace = jit_and_run(litgpt_rope, *args)
    assert torch.equal(out, litgpt_rope(*args))
    ((fusion, _),) = fusions(trace)
    params = fusion.last.params
    source = codegen.render(fusion.last.plan, replace(params, keep_once=keep_once != "launch"))
    kept = _inputs_loaded_with(source, "padvec_load_keep")
    assert kept == ({"0", "1", "2"} if keep_once == "on" else {"1", "2"}), source
    assert not _inputs_loaded_with(source, "padvec_load_once"), source
    stores = [line for line in source.splitlines() if "padvec_store" in line and "args.out" in line]
    assert stores and all("padvec_store<" in line for line in stores), source


@pytest.mark.parametrize("blocks", [(3, 5), (2048, 3121), (1, 1000), (1000, 1), (7, 7, 7),
                                    (1024, 1561, 1024, 1561, 2560)])
def test_interleaved_blocks_take_each_segments_blocks_once_in_order(tmp_path, blocks):
    """``render._interleave``, compiled for the host and run for every block of the grid: each of a
    segment's blocks comes once, in increasing order, and each segment has run about its share of its
    blocks at any point of the grid (the pieces of a row run side by side)."""
    import shutil
    import subprocess

    from thunder_padvec.codegen.render import _interleave

    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    launches = [schedule.SegmentLaunch(sum(blocks[:i]), n, n * 256) for i, n in enumerate(blocks)]
    total = sum(blocks)
    body = "\n".join(_interleave(launches))
    source = ("#include <cstdio>\nint main() {\n" f"  for (unsigned int block = 0; block < {total}u; ++block) {{\n"
              + body + '\n    std::printf("%u %u\\n", seg, local);\n  }\n}\n')
    (tmp_path / "interleave.cpp").write_text(source)
    subprocess.run([cxx, "-O1", "-o", str(tmp_path / "interleave"), str(tmp_path / "interleave.cpp")], check=True)
    out = subprocess.run([str(tmp_path / "interleave")], check=True, capture_output=True, text=True).stdout
    pairs = [tuple(map(int, line.split())) for line in out.split("\n") if line]
    assert len(pairs) == total
    for s, n in enumerate(blocks):
        assert [local for seg, local in pairs if seg == s] == list(range(n)), s
    done = [0] * len(blocks)  # every segment is within a block or so of its share after b + 1 blocks
    for b, (seg, _) in enumerate(pairs):
        done[seg] += 1
        assert all(abs(d - (b + 1) * n / total) <= len(blocks) for d, n in zip(done, blocks)), (b, done)


_PAST_THE_END = """
#define PADVEC_SMEM_BYTES 16
struct padvec_args { const float* __restrict__ in0; float* __restrict__ out0; };
PADVEC_FN void padvec_run(const int phase, const padvec_args& args, unsigned char* smem) {
  if (phase != 1) return;
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  alignas(16) float v[4];
  padvec_load<4>(v, args.in0 + 4 * i);
  padvec_store<4>(args.out0 + 4 * i, v);
}
"""


@pytest.mark.parametrize("threads, fault", [
    (4, None),
    (5, "accessed memory outside its tensors 2 times"),
    (3, "wrote 0 elements of output 0 more than once and 4 never"),
    (-4, "wrote 8 elements of output 0 more than once and 8 never"),  # threads 2 and 3 write 0 and 1's
    (0, "accessed memory outside its tensors 4 times"),  # x read 2 KiB past its end
])
def test_emulation_checks_every_access_of_a_kernel(threads, fault):
    """The host prelude checks every load and store against the call's tensors: a thread past the end of
    a 16-element input and output reads and writes 16 bytes past each (inside the buffers here, which are
    larger, so the test itself stays in bounds), two accesses counted; registers are not. A read far from
    any tensor counts too (4 threads reading 2 KiB past x). It counts the writes of each output element:
    too few threads leave some unwritten, and threads that write the same elements (a race on the GPU)
    write them twice."""
    import ctypes

    from thunder_padvec.runtime import host

    source = _PAST_THE_END.replace("4 * i", "4 * (i % 2)") if threads < 0 else _PAST_THE_END
    if threads == 0:
        source, threads = source.replace("args.in0 + 4 * i", "args.in0 + 512 + 4 * i"), 4
    module = host.HostModule(host.compile_shared_object(codegen.host_source(source)))
    x, out = torch.arange(1024, dtype=torch.float32), torch.full((32,), float("nan"))
    args = (ctypes.c_void_p * 2)(x.data_ptr(), out.data_ptr())
    check = host.AccessCheck([x[:16]], [out[:16]])
    module.launch(1, abs(threads), ctypes.addressof(args), check)
    assert check.fault() == fault
    read = x[512:] if "512" in source else x
    assert torch.equal(out[:4 * min(abs(threads), 2 if threads < 0 else 8)],
                       read[:4 * min(abs(threads), 2 if threads < 0 else 8)])
    assert host.extent(x[:16]) == (x.data_ptr(), x.data_ptr() + 64)
    assert host.extent(x[:32:2]) == (x.data_ptr(), x.data_ptr() + 30 * 4 + 4) and host.extent(x[:0]) == (0, 0)


def _map_beside(lo: int, hi: int, nbytes: int) -> int | None:
    """An anonymous mapping of ``nbytes`` just below ``lo`` or just above ``hi`` (the first free page
    within 64 pages of either), or None where none is free."""
    import ctypes
    import mmap

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype, libc.mmap.argtypes = ctypes.c_void_p, (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                                             ctypes.c_int, ctypes.c_int, ctypes.c_long)
    fixed_noreplace = 0x100000
    for k in range(1, 65):
        for want in (lo - (k + 1) * mmap.PAGESIZE, hi + (k - 1) * mmap.PAGESIZE):
            got = libc.mmap(want, nbytes, mmap.PROT_READ | mmap.PROT_WRITE,
                            mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | fixed_noreplace, -1, 0)
            if got == want:
                return got
            if got not in (None, ctypes.c_void_p(-1).value):
                libc.munmap(ctypes.c_void_p(got), ctypes.c_size_t(nbytes))  # an older kernel's hint elsewhere
    return None


def test_emulation_counts_the_writes_into_an_output_that_lies_beside_a_threads_stack():
    """A thread's heap may be mapped right beside its stack: the writes into an output there are counted
    as the output's, not taken for register arrays (a false "never written" once failed a threaded test)."""
    import ctypes
    import mmap
    import threading

    from thunder_padvec.runtime import host

    module = host.HostModule(host.compile_shared_object(codegen.host_source(_PAST_THE_END)))
    libc = ctypes.CDLL(None)
    libc.pthread_self.restype = ctypes.c_ulong
    found = {}

    def run():
        attr, lo, size = ctypes.create_string_buffer(256), ctypes.c_void_p(), ctypes.c_size_t()
        if libc.pthread_getattr_np(ctypes.c_ulong(libc.pthread_self()), attr) != 0:
            return
        libc.pthread_attr_getstack(attr, ctypes.byref(lo), ctypes.byref(size))
        libc.pthread_attr_destroy(attr)
        address = _map_beside(lo.value, lo.value + size.value, mmap.PAGESIZE)
        if address is None:
            return
        try:
            buffer = (ctypes.c_float * 32).from_address(address)
            x, out = torch.arange(32, dtype=torch.float32), torch.frombuffer(buffer, dtype=torch.float32)
            out.fill_(float("nan"))
            args = (ctypes.c_void_p * 2)(x.data_ptr(), out.data_ptr())
            check = host.AccessCheck([x[:16]], [out[:16]])
            module.launch(1, 4, ctypes.addressof(args), check)
            found.update(fault=check.fault(), equal=torch.equal(out[:16], x[:16]), near=address - lo.value)
            del out
        finally:
            libc.munmap(ctypes.c_void_p(address), ctypes.c_size_t(mmap.PAGESIZE))

    previous = threading.stack_size(256 * 1024)  # a small stack: the mapping lies within a few hundred KiB
    try:
        thread = threading.Thread(target=run)
        thread.start()
        thread.join()
    finally:
        threading.stack_size(previous)
    if not found:
        pytest.skip("no free page beside the thread's stack")
    assert found["equal"] and found["fault"] is None, found
