"""End to end through thunder.jit: what padvec claims, how it fuses, and that results match eager.

CPU emulation runs the same generated kernels the GPU runs; outputs are poisoned with NaN
before each launch (conftest), so an unwritten element fails the comparison.
"""

import pytest
import thunder
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from thunder.core import dtypes, prims
from thunder.core.devices import Device
from thunder.core.proxies import TensorProxy
from thunder.core.trace import TraceCtx, tracectx

from helpers import jit_and_run, randn, train_beside_eager, ulp_distance_bf16, unfused_ops
from thunder_padvec import ops, padvec
from thunder_padvec.examples import AttentionBlock, litgpt_rope, qkv_split_rope, rope_one_entry
from thunder_padvec.explain import explain, fusions
from thunder_padvec.fusion import Fallback, PadvecFusion

ROPE_SHAPES = [
    pytest.param((2, 2, 16, 32, 8), id="rope8-of-32"),
    pytest.param((2, 2, 16, 32, 32), id="rope-equals-head"),  # x[..., 32:] is an empty cat piece
    pytest.param((2, 3, 8, 17, 8), id="odd-head-size"),
    pytest.param((1, 2, 8, 20, 12), id="rope12-of-20"),
]
DTYPES = [torch.bfloat16, torch.float16, torch.float32]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", ROPE_SHAPES)
def test_seed_rope_matches_eager_bit_for_bit(emulated, generator, shape, dtype):
    b, h, t, hs, n = shape
    x = randn(b, h, t, hs, dtype=dtype, generator=generator)
    cos, sin = randn(t, n, dtype=dtype, generator=generator), randn(t, n, dtype=dtype, generator=generator)

    jitted, out, trace = jit_and_run(rope_one_entry, x, cos, sin, n)

    assert len(fusions(trace)) == 1
    assert unfused_ops(trace) == []
    expected = rope_one_entry(x, cos, sin, n)
    # The trace rounds to the input dtype after every op, exactly as eager does.
    assert torch.equal(out, expected)
    assert ulp_distance_bf16(out, expected) == 0


def test_fusion_names_end_in_digits_and_regions_split_around_unclaimed_ops(emulated, generator):
    def fn(a, b):
        c = torch.cat((a, -a), dim=-1)
        d = c @ b  # not claimed: splits the program into two padvec regions
        return torch.nn.functional.pad(d, (1, 2)) * 2.0

    a, b = randn(4, 3, generator=generator), randn(6, 5, generator=generator)
    _, out, trace = jit_and_run(fn, a, b)

    names = [bsym.sym.name for _, bsym in fusions(trace)]
    assert names == ["padvec0", "padvec1"]
    assert unfused_ops(trace) == []
    torch.testing.assert_close(out, fn(a, b), rtol=0, atol=0)


def test_non_contiguous_inputs(emulated, generator):
    x = randn(2, 16, 4, 32, generator=generator, dtype=torch.bfloat16).transpose(1, 2)  # [2, 4, 16, 32] view
    cos, sin = randn(16, 8, generator=generator, dtype=torch.bfloat16), randn(16, 8, generator=generator,
                                                                              dtype=torch.bfloat16)
    _, out, _ = jit_and_run(rope_one_entry, x, cos, sin, 8)
    assert torch.equal(out, rope_one_entry(x, cos, sin, 8))


def test_cpu_tensors_without_emulation_run_in_pytorch(generator):
    x, cos, sin = randn(1, 2, 8, 16, generator=generator), randn(8, 8, generator=generator), randn(
        8, 8, generator=generator)
    _, out, trace = jit_and_run(rope_one_entry, x, cos, sin, 8)
    assert fusions(trace) == []
    assert torch.equal(out, rope_one_entry(x, cos, sin, 8))


def test_symbolic_shapes_run_in_pytorch(emulated, generator):
    """Thunder's experimental symbolic-values cache traces shapes as proxies: padvec claims none of those
    ops (its kernels are specialized to static shapes); two batch sizes give eager's results."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Thunder warns that the option is experimental
        jitted = thunder.jit(rope_one_entry, executors=[padvec], cache="symbolic values")
        for batch in (1, 3):
            x = randn(batch, 2, 8, 16, dtype=torch.bfloat16, generator=generator)
            cos, sin = randn(8, 8, dtype=torch.bfloat16, generator=generator), randn(
                8, 8, dtype=torch.bfloat16, generator=generator)
            assert torch.equal(jitted(x, cos, sin, 8), rope_one_entry(x, cos, sin, 8))
    assert fusions(thunder.last_traces(jitted)[-1]) == []


def test_unsupported_dtype_runs_in_pytorch(emulated, generator):
    x = torch.randint(-100, 100, (4, 8), generator=generator, dtype=torch.int32)
    _, out, trace = jit_and_run(lambda a: torch.cat((a[:, 4:], -a[:, :4]), dim=1), x)
    assert fusions(trace) == []
    assert torch.equal(out, torch.cat((x[:, 4:], -x[:, :4]), dim=1))


def test_strided_slices_of_inputs_fuse_and_of_computed_values_are_left_to_pytorch(emulated, generator):
    def of_input(a):
        return torch.cat((a[:, ::2] * 3.0, a[:, 1::2]), dim=1)

    def of_computed(a):
        b = a * 3.0
        return torch.cat((b[:, ::2], b[:, 1::2]), dim=1)

    x = randn(4, 16, generator=generator)
    _, out, trace = jit_and_run(of_input, x)
    assert len(fusions(trace)) == 1 and unfused_ops(trace) == []
    assert torch.equal(out, of_input(x))
    _, out, trace = jit_and_run(of_computed, x)
    assert len(fusions(trace)) == 2 and set(unfused_ops(trace)) == {"slice_prim"}
    assert torch.equal(out, of_computed(x))


def test_narrow_is_a_slice_in_the_kernel(emulated, generator):
    """``narrow``, which Thunder runs as one opaque PyTorch call, becomes the slice it is: of an input and of a
    computed value, negative dims and starts, an empty one, forward and in training (its gradient runs in
    PyTorch), one kernel each time; integer tensors stay in PyTorch."""
    def fn(x):
        y = torch.cat((x.narrow(-1, 2, 4) * 2.0, torch.narrow(x, 1, -3, 3)), dim=-1)
        return (y + 1.0).narrow(0, 1, 2), x.narrow(1, 0, 0) * 3.0

    x = randn(3, 8, generator=generator)
    for requires_grad in (False, True):
        x.requires_grad_(requires_grad)
        jitted, outs, trace = jit_and_run(fn, x)
        assert len(fusions(trace)) == 1 and not unfused_ops(trace)
        assert "narrow" not in [b.sym.name for b in trace.bound_symbols]
        for got, want in zip(outs, fn(x)):
            assert got.shape == want.shape and torch.equal(got, want)
    cotangent = randn(*outs[0].shape, generator=generator)
    (grad,) = torch.autograd.grad(outs[0], x, cotangent)
    assert torch.equal(grad, torch.autograd.grad(fn(x)[0], x, cotangent)[0])

    ints = torch.randint(-9, 9, (3, 8), generator=generator, dtype=torch.int32)
    _, out, trace = jit_and_run(lambda t: t.narrow(1, 2, 3) * 2, ints)
    assert not fusions(trace) and torch.equal(out, ints.narrow(1, 2, 3) * 2)


def _proxy(shape, dtype=dtypes.float32, device="cpu"):
    return TensorProxy(shape=shape, device=Device(device), dtype=dtype, requires_grad=False)


def test_checkers_decline_bad_input_without_raising(emulated):
    check = {prim_id: c for prim_id, (c, _) in ops.OPS.items()}
    with tracectx(TraceCtx()):
        a = _proxy((4, 4))
        assert check[prims.pad.id](a, 0.0, [(1, 1, 0), (0, 0, 0)])
        assert not check[prims.pad.id](a, 0.0, [(1, 1, 1), (0, 0, 0)])  # dilated, the last row cut
        assert check[prims.pad.id](a, 0.0, [(1, 0, 1), (0, 0, 0)])  # dilated in whole rows of 2
        assert not check[prims.pad.id](a, 0.0, [(1, 0, 1), (1, 0, 1)])  # dilated along two dims
        assert check[prims.slice_prim.id](a, [0, 1], [4, 4], [1, 1])
        assert check[prims.slice_prim.id](a, [0, 0], [4, 4], [1, 2])  # strided (folded where of an input)
        assert not check[prims.slice_prim.id](a, [0, 0], [4, 4], [1, 0])  # a step of 0
        assert check[prims.add.id](_proxy((4, 4), dtypes.float64), 1.0)
        assert not check[prims.add.id](_proxy((4, 4), dtypes.complex64), 1.0)  # dtype
        assert not check[prims.add.id](_proxy((4, 4), dtypes.int32), 1)
        assert check[prims.broadcast_in_dim.id](_proxy((4, 1)), (2, 4, 3), (1, 2))
        assert not check[prims.broadcast_in_dim.id](_proxy((4, 4)), (4, 5), ())  # dims missing
        assert not check[prims.broadcast_in_dim.id](_proxy((4, 4)), (4, 5), (0, 1))  # 4 to 5
        assert not check[prims.broadcast_in_dim.id](_proxy((4, 4)), (4, 4, 4), (1, 0))  # dims out of order
        for c in check.values():  # garbage never raises
            assert c(object(), None) is False
            assert c() is False
        assert ops.narrow_checker(a, -1, -3, 3) and ops.narrow_checker(a, 0, 4, 0)
        assert not ops.narrow_checker(a, 2, 0, 1)  # no dim 2
        assert not ops.narrow_checker(a, 1, 2, 3)  # past the end
        assert not ops.narrow_checker(a, 1, -5, 1)  # before the start
        assert not ops.narrow_checker(a, 1, 1.0, 1)  # not an int
        assert not ops.narrow_checker(_proxy((4, 4), dtypes.int32), 1, 0, 2)
        assert ops.narrow_checker(object(), None) is False and ops.narrow_checker() is False


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", [(3, 5), (1, 4)])  # (1, 4): whole rows a thread, which may be staged
def test_a_zero_dim_value_the_region_computes_broadcasts_against_the_shape_it_meets(emulated, generator, dtype,
                                                                                    shape):
    """Thunder's elementwise prims take a 0-d tensor beside tensors of any shape, as PyTorch does: an input
    (a gradient's scale), the full sum of a block, scaling the block's pad, or choosing between two cats."""
    programs = [
        lambda a, k: k * a + a,
        lambda a, k: a.sum() * k + a,
        lambda a, k: torch.nn.functional.pad(a, (3, -1), value=7.0) * a.sum(),
        lambda a, k: torch.where(a.sum() > k, torch.cat((a, -a), -1), torch.cat((-a, a), -1)),
    ]
    a, k = randn(*shape, dtype=dtype, generator=generator), randn((), dtype=dtype, generator=generator)
    for fn in programs:
        jitted, out, trace = jit_and_run(fn, a, k)
        (fusion, _), = fusions(trace)
        assert fusion.name == "padvec0" and not isinstance(fusion.last, Fallback)  # a kernel ran
        want = fn(a, k)
        assert out.dtype == want.dtype and not out.isnan().any()
        torch.testing.assert_close(out, want, rtol=1e-5 if dtype == torch.float32 else 1.6e-2, atol=1e-5)


def test_a_region_whose_trace_contradicts_itself_runs_in_pytorch(emulated):
    """Thunder 0.2.6's gradient of ``prims.mul`` with a 0-d operand records a result of the other operand's
    shape as 0-d: a kernel would trust the record, so the region is left to PyTorch, as ops that say it."""
    from types import SimpleNamespace

    from thunder_padvec.errors import InconsistentTrace
    from thunder_padvec.lower import lower

    with tracectx(TraceCtx()):
        a, g, wrong = _proxy((3,)), _proxy((3,)), _proxy(())
        mul = prims.mul.bind(a, g, output=wrong)
        with pytest.raises(InconsistentTrace, match=r"of shape \(\) reads .* of shape \(3,\)"):
            lower([a, g], [wrong], [mul])
        fused = padvec.fuse(SimpleNamespace(inputs=[a, g], outputs=[wrong], bound_symbols=[mul]), 0)
    assert fused.sym.name == "padvec0" and not isinstance(fused._call_ctx["padvec0"], PadvecFusion)


def test_cpu_proxies_are_declined_without_emulation():
    with tracectx(TraceCtx()):
        a = _proxy((4,))
        assert not padvec.can_execute(prims.neg.bind(a, output=_proxy((4,))))


@pytest.mark.parametrize("config, claimed", [
    ([(1, 2, 1)], True),  # 5 elements in rows of 2 (one padding row after): the pad joins the kernel
    ([(-1, 3, 2)], True),  # the first row cropped
    ([(0, 0, 1)], False),  # 9 elements: the last row cut in half, left to PyTorch
    ([(1, 0, 1), (0, 1, 1)], False),  # dilated along two dims
])
def test_a_dilated_pad_joins_the_kernel_where_it_is_whole_rows(emulated, generator, config, claimed):
    """A pad with interior padding (Thunder's gradient of a strided slice) is rows of ``interior + 1``,
    merged (``ops.dilation``); where its ends cut into a row it runs in PyTorch. Eager's values either way."""
    def fn(a):
        return prims.pad(a, 0.5, config) * 2.0

    x = randn(*([5] * len(config)), generator=generator)
    jitted = thunder.jit(fn, executors=[padvec])
    out = jitted(x)
    trace = thunder.last_traces(jitted)[-1]
    fused_prims = [sub.sym.id for _, bsym in fusions(trace) for sub in bsym.subsymbols]
    assert prims.mul.id in fused_prims and (prims.pad.id in fused_prims) == claimed
    sizes = [lo + 5 + 4 * interior + hi for lo, hi, interior in config]
    expected = torch.full(sizes, 0.5)
    index = tuple(slice(lo if lo >= 0 else lo % (interior + 1), lo + 5 + 4 * interior, interior + 1)
                  for lo, hi, interior in config)
    source = tuple(slice(0 if lo >= 0 else -(lo // (interior + 1)), None) for lo, hi, interior in config)
    expected[index] = x[source]
    assert torch.equal(out, expected * 2.0)


@pytest.mark.parametrize("head_size, rope_n_elem", [(128, 128), (80, 32), (64, 16), (256, 256), (96, 96), (40, 40)])
def test_litgpt_rope_matches_eager_bit_for_bit(emulated, generator, head_size, rope_n_elem):
    """LitGPT's RoPE at its models' head sizes: long rows are split among several warps."""
    x = randn(1, 2, 40, head_size, dtype=torch.bfloat16, generator=generator)
    cos = randn(40, rope_n_elem, dtype=torch.bfloat16, generator=generator)
    sin = randn(40, rope_n_elem, dtype=torch.bfloat16, generator=generator)
    _, out, trace = jit_and_run(litgpt_rope, x, cos, sin, rope_n_elem)
    assert len(fusions(trace)) == 1 and unfused_ops(trace) == []
    assert torch.equal(out, litgpt_rope(x, cos, sin, rope_n_elem))


def test_qkv_split_rope_matches_eager(emulated, generator):
    qkv = randn(2, 16, (4 + 2 * 2) * 32, dtype=torch.bfloat16, generator=generator)
    cos, sin = randn(16, 16, dtype=torch.bfloat16, generator=generator), randn(16, 16, dtype=torch.bfloat16,
                                                                                generator=generator)
    _, out, trace = jit_and_run(qkv_split_rope, qkv, cos, sin, 4, 2, 32, 16)
    assert fusions(trace)
    for got, want in zip(out, qkv_split_rope(qkv, cos, sin, 4, 2, 32, 16)):
        assert torch.equal(got, want)


def _region_of(fn, *args):
    """``fn``'s traced region, Thunder's torch-level symbols as the partitioner hands them over."""
    from types import SimpleNamespace

    from thunder.core.proxies import variableify

    jitted = thunder.jit(fn, executors=[])
    jitted(*args)
    trace = thunder.last_traces(jitted)[0]
    body = [b for b in trace.bound_symbols if b.sym.id not in (prims.PrimIDs.UNPACK_TRIVIAL, prims.PrimIDs.RETURN)
            and b.sym.name != "shape"]
    outputs = [variableify(p) for p in trace.bound_symbols[-1].args[0]]
    return SimpleNamespace(inputs=[variableify(p) for p in trace.args], outputs=outputs, bound_symbols=body)


def _with_foreign_ops(x, cos, sin):
    """RoPE after ops padvec does not take in a kernel: a cumsum (never claimed) and a transpose of a
    value the region computes, as another executor's rematerialization can leave in a padvec region."""
    t = (x * 0.5).transpose(-1, -2)
    return litgpt_rope(t + torch.cumsum(t, -1), cos, sin, rope_n_elem=8), t * 3


def test_a_region_with_ops_a_kernel_cannot_take_runs_them_in_pytorch_first(emulated, generator):
    from thunder_padvec.fusion import PadvecFusion, Specialization, WithPrologue

    x = randn(2, 3, 16, 5, generator=generator)
    cos, sin = randn(5, 8, generator=generator), randn(5, 8, generator=generator)
    bsym = padvec.fuse(_region_of(_with_foreign_ops, x, cos, sin), 0)
    fn = bsym._call_ctx[bsym.sym.name]
    assert isinstance(fn, WithPrologue) and isinstance(fn.fusion, PadvecFusion)
    outs = fn(x, cos, sin)
    for got, want in zip(outs, _with_foreign_ops(x, cos, sin), strict=True):
        assert torch.equal(got, want)
    assert isinstance(fn.fusion.last, Specialization)  # the kernel ran: the rope after the prologue
    # the prologue is the cumsum and what it needs (the scale and its transpose); the add is the kernel's
    assert fn.ops == ("mul", "transpose", "cumsum")
    # the kernel reads cos, sin and the prologue's two results (t and its cumsum), and makes both outputs
    assert fn.prologue_args == (0,) and fn.fusion_args == (("arg", 1), ("arg", 2), ("prologue", 0), ("prologue", 1))
    assert fn.results == (("fusion", 0), ("fusion", 1))


def test_a_region_of_ops_a_kernel_cannot_take_runs_in_pytorch(emulated, generator):
    def fn(x):
        return torch.cumsum(x * 2, -1)

    x = randn(3, 8, generator=generator)
    bsym = padvec.fuse(_region_of(fn, x), 0)
    (out,) = bsym._call_ctx[bsym.sym.name](x)
    assert torch.equal(out, fn(x))


def _train_beside(executor_name, device, dtype, generator):
    """The attention block of the training tests, trained in eager and with ``executors=[padvec,
    <executor_name>]``: both runs' losses, and the jitted model."""
    return train_beside_eager(AttentionBlock, [padvec, thunder.get_executor(executor_name)], device, dtype,
                              generator)


def test_padvec_composes_with_executors_after_it_that_rematerialize(emulated, generator):
    """``executors=[padvec, torchcompile]``: torch.compile's fusion pass rematerializes across every
    executor's fusions and moves some of its ops into padvec's (here a scale and a permute of it, into
    the backward's RoPE region): they run in PyTorch before the kernel, and training matches eager. It
    also fuses every padvec region again: the qkv gradient's kernel still allocates its output in the
    order of the permute that follows it."""
    from thunder_padvec.fusion import WithPrologue

    losses, eager, jitted = _train_beside("torchcompile", "cpu", torch.float32, generator)
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(eager), rtol=1e-5, atol=0)
    backward = thunder.last_backward_traces(jitted)[-1]
    callables = [b._call_ctx[b.sym.name] for b in backward.bound_symbols if b.sym.name.startswith("padvec")]
    assert any(isinstance(c, WithPrologue) for c in callables)
    reports = explain(jitted)
    assert {r.trace for r in reports} == {"forward", "backward"}
    assert any("run in PyTorch before the kernel: " in str(r) for r in reports if r.trace == "backward")
    assert any(r.output_orders for r in reports if r.trace == "backward"), [str(r) for r in reports]


@pytest.mark.gpu
def test_padvec_composes_with_executors_after_it_that_rematerialize_on_the_gpu(generator):
    losses, eager, jitted = _train_beside("torchcompile", "cuda", torch.float32, generator)
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(eager), rtol=1e-4, atol=0)
    reports = explain(jitted)
    assert {r.trace for r in reports} == {"forward", "backward"}
    assert all(r.launch is not None for r in reports), [str(r) for r in reports]


@pytest.mark.parametrize("groups, head_size", [(4, 64), (2, 64), (4, 32)])
def test_outputs_made_from_a_permuted_view_take_the_memory_order_pytorch_gives_them(emulated, generator, monkeypatch,
                                                                                    groups, head_size):
    """With ``TUNING.eager_orders``, the qkv form with a key and value head per query head (q and k computed
    pointwise from views of qkv whose heads lie inner to the tokens) allocates q and k as eager lays them
    out, heads inner to tokens, where their rows are whole cache lines (64 bf16 features: 128 bytes): their
    strides are eager's, their values eager's bit for bit, and the kernel writes them in that order
    (``explain`` names it). Rows of 64 bytes stay row-major, and their region does not run on meta tensors
    to learn eager's order. With grouped queries eager's q, k and v are row-major (the reshape copies), and
    so are padvec's without ``TUNING.source_orders`` (off here). Off, every output is row-major."""
    from thunder_padvec import executor
    from thunder_padvec.schedule import TUNING

    monkeypatch.setattr(TUNING, "source_orders", False)

    runs = []
    eager_orders = executor._eager_orders
    monkeypatch.setattr(executor, "_eager_orders", lambda *a: runs.append(a) or eager_orders(*a))

    qkv = randn(2, 16, (4 + 2 * groups) * head_size, dtype=torch.bfloat16, generator=generator)
    cos, sin = (randn(16, head_size, dtype=torch.bfloat16, generator=generator) for _ in range(2))
    args = (qkv, cos, sin, 4, groups, head_size, head_size)
    want = qkv_split_rope(*args)
    for on in (True, False):
        monkeypatch.setattr(TUNING, "eager_orders", on)
        jitted, got, _ = jit_and_run(qkv_split_rope, *args)
        for g, w in zip(got, want):
            assert torch.equal(g, w)
        (report,) = explain(jitted)
        if on and head_size == 64:
            assert [g.stride() for g in got] == [w.stride() for w in want]
            assert list(report.output_orders.values()) == ([(0, 2, 1, 3)] * 2 if groups == 4 else []), str(report)
        else:
            assert all(g.is_contiguous() for g in got[:2]) and not report.output_orders
    assert groups == 2 or not want[0].is_contiguous()  # the case is the one it means to be
    assert bool(runs) == (head_size == 64)


@pytest.mark.parametrize("head_size", [64, 32])
def test_grouped_query_outputs_take_the_memory_order_of_qkv(emulated, generator, monkeypatch, head_size):
    """With ``TUNING.source_orders``, the grouped-query form's q, k and v (row-major in eager: its reshape
    copies) are allocated heads inner to tokens, as qkv holds them, where their rows are whole cache lines
    (64 bf16 features); rows of 64 bytes stay row-major. Values stay eager's bit for bit, and so does qkv's
    gradient; off, every output is row-major."""
    from thunder_padvec.schedule import TUNING

    qkv = randn(2, 8, (4 + 2 * 2) * head_size, dtype=torch.bfloat16, generator=generator).requires_grad_()
    cos, sin = (randn(8, head_size, dtype=torch.bfloat16, generator=generator) for _ in range(2))
    args = (qkv, cos, sin, 4, 2, head_size, head_size)
    want = qkv_split_rope(*args)
    cotangents = [randn(*w.shape, dtype=torch.bfloat16, generator=generator) for w in want]
    (eager_grad,) = torch.autograd.grad(want, qkv, cotangents)
    for on in (True, False):
        monkeypatch.setattr(TUNING, "source_orders", on)
        jitted = thunder.jit(qkv_split_rope, executors=[padvec])
        got = jitted(*args)
        taken = on and head_size == 64
        for g, w in zip(got, want):
            assert torch.equal(g, w) and w.is_contiguous()
            assert g.stride() == ((8 * 4 * head_size, head_size, 4 * head_size, 1) if taken else w.stride())
        (grad,) = torch.autograd.grad(got, qkv, cotangents)
        assert torch.equal(grad, eager_grad)
        forward = [r for r in explain(jitted) if r.trace == "forward"]
        orders = [list(r.output_orders.values()) for r in forward]
        assert orders == ([[(0, 2, 1, 3)] * 3] if taken else [[]]), [str(r) for r in forward]


def test_an_output_takes_its_sources_order_only_where_its_loads_agree(emulated, generator):
    """``TUNING.source_orders`` on a program of its own: heads merged into the batch from a permuted x
    (eager's reshape copies it row-major) come out in x's order, tokens outermost, where rows are whole
    lines (32 floats); added to a row-major y of the same shape they stay row-major, as with rows of 16
    floats. Values are eager's bit for bit."""

    def merged(x):
        B, T, H, D = x.shape
        return x.permute(0, 2, 1, 3).reshape(B * H, T, D) * 2

    def merged_plus(x, y):
        return merged(x) + y

    for D in (32, 16):
        x = randn(2, 8, 3, D, generator=generator)
        y = randn(6, 8, D, generator=generator)
        for fn, args in ((merged, (x,)), (merged_plus, (x, y))):
            jitted, got, _ = jit_and_run(fn, *args)
            want = fn(*args)
            assert torch.equal(got, want) and want.is_contiguous()
            if fn is merged and D == 32:
                assert got.stride() == (D, 6 * D, 1), got.stride()  # [B * H, T, D] in x's order: T outermost
            else:
                assert got.is_contiguous(), got.stride()


def test_the_memory_order_of_a_view():
    """``executor._view_order``: a view's dims by their strides in its row-major input; None for row-major,
    for an order that moves the innermost dim, and for a dim that only repeats."""
    from thunder_padvec.executor import _view_order
    from thunder_padvec.ir import DType, TensorType, View

    def order(shape, chain, out_shape):
        return _view_order(View("v", TensorType(out_shape, DType.bfloat16), "x", chain), shape)

    assert order((2, 5, 3, 8), (("permute", (0, 2, 1, 3)),), (2, 3, 5, 8)) == (0, 2, 1, 3)
    assert order((2, 5, 3, 8), (("permute", (0, 1, 3, 2)),), (2, 5, 8, 3)) is None  # the innermost dim moves
    assert order((2, 5, 3, 8), (), (2, 5, 3, 8)) is None  # row-major
    # the grouped-query form: qkv [B, T, groups * (q_per_kv + 2) * hs] to q [B, heads, T, hs] and an expanded k
    grouped = (("reshape", (2, 16, 2, 4, 8)), ("permute", (0, 2, 3, 1, 4)))
    q = grouped + (("slice", (0, 0, 0, 0, 0), (2, 2, 2, 16, 8)), ("reshape", (2, 4, 16, 8)))
    assert order((2, 16, 64), q, (2, 4, 16, 8)) == (0, 2, 1, 3)
    k = grouped + (("slice", (0, 0, 2, 0, 0), (2, 2, 3, 16, 8)), ("expand", (2, 2, 2, 16, 8), (0, 1, 2, 3, 4)),
                   ("reshape", (2, 4, 16, 8)))
    assert order((2, 16, 64), k, (2, 4, 16, 8)) == (0, 2, 1, 3)
    repeated = (("reshape", (2, 1, 16, 8)), ("expand", (2, 4, 16, 8), (0, 1, 2, 3)))
    assert order((2, 16, 8), repeated, (2, 4, 16, 8)) is None  # the heads only repeat
    assert order((1, 5, 3, 8), (("permute", (0, 2, 1, 3)),), (1, 3, 5, 8)) == (0, 2, 1, 3)  # size 1 in place


@settings(max_examples=300, deadline=None, derandomize=True)
@given(data=st.data())
def test_a_views_memory_order_is_the_one_pytorch_gives_it(data):
    """``executor._view_order`` (from the folded chain) against ``_dense_order`` of the view PyTorch makes
    of a row-major tensor, on chains of permutes and reshapes that merge or split dims, wherever PyTorch's
    result is a view (a reshape may copy)."""
    from thunder_padvec.executor import _dense_order, _view_order
    from thunder_padvec.fusion import apply_chain
    from thunder_padvec.ir import DType, TensorType, View

    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=2, max_size=5), label="shape"))
    chain, current = [], shape
    for step in data.draw(st.lists(st.sampled_from(["permute", "merge", "split"]), min_size=1, max_size=4),
                          label="steps"):
        if step == "permute":
            chain.append(("permute", tuple(data.draw(st.permutations(range(len(current)))))))
            current = tuple(current[d] for d in chain[-1][1])
        elif step == "merge" and len(current) > 1:
            k = data.draw(st.integers(0, len(current) - 2))
            current = current[:k] + (current[k] * current[k + 1],) + current[k + 2:]
            chain.append(("reshape", current))
        elif step == "split" and 4 in current:
            k = current.index(4)
            current = current[:k] + (2, 2) + current[k + 1:]
            chain.append(("reshape", current))
    x = torch.empty(shape)
    view = apply_chain(x, tuple(chain))
    assume(view._base is x or (not chain and view is x))  # PyTorch made a view, not a copy
    got = _view_order(View("v", TensorType(tuple(view.shape), DType.float32), "x", tuple(chain)), shape)
    assert got == _dense_order(view), (chain, view.stride())


def test_the_memory_order_of_a_dense_tensor():
    """``executor._dense_order``: dims by stride, those of size 1 in place; None for row-major, for gaps or
    repeats, and for an order that moves the innermost dim."""
    from thunder_padvec.executor import _dense_order

    x = torch.empty(2, 5, 3, 8)
    assert _dense_order(x) is None
    assert _dense_order(x.permute(0, 2, 1, 3)) == (0, 2, 1, 3)
    assert _dense_order(torch.empty(5, 1, 3, 8).permute(1, 2, 0, 3)) == (0, 2, 1, 3)  # the size-1 dim stays
    assert _dense_order(torch.empty(1, 5, 3, 8).permute(0, 2, 1, 3)) == (0, 2, 1, 3)
    assert _dense_order(x.transpose(2, 3)) is None  # the innermost dim moved
    assert _dense_order(x[:, :, :2]) is None  # a gap
    assert _dense_order(x[:, :1].expand(2, 5, 3, 8)) is None  # repeats
    assert _dense_order(torch.empty(8)) is None
