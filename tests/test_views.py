"""Layout ops folded into loads: the folding itself (fixed and random chains), LitGPT's qkv split fused with its
RoPE, and random chains through padvec."""

import importlib
import itertools
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
import torch
import torch.nn.functional as F
from helpers import jit_and_run, randn, unfused_ops

from thunder_padvec import explain, schedule
from thunder_padvec.examples import hf_mrope, qkv_split_rope
from thunder_padvec.explain import fusions
from thunder_padvec.vectorize.views import contiguous_strides, fold


def _gather(x: torch.Tensor, layout) -> torch.Tensor:
    """The elements a folded view addresses, read from ``x``'s storage."""
    shape = tuple(math_prod(e for e, _ in comps) for comps in layout.dims)
    storage = x.as_strided((x.untyped_storage().nbytes() // x.element_size(),), (1,), 0)
    index = torch.empty(shape, dtype=torch.long)
    for coords in itertools.product(*(range(s) for s in shape)):
        address = x.storage_offset() + layout.offset
        for c, comps in zip(coords, layout.dims):
            inner = math_prod(e for e, _ in comps)
            for extent, stride in comps:
                inner //= extent
                address += (c // inner % extent) * stride
        index[coords] = address
    return storage[index]


def math_prod(values) -> int:
    out = 1
    for v in values:
        out *= v
    return out


B, T, G, Q, HS = 2, 3, 2, 3, 4
VIEW_CASES = [
    ("qkv-q", (B, T, G * (Q + 2) * HS),
     (("reshape", (B, T, G, Q + 2, HS)), ("permute", (0, 2, 3, 1, 4)), ("slice", (0,) * 5, (B, G, Q, T, HS)),
      ("reshape", (B, G * Q, T, HS))),
     lambda t: t.view(B, T, G, Q + 2, HS).permute(0, 2, 3, 1, 4)[:, :, :Q].reshape(B, G * Q, T, HS)),
    ("qkv-k-expanded", (B, T, G * (Q + 2) * HS),
     (("reshape", (B, T, G, Q + 2, HS)), ("permute", (0, 2, 3, 1, 4)), ("slice", (0, 0, Q, 0, 0), (B, G, Q + 1, T, HS)),
      ("expand", (B, G, Q, T, HS), (0, 1, 2, 3, 4)), ("reshape", (B, G * Q, T, HS))),
     lambda t: t.view(B, T, G, Q + 2, HS).permute(0, 2, 3, 1, 4)[:, :, Q:Q + 1].expand(B, G, Q, T, HS)
     .reshape(B, G * Q, T, HS)),
    ("permute-split", (4, 6), (("permute", (1, 0)), ("reshape", (3, 2, 4))),
     lambda t: t.permute(1, 0).reshape(3, 2, 4)),
    ("merge-split", (2, 3, 4), (("reshape", (6, 4)), ("reshape", (2, 12))), lambda t: t.reshape(6, 4).reshape(2, 12)),
    ("strided", (4, 6), (("slice", (0, 1), (4, 6), (1, 2)),), lambda t: t[:, 1::2]),
    ("strided-rows", (5, 6), (("slice", (1, 0), (5, 5), (2, 1)),), lambda t: t[1::2, :5]),
    ("strided-one", (4, 6), (("slice", (0, 4), (4, 6), (1, 3)),), lambda t: t[:, 4::3]),
    # a merge of permuted dims keeps two components: the step is the inner one's extent, or a part of it
    ("strided-merged", (4, 6), (("permute", (1, 0)), ("reshape", (24,)), ("slice", (1,), (24,), (4,))),
     lambda t: t.permute(1, 0).reshape(24)[1::4]),
    ("strided-merged-split", (4, 6), (("permute", (1, 0)), ("reshape", (24,)), ("slice", (1,), (24,), (2,))),
     lambda t: t.permute(1, 0).reshape(24)[1::2]),
    ("strided-merged-outer", (4, 6), (("permute", (1, 0)), ("reshape", (24,)), ("slice", (4,), (20,), (8,))),
     lambda t: t.permute(1, 0).reshape(24)[4:20:8]),
]


@pytest.mark.parametrize("case", VIEW_CASES, ids=[c[0] for c in VIEW_CASES])
@pytest.mark.parametrize("layout", ["contiguous", "offset-view"])
def test_fold_addresses_what_torch_reads(generator, case, layout):
    _, shape, chain, apply = case
    base = randn(*(s + 1 for s in shape), generator=generator)
    starts = [1 if layout == "offset-view" else 0] * len(shape)
    x = base[tuple(slice(b, b + s) for b, s in zip(starts, shape))]
    folded = fold(chain, tuple(x.shape), tuple(x.stride()))
    assert folded is not None
    assert torch.equal(_gather(x, folded), apply(x))


def test_fold_declines_a_slice_across_merged_components():
    x = torch.empty(2, 3, 4)[:, :, :3]  # rows 4 apart: a merge of dims 1 and 2 keeps two components
    assert fold((("reshape", (2, 9)), ("slice", (0, 1), (2, 8))), tuple(x.shape), tuple(x.stride())) is None
    # steps of 2 over rows of 3: no run of inner components makes the step
    assert fold((("reshape", (2, 9)), ("slice", (0, 0), (2, 9), (1, 2))), tuple(x.shape), tuple(x.stride())) is None


def test_a_view_that_does_not_fold_its_input_strides_reads_a_row_major_copy(emulated, generator, recwarn):
    """Steps of 2 over a merge of rows 4 apart, each of 3 elements (the chain ``fold`` declines above):
    the kernel reads a row-major copy of the input, made before each launch, rather than the region
    running in PyTorch; a row-major input of the same shape has a kernel of its own that reads it."""
    def fn(x, c):
        return x.reshape(2, 9)[:, ::2] * c + 1.0

    x = randn(2, 3, 4, generator=generator)[:, :, :3]
    c = randn(5, generator=generator)
    jitted, out, trace = jit_and_run(fn, x, c)
    again = jitted(x, c)
    assert torch.equal(out, fn(x, c)) and torch.equal(again, out)
    assert unfused_ops(trace) == [] and not [w for w in recwarn if "runs in PyTorch" in str(w.message)]
    (report,) = explain(jitted)
    assert report.copied == ("x",) and "copied row-major before the kernel" in str(report)
    dense = randn(2, 3, 3, generator=generator)
    assert torch.equal(jitted(dense, c), fn(dense, c))
    (report,) = explain(jitted)
    assert report.copied == () and "copied" not in str(report)


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_a_strided_slice_of_an_input_folds_into_its_loads(emulated, generator, layout):
    """A strided slice of an input (here of its transpose too) is a view the kernel reads; one of a
    value padvec computes runs in PyTorch between two kernels."""
    def of_input(x, c):
        return x[..., 1::2] * c[::3] + 1.0

    def of_computed(x, c):
        return (x * 2.0)[..., 1::2] + 1.0

    x = randn(4, 6, 8, generator=generator)
    if layout == "transposed":
        x = randn(8, 6, 4, generator=generator).permute(2, 1, 0)
    c = randn(12, 6, 4, generator=generator)
    jitted, out, trace = jit_and_run(of_input, x, c)
    assert torch.equal(out, of_input(x, c))
    assert unfused_ops(trace) == [] and len(explain(jitted)) == 1
    (report,) = explain(jitted)
    assert [type(n).__name__ for n in report.kernel.nodes if n.name in {a.tensor for a in report.accesses
                                                                          if a.role == "input"}] == ["View"] * 2
    jitted, out, trace = jit_and_run(of_computed, x, c)
    assert torch.equal(out, of_computed(x, c))
    assert len(explain(jitted)) == 2 and "slice_prim" in unfused_ops(trace)


@pytest.mark.parametrize("shape, to", [((0, 9), (0, 3, 3)), ((0, 3), (3, 0)), ((2, 0, 4), (8, 0))])
def test_a_reshape_of_an_empty_input_folds_and_its_kernel_runs(emulated, generator, shape, to):
    """Thunder's backward reshapes an empty gradient as it does any other: no element is addressed."""
    x = randn(*shape, generator=generator)
    folded = fold((("reshape", to),), shape, tuple(x.stride()))
    assert folded is not None and tuple(math.prod(e for e, _ in d) for d in folded.dims) == to
    _, out, trace = jit_and_run(lambda a: torch.cat((a.reshape(to) * 2, a.reshape(to)), -1), x)
    assert "padvec0" in str(trace) and out.shape == (*to[:-1], 2 * to[-1])


QKV_CASES = [  # (n_head, n_query_groups, head_size, rope_n_elem)
    (4, 2, 16, 16),  # grouped queries: the key is expanded
    (4, 4, 16, 16),  # one group per head
    (4, 1, 16, 8),  # multi-query, partial rotary
    (2, 2, 128, 128),  # Llama-sized rows: tiled
    (4, 2, 96, 96),  # Phi-3-sized rows
]


@pytest.mark.parametrize("case", QKV_CASES, ids=lambda c: "nh{}-g{}-hs{}-rope{}".format(*c))
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
def test_qkv_split_rope_is_one_kernel_reading_qkv(emulated, generator, case, dtype):
    nh, groups, hs, n = case
    qkv = randn(2, 5, (nh + 2 * groups) * hs, dtype=dtype, generator=generator)
    cos, sin = randn(5, n, dtype=dtype, generator=generator), randn(5, n, dtype=dtype, generator=generator)
    jitted, out, trace = jit_and_run(qkv_split_rope, qkv, cos, sin, nh, groups, hs, n)
    expected = qkv_split_rope(qkv, cos, sin, nh, groups, hs, n)
    for got, want in zip(out, expected):
        assert torch.equal(got, want)
    # v is a layout op of qkv alone: PyTorch makes it, a view of qkv wherever eager's is one
    def is_view(t):
        return t.untyped_storage().data_ptr() == qkv.untyped_storage().data_ptr()

    assert is_view(out[2]) == is_view(expected[2])
    assert unfused_ops(trace) == []
    (report,) = explain(jitted)
    # a v that eager copies (a reshape of the expanded heads) is the kernel's: it reads qkv anyway
    assert len(report.kernel.outputs) == (2 if is_view(expected[2]) else 3)
    layout_names = ("reshape", "permute", "view", "expand", "split")
    layout_ops = [b.sym.name for b in trace.bound_symbols if b.sym.name in layout_names]
    assert layout_ops == []  # view, permute, split, expand and reshape all run inside the kernel
    assert [a.tensor for a in report.accesses if a.access == "staged" and a.role == "input"] == []


@pytest.mark.parametrize("case", QKV_CASES[3:], ids=lambda c: "nh{}-g{}-hs{}".format(*c[:3]))
def test_qkv_views_in_tiled_rows_with_several_heads_per_thread(emulated, generator, monkeypatch, case):
    """The views' addresses at several heads per thread (taken wherever the launch allows: the
    sharing rule lifted)."""
    plan_module = importlib.import_module("thunder_padvec.vectorize.plan")
    monkeypatch.setattr(schedule.TUNING, "min_threads", 0)
    monkeypatch.setattr(plan_module, "ROW_SHARING", 1.0)
    monkeypatch.setattr(plan_module, "LANE_RELOADS", False)  # rows of 96: else lanes that reload, one row each
    nh, groups, hs, n = case
    qkv = randn(1, 4, (nh + 2 * groups) * hs, dtype=torch.bfloat16, generator=generator)
    cos, sin = (randn(4, n, dtype=torch.bfloat16, generator=generator) for _ in range(2))
    jitted, out, _ = jit_and_run(qkv_split_rope, qkv, cos, sin, nh, groups, hs, n)
    for got, want in zip(out, qkv_split_rope(qkv, cos, sin, nh, groups, hs, n)):
        assert torch.equal(got, want)
    (report,) = explain(jitted)
    (seg,) = report.plan.segments
    assert seg.tiled and seg.rows_per_thread > 1, str(report)
    assert report.widths["cos"] == 8


def test_reshape_of_a_computed_value_stays_in_pytorch(emulated, generator):
    def fn(x):
        y = (x * 2.0).reshape(4, 6)
        return torch.nn.functional.pad(y, (1, 1)) + 1.0

    x = randn(2, 3, 4, generator=generator)
    _, out, trace = jit_and_run(fn, x)
    assert torch.equal(out, fn(x))
    names = [b.sym.name for b in trace.bound_symbols]
    assert "reshape" in names  # between the two fusions, in PyTorch


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
def test_integer_indices_fold_into_the_loads_and_a_squeeze_of_a_computed_value_is_a_merge(emulated, generator,
                                                                                           dtype):
    """An integer index (a slice of one and a squeeze, as Thunder traces ``t[k]``) of an input folds into the
    loads: Qwen2-VL's sections of cos and sin (``examples.hf_mrope``) are one kernel with its RoPE, forward and
    backward, the gradients within twice eager's error of float64's. A squeeze of a computed value is a merge of
    a dim of one; one of a dim a slice resized, or down to 0-d, is left to PyTorch."""
    q, k = (randn(2, heads, 8, 32, dtype=dtype, generator=generator).requires_grad_(True) for heads in (4, 2))
    cos, sin = (randn(3, 2, 8, 32, dtype=dtype, generator=generator) for _ in range(2))
    sections = (4, 6, 6)
    jitted, outs, trace = jit_and_run(hf_mrope, q, k, cos, sin, sections)
    for got, want in zip(outs, hf_mrope(q, k, cos, sin, sections)):
        assert torch.equal(got, want)
    assert len(fusions(trace)) == 1 and not unfused_ops(trace)
    assert "squeeze" not in [b.sym.name for b in trace.bound_symbols]
    cotangents = [randn(*o.shape, dtype=dtype, generator=generator) for o in outs]
    grads = torch.autograd.grad(outs, (q, k), cotangents)
    eager = torch.autograd.grad(hf_mrope(q, k, cos, sin, sections), (q, k), cotangents)
    q64, k64 = (t.detach().double().requires_grad_(True) for t in (q, k))
    exact = torch.autograd.grad(hf_mrope(q64, k64, cos.double(), sin.double(), sections), (q64, k64),
                                [c.double() for c in cotangents])
    for grad, eager_grad, exact_grad in zip(grads, eager, exact):
        assert (grad.double() - exact_grad).abs().max() <= 2 * (eager_grad.double() - exact_grad).abs().max() + 1e-6
    assert {r.trace for r in explain(jitted)} == {"forward", "backward"}

    def computed(t, u):  # t: [4, 1, 5], u: [4, 3, 6]
        y = torch.nn.functional.pad((t * 2.0).squeeze(1), (1, 1)) + 1.0  # in the kernel, in y's shape
        # left to PyTorch: a dim a slice resized, then squeezed, where a pad follows (as with any reshape, see
        # reshapes.py), and one down to 0-d
        z = torch.nn.functional.pad((u * 2.0)[:, 1:2].squeeze(1), (1, 0)) - 1.0
        return y, z, (t[:1, :, :1] * 3.0).squeeze() + 1.0

    t, u = randn(4, 1, 5, dtype=dtype, generator=generator), randn(4, 3, 6, dtype=dtype, generator=generator)
    _, outs, trace = jit_and_run(computed, t, u)
    for got, want in zip(outs, computed(t, u)):
        assert got.shape == want.shape and torch.equal(got, want)
    assert fusions(trace)
    squeezes = [b for b in trace.bound_symbols if b.sym.name == "squeeze"]
    assert sorted(tuple(b.output.shape) for b in squeezes) == [(), (4, 6)], [str(b) for b in squeezes]


def test_view_widths_follow_the_input_pointer_and_strides(emulated, generator):
    """A view's loads are as wide as its input's alignment and the strides of its components allow."""
    nh, groups, hs, n = 4, 2, 16, 16
    width = (nh + 2 * groups) * hs
    base = randn(2 * 5 * width + 1, dtype=torch.bfloat16, generator=generator)
    cos, sin = randn(5, n, dtype=torch.bfloat16, generator=generator), randn(5, n, dtype=torch.bfloat16,
                                                                              generator=generator)
    aligned, shifted = base[:-1].view(2, 5, width), base[1:].view(2, 5, width)
    jitted, _, _ = jit_and_run(qkv_split_rope, aligned, cos, sin, nh, groups, hs, n)
    widths = explain(jitted)[0].widths
    views = [n.name for n in explain(jitted)[0].kernel.nodes if type(n).__name__ == "View" and n.name in widths]
    assert len(views) >= 2 and all(widths[v] == 8 for v in views)  # q's and k's reads of qkv
    out = jitted(shifted, cos, sin, nh, groups, hs, n)  # 2 bytes past an aligned address
    for got, want in zip(out, qkv_split_rope(shifted, cos, sin, nh, groups, hs, n)):
        assert torch.equal(got, want)
    assert all(explain(jitted)[0].widths[v] == 1 for v in views)


@st.composite
def _strided_inputs(draw, make):
    """A view of a larger tensor ``make(shape)``: its dims sliced with steps and an offset, then permuted."""
    rank = draw(st.integers(1, 4))
    shape = [draw(st.integers(1, 6)) for _ in range(rank)]
    steps = [draw(st.sampled_from([1, 1, 2, 3])) for _ in range(rank)]
    starts = [draw(st.integers(0, 1)) for _ in range(rank)]
    order = draw(st.permutations(range(rank)))
    base = make([start + size * step for size, step, start in zip(shape, steps, starts)])
    x = base[tuple(slice(a, None, s) for a, s in zip(starts, steps))][tuple(slice(0, n) for n in shape)]
    return x.permute(order)


def _applied(ops, t: torch.Tensor) -> torch.Tensor:
    """``t`` through the PyTorch side of ``_chains``'s ops."""
    for _, apply in ops:
        t = apply(t)
    return t


CHAIN_OPS = ("permute", "slice", "reshape", "reshape", "expand", "merge-slice", "index")


@st.composite
def _chains(draw, shape, kinds=CHAIN_OPS):
    """Up to four layout ops on ``shape`` (``kinds``, drawn with repeats) as padvec's chains write them, and
    the same ops in PyTorch."""
    ops = []

    def reshape(new):
        ops.append((("reshape", tuple(new)), lambda t, s=tuple(new): t.reshape(s)))
        return list(new)

    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(kinds))
        if kind == "permute":
            perm = tuple(draw(st.permutations(range(len(shape)))))
            ops.append((("permute", perm), lambda t, p=perm: t.permute(p)))
            shape = [shape[d] for d in perm]
        elif kind in ("slice", "merge-slice"):  # one dim sliced, mostly with a step
            d, part = draw(st.integers(0, len(shape) - 1)), 1
            if kind == "merge-slice" and len(shape) > 1:  # the merge of two neighbours (a dim of two parts)
                d = min(d, len(shape) - 2)
                part = shape[d + 1]
                shape = reshape(shape[:d] + [shape[d] * shape[d + 1]] + shape[d + 2:])
            start, end, step = [0] * len(shape), list(shape), [1] * len(shape)
            step[d] = draw(st.sampled_from([1, 1, 2, 2, 3, 4]))
            # mostly several kept; on a merge, sometimes whole parts cut off at either end
            start[d] = min(draw(st.sampled_from([0, 1, step[d], part])), max(shape[d] - 1, 0))
            end[d] = max(draw(st.sampled_from([shape[d], shape[d], shape[d] - 1, shape[d] - part])), start[d] + 1)
            index = tuple(slice(a, b, s) for a, b, s in zip(start, end, step))
            ops.append((("slice", tuple(start), tuple(end), tuple(step)), lambda t, i=index: t[i]))
            shape = [len(range(a, b, s)) for a, b, s in zip(start, end, step)]
        elif kind == "index" and len(shape) > 1:  # an integer index: a slice of one, then a squeeze
            d = draw(st.integers(0, len(shape) - 1))
            i = draw(st.integers(0, shape[d] - 1))
            start, end = [0] * len(shape), list(shape)
            start[d], end[d] = i, i + 1
            index = (slice(None),) * d + (i,)
            ops.append((("slice", tuple(start), tuple(end), (1,) * len(shape)), lambda t: t))  # (both in t[index])
            shape = shape[:d] + shape[d + 1:]
            ops.append((("reshape", tuple(shape)), lambda t, index=index: t[index]))
        elif kind == "reshape":  # two neighbours merged, or a dim split by one of its divisors
            if len(shape) > 1 and draw(st.booleans()):
                d = draw(st.integers(0, len(shape) - 2))
                shape = reshape(shape[:d] + [shape[d] * shape[d + 1]] + shape[d + 2:])
            else:
                d = draw(st.integers(0, len(shape) - 1))
                k = draw(st.sampled_from([k for k in range(1, shape[d] + 1) if shape[d] % k == 0]))
                shape = reshape(shape[:d] + [k, shape[d] // k] + shape[d + 1:])
        elif len(shape) < 5:  # broadcast_in_dim: a new dim of 3 in front, and every dim of 1 grown to 2
            new = (3, *[2 if s == 1 else s for s in shape])
            dims = tuple(range(1, len(shape) + 1))
            ops.append((("expand", new, dims), lambda t, n=new: t.expand(n)))
            shape = list(new)
    return ops


@settings(max_examples=1000, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_fold_of_random_chains_on_strided_inputs_addresses_what_torch_reads(data):
    """Random chains of permute, strided slice, reshape, integer index and expand on random strided views:
    ``fold`` never raises, and where it folds, the addresses it gives hold what PyTorch computes (each element
    of the storage holds its own address, so equal values are equal addresses)."""
    x = data.draw(_strided_inputs(lambda big: torch.arange(math.prod(big), dtype=torch.float64).reshape(big)))
    ops = data.draw(_chains(list(x.shape)))
    chain = tuple(op for op, _ in ops)
    want = _applied(ops, x)
    folded = fold(chain, tuple(x.shape), tuple(x.stride()))
    if folded is not None:
        assert tuple(math_prod(e for e, _ in comps) for comps in folded.dims) == tuple(want.shape), chain
        assert torch.equal(_gather(x, folded), want), chain


def _random_chains_through_padvec(device: str) -> dict[str, int]:
    """The chains of ``_chains`` on random strided inputs (float32, bf16 or fp16) on ``device``, then
    ``* 2 + 1``, through ``thunder.jit`` with padvec: each result equals eager's bit for bit. Returns how many
    programs ran as padvec kernels alone, left ops to PyTorch, and read a row-major copy of their input."""
    seen = {"fused": 0, "left": 0, "copied": 0}

    @settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def run(data):
        dtype = data.draw(st.sampled_from([torch.float32, torch.bfloat16, torch.float16]))
        generator = torch.Generator().manual_seed(sum(seen.values()))
        x = data.draw(_strided_inputs(lambda big: torch.randn(big, generator=generator).to(device, dtype)))
        ops = data.draw(_chains(list(x.shape), CHAIN_OPS + ("merge-slice",) * 2))  # more copies

        def fn(t):
            return _applied(ops, t) * 2.0 + 1.0

        jitted, out, trace = jit_and_run(fn, x)
        chain = tuple(op for op, _ in ops)
        assert torch.equal(out, fn(x)), chain
        left = unfused_ops(trace)
        # a chain that folds on a row-major input is folded on x's strides or read from a row-major copy of x
        assert not left or fold(chain, tuple(x.shape), contiguous_strides(tuple(x.shape))) is None, (chain, left)
        seen["left" if left else "fused"] += 1
        seen["copied"] += any(report.copied for report in explain(jitted))

    run()
    return seen


def test_random_chains_on_strided_inputs_run_in_one_kernel_equal_to_eager(emulated):
    """``_random_chains_through_padvec`` emulated (the suite poisons outputs with NaN). Nearly every program is one
    padvec kernel reading the input in its own layout or, where the chain does not fold its strides, a
    row-major copy; a chain that folds on no layout (a reshape that splits an expanded dim across its
    repeats, then a step) may stay in PyTorch."""
    seen = _random_chains_through_padvec("cpu")
    assert seen["fused"] >= 36 and seen["copied"] >= 1, seen


@pytest.mark.gpu
def test_random_chains_on_strided_inputs_run_in_one_kernel_equal_to_eager_on_the_gpu():
    """The same on the GPU (the tuner's launch variants and the copy's launch included)."""
    seen = _random_chains_through_padvec("cuda")
    assert seen["fused"] >= 36 and seen["copied"] >= 1, seen


ONE_ELEMENT_VIEWS = {
    "pad": lambda t: F.pad(t.reshape(1, 1, 1), (1, 1)) * 2.0 + 1.0,
    "expand-pad": lambda t: F.pad(t.reshape(1, 1, 1, 1).expand(1, 2, 1, 1), (1, 1)) * 2.0,
    "expand-rows": lambda t: F.pad(t.reshape(1, 1, 1).expand(3, 1, 1), (0, 1)) * 2.0,
    "slice": lambda t: t.reshape(1, 1, 1)[:, :, :1] * 2.0 + 1.0,
}


@pytest.mark.parametrize("name", ONE_ELEMENT_VIEWS)
def test_views_of_one_element_with_dims_of_extent_one_run_in_a_kernel(emulated, generator, name):
    """A one-element input viewed with dims of extent 1 (a view's dim of extent 1 has no components): the
    checks that read the views' strides along rows and tokens (``codegen.render._rows_apart_along_tokens``)
    build the kernel, and its output is eager's."""
    fn = ONE_ELEMENT_VIEWS[name]
    x = randn(1, generator=generator)
    jitted, out, trace = jit_and_run(fn, x)
    assert torch.equal(out, fn(x)) and not unfused_ops(trace)
    assert [r.plan is not None for r in explain(jitted)] == [True]
