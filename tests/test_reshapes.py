"""Reshapes of computed values: which split dims, and the program rewritten in the new shape."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from helpers import jit_and_run, randn
from thunder_padvec import explain, ir
from thunder_padvec.reshapes import UnfoldableReshape, push_reshapes, split_groups

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
