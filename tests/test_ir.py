"""The kernel IR: immutable data whose structural key ignores names."""

import dataclasses

import pytest

from thunder_padvec import ir

F32 = ir.TensorType((4, 8), ir.DType.float32)


def _kernel(names):
    x, y, out = names
    return ir.Kernel(
        inputs=(ir.Input(x, F32, 0),),
        nodes=(ir.Elementwise(y, F32, "mul", (x, 2.0)), ir.Pad(out, ir.TensorType((4, 10), ir.DType.float32), y,
                                                                0.0, ((0, 0), (1, 1)))),
        outputs=(out,),
    )


def test_key_ignores_names_but_not_structure():
    assert _kernel("abc").key() == _kernel(("t0", "t5", "t9")).key()
    changed = dataclasses.replace(_kernel("abc"), outputs=("b",))
    assert changed.key() != _kernel("abc").key()


def test_nodes_are_immutable():
    node = _kernel("abc").nodes[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        node.op = "add"
