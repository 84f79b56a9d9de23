"""Reshapes of computed values: which split dims, and the program rewritten in the new shape."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import thunder
from helpers import grads, jit_and_run, randn, unfused_ops
from thunder_padvec import explain, ir, padvec
from thunder_padvec.reshapes import UnfoldableReshape, push_reshapes, split_groups
from thunder_padvec.vectorize.segments import MIN_ROW_PIECE_BYTES

F32 = ir.DType.float32


@pytest.mark.parametrize("old, new, groups", [
    ((2, 8, 4), (2, 2, 4, 4), [[0], [1, 2], [3]]),
    ((1, 8, 16, 16), (1, 2, 4, 16, 16), [[0], [1, 2], [3], [4]]),
    ((6,), (1, 6, 1), [[0, 1, 2]]),
    ((2, 1, 3), (2, 3), [[0], [], [1]]),
    ((2, 3), (6,), None),  # merges
    ((4, 6), (2, 4, 3), None),  # crosses a dim's edge
])
def test_split_groups(old, new, groups):
    assert split_groups(old, new) == groups


def _t(*shape):
    return ir.TensorType(shape, F32)


def test_a_split_of_a_computed_value_becomes_a_view_of_its_input():
    x = ir.Input("x", _t(2, 8, 4), 0)
    kernel = ir.Kernel((x,), (
        ir.Elementwise("y", _t(2, 8, 4), "neg", ("x",)),
        ir.Pad("p", _t(2, 8, 6), "y", 0.0, ((0, 0), (0, 0), (1, 1))),
        ir.Reshape("r", _t(2, 2, 4, 6), "p"),
    ), ("r",))
    rewritten = push_reshapes(kernel)
    kinds = [(type(n).__name__, n.type.shape) for n in rewritten.nodes]
    assert kinds == [("View", (2, 2, 4, 4)), ("Elementwise", (2, 2, 4, 4)), ("Pad", (2, 2, 4, 6))]
    view, _, pad = rewritten.nodes
    assert view.chain == (("reshape", (2, 2, 4, 4)),)
    assert pad.widths == ((0, 0), (0, 0), (0, 0), (1, 1)) and pad.name == "r"


def test_a_split_of_a_resized_dim_is_refused():
    x = ir.Input("x", _t(2, 6), 0)
    kernel = ir.Kernel((x,), (
        ir.Pad("p", _t(2, 8), "x", 0.0, ((0, 0), (1, 1))),
        ir.Reshape("r", _t(2, 2, 4), "p"),
    ), ("r",))
    with pytest.raises(UnfoldableReshape) as err:
        push_reshapes(kernel)
    assert err.value.name == "r"


def test_a_split_that_a_view_of_an_input_cannot_take_is_refused():
    """Each element of x repeated twice, merged to a row of 18 (a view: x's addresses, each twice), then
    split into 2 rows of 9: no strides of x address that, so the split is refused, not pushed into x's
    loads (where the planner would have failed at the first call)."""
    x = ir.Input("x", _t(1, 9), 0)
    chain = (("expand", (1, 9, 2), (0, 1)), ("reshape", (1, 18)))
    kernel = ir.Kernel((x,), (
        ir.View("v", _t(1, 18), "x", chain),
        ir.Elementwise("y", _t(1, 18), "neg", ("v",)),
        ir.Reshape("r", _t(1, 2, 9), "y"),
    ), ("r",))
    with pytest.raises(UnfoldableReshape) as err:
        push_reshapes(kernel)
    assert err.value.name == "r"
    # split along the repeats instead: x's loads take it
    kernel = ir.Kernel((x,), (*kernel.nodes[:2], ir.Reshape("r", _t(1, 3, 6), "y")), ("r",))
    view = push_reshapes(kernel).nodes[0]
    assert view.chain == (*chain, ("reshape", (1, 3, 6)))


@pytest.mark.parametrize("pushed", [False, True])
def test_layout_ops_of_an_input_that_no_strides_address_stay_in_pytorch(emulated, generator, pushed):
    """``repeat_interleave`` as a view, then a split across the repeats: on the input directly (the
    lowering refuses the view) or on a value computed from it (the split pushed down, refused there)."""
    def direct(x):
        return x[..., None].expand(2, 9, 2).reshape(2, 18).reshape(2, 2, 9) * 2

    def computed(x):
        y = x[..., None].expand(2, 9, 2).reshape(2, 18) * 2
        return y.reshape(2, 2, 9) + 1, -x

    fn = computed if pushed else direct
    x = randn(2, 9, generator=generator)
    jitted, out, trace = jit_and_run(fn, x)
    for got, want in zip(out if pushed else (out,), fn(x) if pushed else (fn(x),)):
        assert torch.equal(got, want)
    reports = explain(jitted)  # the math padvec's, the layout op that no strides address PyTorch's
    assert reports and all(node.chain[-1] != ("reshape", (2, 2, 9)) for report in reports
                           for node in report.kernel.nodes if isinstance(node, ir.View))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_split_reshapes_fuse_and_unfoldable_ones_stay_in_pytorch(emulated, generator, dtype):
    """A split after a pad of another dim joins the kernel; one that splits the padded dim is left to
    PyTorch while the pad stays padvec's."""
    def splits(x, c):
        y = F.pad(x * c, (1, 1))  # [4, 6, 10]
        return y.reshape(2, 2, 3, 2, 10) + 1

    def crosses(x, c):
        y = F.pad(x * c, (0, 0, 1, 1))  # [4, 8, 8]
        return y.reshape(4, 2, 4, 8) + 1

    x = randn(4, 6, 8, dtype=dtype, generator=generator)
    c = randn(8, dtype=dtype, generator=generator)
    jitted, out, _ = jit_and_run(splits, x, c)
    assert torch.equal(out, splits(x, c))
    (report,) = explain(jitted)  # one kernel, the reshape inside it, and none left in its IR
    assert "reshape" in report.ops, report.ops
    assert not any(isinstance(n, ir.Reshape) for n in report.kernel.nodes)
    assert [type(n).__name__ for n in report.kernel.nodes if isinstance(n, ir.LOADS)] == ["View"]

    jitted, out, _ = jit_and_run(crosses, x, c)
    assert torch.equal(out, crosses(x, c))
    assert len(explain(jitted)) == 2  # the pad, and the add after the reshape PyTorch made


def test_a_merge_of_a_computed_value_is_lifted_to_the_outputs():
    """``stack((-b, a), -1).flatten(-2) * c``: the merge reshape leaves the IR, the cat and the math after
    it are computed in the unmerged shape ``[2, 4, 2]``, ``c`` is read through a split view, and the
    output keeps its name in the unmerged shape."""
    a, b, c = ir.Input("a", _t(2, 4), 0), ir.Input("b", _t(2, 4), 1), ir.Input("c", _t(2, 8), 2)
    kernel = ir.Kernel((a, b, c), (
        ir.Elementwise("nb", _t(2, 4), "neg", ("b",)),
        ir.Broadcast("nb1", _t(2, 4, 1), "nb", (0, 1)),
        ir.Broadcast("a1", _t(2, 4, 1), "a", (0, 1)),
        ir.Cat("s", _t(2, 4, 2), ("nb1", "a1"), 2),
        ir.Reshape("r", _t(2, 8), "s"),
        ir.Elementwise("y", _t(2, 8), "mul", ("r", "c")),
        ir.Elementwise("z", _t(2, 8), "add", ("y", 1.0)),
    ), ("z", "y"))
    rewritten = push_reshapes(kernel)
    assert not any(isinstance(n, ir.Reshape) for n in rewritten.nodes)
    assert rewritten.outputs == ("z", "y")
    by_name = {n.name: n for n in rewritten.nodes}
    assert [by_name[o].type.shape for o in rewritten.outputs] == [(2, 4, 2), (2, 4, 2)]
    (view,) = [n for n in rewritten.nodes if isinstance(n, ir.View)]
    assert view.operand == "c" and view.chain == (("reshape", (2, 4, 2)),)
    assert by_name["y"].operands == ("s", view.name)


def _merged_then(node: ir.Node) -> ir.Kernel:
    """``-x`` of ``x [2, 4, 2]``, merged to ``r [2, 8]``, then ``node`` (named q, reading r)."""
    x = ir.Input("x", _t(2, 4, 2), 0)
    return ir.Kernel((x,), (ir.Elementwise("s", _t(2, 4, 2), "neg", ("x",)), ir.Reshape("r", _t(2, 8), "s"), node),
                     ("q",))


@pytest.mark.parametrize("after, reason, culprit", [
    (lambda: ir.Slice("q", _t(2, 4), "r", (0, 1), (2, 5)), "cuts into its rows of 2", "r"),
    (lambda: ir.Pad("q", _t(2, 10), "r", 0.0, ((0, 0), (1, 1))), "cuts into its rows of 2", "r"),
    (lambda: ir.Reduce("q", _t(2,), "r", (1,)), "no rule for Reduce", "r"),
    (lambda: ir.Reshape("q", _t(2, 2, 4), "r"), "neither splits nor merges", "q"),
])
def test_a_merged_dim_cut_inside_its_rows_or_summed_stops_the_lift(after, reason, culprit):
    """The error names the reshape the executor then leaves to PyTorch: the merge, or a reshape of the
    merged value that neither splits nor merges (the merge itself is then lifted to an output)."""
    with pytest.raises(UnfoldableReshape, match=reason) as err:
        push_reshapes(_merged_then(after()))
    assert err.value.name == culprit


@pytest.mark.parametrize("after, fields", [
    # rows 1 and 2 of 4; a row each side
    (lambda: ir.Slice("q", _t(2, 4), "r", (0, 2), (2, 6)), {"start": (0, 1, 0), "end": (2, 3, 2)}),
    (lambda: ir.Pad("q", _t(2, 12), "r", 0.0, ((0, 0), (2, 2))), {"widths": ((0, 0), (1, 1), (0, 0))}),
])
def test_a_merged_dim_resized_in_whole_rows_is_resized_in_its_outer_dim(after, fields):
    node = after()
    (q,) = [n for n in push_reshapes(_merged_then(node)).nodes if n.name == "q"]
    assert q.type.shape == (2, node.type.shape[1] // 2, 2)
    assert {name: getattr(q, name) for name in fields} == fields


def test_a_split_of_a_dim_padded_in_whole_rows_is_padded_in_its_outer_dim():
    x = ir.Input("x", _t(2, 6), 0)
    kernel = ir.Kernel((x,), (
        ir.Pad("p", _t(2, 10), "x", 0.0, ((0, 0), (2, 2))),
        ir.Reshape("r", _t(2, 5, 2), "p"),
    ), ("r",))
    (view, pad) = push_reshapes(kernel).nodes
    assert view.chain == (("reshape", (2, 3, 2)),) and pad.widths == ((0, 0), (1, 1), (0, 0))


def test_a_lifted_value_is_resized_and_broadcast_along_the_dims_the_merge_left_alone():
    x, c = ir.Input("x", _t(3, 4, 2), 0), ir.Input("c", _t(8,), 1)
    kernel = ir.Kernel((x, c), (
        ir.Elementwise("s", _t(3, 4, 2), "neg", ("x",)),
        ir.Reshape("r", _t(3, 8), "s"),
        ir.Pad("p", _t(5, 8), "r", 0.5, ((1, 1), (0, 0))),
        ir.Broadcast("b", _t(2, 5, 8), "p", (1, 2)),
        ir.Broadcast("cb", _t(2, 5, 8), "c", (2,)),
        ir.Elementwise("y", _t(2, 5, 8), "mul", ("b", "cb")),
    ), ("y",))
    rewritten = push_reshapes(kernel)
    by_name = {n.name: n for n in rewritten.nodes}
    assert by_name["p"].type.shape == (5, 4, 2) and by_name["p"].widths == ((1, 1), (0, 0), (0, 0))
    assert by_name["b"].type.shape == (2, 5, 4, 2) and by_name["b"].broadcast_dims == (1, 2, 3)
    assert by_name["y"].type.shape == (2, 5, 4, 2)


def _gptj_args(generator, dtype=torch.bfloat16, shape=(2, 4, 16, 32)):
    x = randn(*shape, dtype=dtype, generator=generator)
    cos, sin = (randn(shape[-2], shape[-1] // 2, dtype=dtype, generator=generator).repeat_interleave(2, -1)
                for _ in range(2))
    return x, cos, sin


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gptj_rotary_forward_is_one_kernel_with_the_flatten_inside(emulated, generator, dtype):
    """GPT-J-style rotary: the strided halves of x (views folded into the loads), their stack and the
    math after the flatten in one kernel, the region's whole trace, which writes the output unmerged
    (``[..., 16, 2]``) into the region's ``[..., 32]``: stores of 16 bytes, x, cos and sin loaded at 16
    bytes, the strided halves element by element, from the registers of x's own vector."""
    from thunder_padvec.examples import gptj_rope

    x, cos, sin = _gptj_args(generator, dtype)
    jitted, out, trace = jit_and_run(gptj_rope, x, cos, sin)
    want = gptj_rope(x, cos, sin)
    assert out.shape == want.shape and out.is_contiguous()
    assert torch.equal(out, want)
    assert unfused_ops(trace) == [] and len(explain(jitted)) == 1
    (report,) = explain(jitted)
    assert "reshape" in report.ops and not any(isinstance(n, ir.Reshape) for n in report.kernel.nodes)
    (segment,) = report.plan.segments
    assert segment.segment.shape == (2, 4, 16, 16, 2)
    full = 16 // x.element_size()
    assert [a.width for a in report.accesses if a.role == "output"] == [full]
    loads = {"x": [], "cos": [], "sin": []}  # widths, by the kernel input read (through views)
    for a in report.accesses:
        if a.role == "input":
            node = report.kernel.node(a.tensor)
            loads[getattr(node, "operand", node.name)].append(a.width)
    assert loads == {"x": [1, 1, full], "cos": [full], "sin": [full]}, loads  # x[..., ::2], x[..., 1::2], x
    # the halves' lanes are moved from the registers of x's own vector (vectorize.gathers): x is one load a chunk
    assert [a.access for a in report.accesses if a.width == 1] == ["gathered", "gathered"]


def test_gptj_rotary_gradient_matches_eager(emulated, generator):
    from thunder_padvec.examples import gptj_rope

    x, cos, sin = _gptj_args(generator, torch.float32)
    cotangent = randn(*x.shape, generator=generator)
    jitted = thunder.jit(gptj_rope, executors=[padvec])
    (out,), grad = grads(jitted, x, cos, sin, (cotangent,))
    (want,), want_grad = grads(gptj_rope, x, cos, sin, (cotangent,))
    torch.testing.assert_close(out, want)
    torch.testing.assert_close(grad, want_grad)
    assert any(t.sym.name.startswith("padvec") for t in thunder.last_backward_traces(jitted)[-1].bound_symbols)


def test_a_merged_output_and_its_permuted_consumer(emulated, generator):
    """The merged value is an output itself, and another output's one consumer permutes it (allocated in
    the permuted order): both come back in the region's shapes, with eager's values."""
    def fn(a, b):
        merged = torch.stack((a, -b), dim=-1).flatten(-2)
        return merged, ((merged * 2) + 1).permute(1, 0, 2).reshape(a.shape[1], -1)

    a, b = (randn(3, 5, 8, generator=generator) for _ in range(2))
    jitted, outs, _ = jit_and_run(fn, a, b)
    for got, want in zip(outs, fn(a, b)):
        assert got.shape == want.shape and torch.equal(got, want)
    assert len(explain(jitted)) == 1


def _dilated_reference(values: list, lo: int, hi: int, interior: int, fill) -> list:
    """A dilated pad of one dim, as Thunder's pad prim defines it: element k at lo + k (interior + 1)."""
    size = lo + len(values) + (len(values) - 1) * interior + hi
    out = [fill] * max(size, 0)
    for k, v in enumerate(values):
        position = lo + k * (interior + 1)
        if 0 <= position < size:
            out[position] = v
    return out


def test_a_dilated_pad_is_rows_padded_whole_then_merged():
    """``ops.dilation``, checked against the definition on every small case: each element a row of its
    own, padded to ``interior + 1`` columns, rows added or cropped at the ends, the rows merged; None
    exactly where the ends would cut into a row."""
    from thunder_padvec.ops import dilation

    taken = 0
    for size in range(1, 5):
        for interior in range(1, 4):
            for lo in range(-4, 5):
                for hi in range(-4, 5):
                    if lo + size + (size - 1) * interior + hi < 0:
                        continue
                    want = _dilated_reference(list(range(1, size + 1)), lo, hi, interior, 0)
                    found = dilation(lo, hi, interior, size)
                    step = interior + 1
                    if found is None:
                        assert (hi + lo % step - interior) % step != 0 or min(lo // step, (hi + lo % step - interior)
                                                                                  // step) < -size
                        continue
                    (before, after), (left, right) = found
                    assert left + right == interior and left >= 0 and right >= 0
                    rows = [[0] * left + [k] + [0] * right for k in range(1, size + 1)]
                    padded = [rows[j - before] if 0 <= j - before < size else [0] * step
                              for j in range(before + size + after)]  # both ends at once, as ir.Pad
                    assert [v for row in padded for v in row] == want, (size, interior, lo, hi)
                    taken += 1
    assert taken > 200


@pytest.mark.parametrize("index", [(Ellipsis, slice(None, None, 2)), (Ellipsis, slice(1, None, 2)),
                                   (slice(None), slice(2, 7, 3)), (Ellipsis, slice(1, 6, 2))])
def test_the_gradient_of_a_strided_slice_is_a_dilated_pad_in_padvecs_kernel(emulated, generator, index):
    """Thunder's gradient of a strided slice is a pad with interior padding: padvec takes it into the
    backward kernel (one kernel, no pad left to PyTorch), with eager's gradient."""
    def fn(x, c):
        return (x[index] * c[index]).sin()

    x, c = randn(3, 9, 8, generator=generator), randn(3, 9, 8, generator=generator)
    cotangent = randn(*fn(x, c).shape, generator=generator)
    jitted = thunder.jit(fn, executors=[padvec])
    x_grad = x.detach().requires_grad_(True)
    torch.autograd.backward(jitted(x_grad, c), cotangent)
    x_want = x.detach().requires_grad_(True)
    torch.autograd.backward(fn(x_want, c), cotangent)
    torch.testing.assert_close(x_grad.grad, x_want.grad)
    backward = thunder.last_backward_traces(jitted)[-1]
    names = [b.sym.name for b in backward.bound_symbols]
    assert sum(n.startswith("padvec") for n in names) == 1 and not any("pad" in n and "padvec" not in n
                                                                        for n in names), names


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_partial_gptj_rotary_is_one_kernel_each_way(emulated, generator, dtype):
    """GPT-J-6B's rotary: the first 16 of 64 features rotated in pairs, the rest passed through (a cat
    along the merged dim, in whole pairs: the cat joins the kernel in the unmerged shape); the forward is
    one kernel that stores 16 bytes a thread, the backward one kernel; values and gradient as eager's.
    Where the rotated pairs span at least ``MIN_ROW_PIECE_BYTES`` (64 bytes: float32's 16 features, not
    bfloat16's), both kernels cut their rows along the pairs' dim into a segment per piece."""
    from thunder_padvec.examples import gptj_rope

    x = randn(2, 4, 16, 64, dtype=dtype, generator=generator)
    cos, sin = (randn(16, 8, dtype=dtype, generator=generator).repeat_interleave(2, -1) for _ in range(2))
    cotangent = randn(*x.shape, dtype=dtype, generator=generator)
    jitted = thunder.jit(gptj_rope, executors=[padvec])
    x_grad = x.detach().requires_grad_(True)
    out = jitted(x_grad, cos, sin, 16)
    out.backward(cotangent)
    x_want = x.detach().requires_grad_(True)
    want = gptj_rope(x_want, cos, sin, 16)
    want.backward(cotangent)
    assert torch.equal(out, want)
    torch.testing.assert_close(x_grad.grad, x_want.grad)
    forward, backward = explain(jitted)
    assert (forward.trace, backward.trace) == ("forward", "backward")
    cut = x.element_size() * 16 >= MIN_ROW_PIECE_BYTES
    pieces = [(2, 4, 16, 8, 2), (2, 4, 16, 24, 2)] if cut else [(2, 4, 16, 32, 2)]
    for report in (forward, backward):
        assert [s.segment.shape for s in report.plan.segments] == pieces
        assert [a.width for a in report.accesses if a.role == "output"] == [16 // x.element_size()] * len(pieces)


@pytest.mark.parametrize("pairs", [True, False])
def test_gptj_6b_rows_are_cut_along_the_pairs_into_rotated_and_passed_features(emulated, generator, monkeypatch,
                                                                                pairs):
    """GPT-J-6B's proportions (64 of 256 bf16 features rotated): the rows, held as ``[..., 128, 2]``, are
    cut along the pairs' dim, 32 rotated pairs (128 bytes) and 96 passed through, a segment each both
    ways, only the rotated one reading cos and sin; ``PAIR_PIECES`` off keeps them whole. Values as
    eager's, the gradient within its tolerance, either way."""
    from thunder_padvec.examples import gptj_rope
    from thunder_padvec.vectorize import segments

    monkeypatch.setattr(segments, "PAIR_PIECES", pairs)
    x = randn(1, 2, 8, 256, dtype=torch.bfloat16, generator=generator)
    cos, sin = (randn(8, 32, dtype=torch.bfloat16, generator=generator).repeat_interleave(2, -1) for _ in range(2))
    cotangent = randn(*x.shape, dtype=torch.bfloat16, generator=generator)

    def rope(x, cos, sin):
        return gptj_rope(x, cos, sin, 64)

    jitted = thunder.jit(rope, executors=[padvec])
    (out,), grad = grads(jitted, x, cos, sin, (cotangent,))
    (want,), want_grad = grads(rope, x, cos, sin, (cotangent,))
    assert torch.equal(out, want)
    torch.testing.assert_close(grad, want_grad)
    reports = explain(jitted)
    assert [r.trace for r in reports] == ["forward", "backward"]
    for report in reports:
        shapes = [s.segment.shape for s in report.plan.segments]
        assert shapes == ([(1, 2, 8, 32, 2), (1, 2, 8, 96, 2)] if pairs else [(1, 2, 8, 128, 2)])
        trig = {n.name for n in report.kernel.nodes if getattr(n, "operand", None) in ("cos", "sin")}
        readers = [any(s.node in trig for s in seg.segment.sites) for seg in report.plan.segments]
        assert readers == ([True, False] if pairs else [True])
        assert [a.width for a in report.accesses if a.role == "output"] == [8] * len(shapes)


def test_a_plain_cat_along_the_dim_before_narrow_pairs_stays_one_segment(emulated, generator):
    """Rows of narrow pairs (``[..., 64, 2]`` float32, 8 bytes a pair) whose pieces each read their own
    tensor one way, a plain cat along the pairs' dim: no piece reads an input two ways, so the rows stay
    whole (one segment), as a plain cat along the last dim does; values as eager's."""
    def fn(x, y):
        return torch.cat((x[:, :, :16] * 2.0, y[:, :, 16:] + 1.0), dim=2)

    x, y = (randn(2, 3, 64, 2, generator=generator) for _ in range(2))
    jitted, out, _ = jit_and_run(fn, x, y)
    assert torch.equal(out, fn(x, y))
    (report,) = explain(jitted)
    assert [s.segment.shape for s in report.plan.segments] == [(2, 3, 64, 2)]


def test_a_value_and_its_merge_are_written_once(emulated, generator):
    """A region that returns a value and its merge (one node once the merge is lifted): the kernel writes it
    once and the merge is a view of that output, as eager's reshape is."""
    def fn(x):
        y = x * 2.0
        return y, y.reshape(2, 12)

    x = randn(2, 3, 4, generator=generator)
    jitted, (y, merged), _ = jit_and_run(fn, x)
    want_y, want_merged = fn(x)
    assert torch.equal(y, want_y) and torch.equal(merged, want_merged)
    assert merged.data_ptr() == y.data_ptr()  # a view
    (report,) = explain(jitted)
    assert "reshape" in report.ops and len(report.kernel.outputs) == 1
