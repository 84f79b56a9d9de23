"""The kernel IR: one fusion region as immutable data.

A :class:`Kernel` is a list of :class:`Node` in topological order. Every node is a whole tensor
with a static shape and dtype; operands are referred to by name. Pad, slice and cat are
first-class *resize* nodes rather than being lowered to indexing early, so that the
vectorization analysis can see through them.

Nothing here imports torch: the IR is plain data that tests, the analysis and codegen share.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, fields
from typing import Union

Scalar = Union[bool, int, float]
Operand = Union[str, bool, int, float]  # a node name or a literal


class DType(str, enum.Enum):
    float64 = "float64"
    float32 = "float32"
    float16 = "float16"
    bfloat16 = "bfloat16"
    int64 = "int64"
    int32 = "int32"
    bool = "bool"

    @property
    def itemsize(self) -> int:
        return _ITEMSIZE[self]


_ITEMSIZE = {
    DType.float64: 8,
    DType.float32: 4,
    DType.float16: 2,
    DType.bfloat16: 2,
    DType.int64: 8,
    DType.int32: 4,
    DType.bool: 1,
}


@dataclass(frozen=True)
class TensorType:
    shape: tuple[int, ...]
    dtype: DType

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def __str__(self) -> str:
        return f"{self.dtype.value}[{', '.join(map(str, self.shape))}]"


@dataclass(frozen=True)
class Node:
    name: str
    type: TensorType

    def operand_names(self) -> tuple[str, ...]:
        return ()


@dataclass(frozen=True)
class Input(Node):
    """The ``index``-th argument of the kernel: a tensor in global memory, of any strides."""

    index: int


@dataclass(frozen=True)
class Elementwise(Node):
    """``op`` applied lane by lane. Operands are node names of this node's shape, or literals.

    Math runs in the operation's compute type (float for 16-bit floats) and the result is
    rounded to ``type.dtype``; comparisons produce ``bool``.
    """

    op: str
    operands: tuple[Operand, ...]

    def operand_names(self) -> tuple[str, ...]:
        return tuple(o for o in self.operands if isinstance(o, str))


@dataclass(frozen=True)
class Cast(Node):
    operand: str

    def operand_names(self) -> tuple[str, ...]:
        return (self.operand,)


@dataclass(frozen=True)
class Broadcast(Node):
    """``broadcast_in_dim``: operand dim ``i`` becomes dim ``broadcast_dims[i]`` of the result."""

    operand: str
    broadcast_dims: tuple[int, ...]

    def operand_names(self) -> tuple[str, ...]:
        return (self.operand,)


@dataclass(frozen=True)
class Pad(Node):
    """Pads each dim by ``(lo, hi)`` elements of ``value``; negative widths crop."""

    operand: str
    value: Scalar
    widths: tuple[tuple[int, int], ...]

    def operand_names(self) -> tuple[str, ...]:
        return (self.operand,)


@dataclass(frozen=True)
class Slice(Node):
    """Unit-stride slice ``[start, end)`` on every dim."""

    operand: str
    start: tuple[int, ...]
    end: tuple[int, ...]

    def operand_names(self) -> tuple[str, ...]:
        return (self.operand,)


@dataclass(frozen=True)
class Cat(Node):
    """Concatenation along the non-negative ``dim``; pieces may be empty."""

    operands: tuple[str, ...]
    dim: int

    def operand_names(self) -> tuple[str, ...]:
        return self.operands


@dataclass(frozen=True)
class View(Node):
    """A chain of layout ops applied to the kernel input ``operand``, folded into the addresses of
    its loads: ``("reshape", shape)``, ``("permute", dims)``, ``("slice", start, end[, steps])`` and
    ``("expand", shape, broadcast_dims)``. Read like an input; it never exists in memory."""

    operand: str
    chain: tuple[tuple, ...]

    def operand_names(self) -> tuple[str, ...]:
        return (self.operand,)


@dataclass(frozen=True)
class Reduce(Node):
    """The sum over ``dims`` (removed from the shape) of a few elements each, in index order; math runs
    in the compute type (float for 16-bit floats) and the result is rounded to ``type.dtype``."""

    operand: str
    dims: tuple[int, ...]

    def operand_names(self) -> tuple[str, ...]:
        return (self.operand,)


@dataclass(frozen=True)
class Reshape(Node):
    """A reshape of a computed value that splits its dims. Lowering removes it (see
    :mod:`thunder_padvec.reshapes`): the analysis and codegen never see one."""

    operand: str

    def operand_names(self) -> tuple[str, ...]:
        return (self.operand,)


RESIZE_NODES = (Pad, Slice, Cat)
LOADS = (Input, View)  # the nodes a kernel reads from global memory

# The elementwise vocabulary. Codegen renders every name here; ops.py maps Thunder prims onto them.
UNARY_MATH = (
    "abs", "acos", "acosh", "asin", "asinh", "atan", "atanh", "ceil", "cos", "cosh", "erf", "erfc", "exp",
    "exp2", "expm1", "floor", "log", "log10", "log1p", "log2", "neg", "reciprocal", "round", "rsqrt", "sin",
    "sign", "sinh", "sqrt", "tan", "tanh", "trunc",
)
UNARY_PREDICATES = ("isfinite", "signbit")  # float -> bool
BINARY_MATH = ("add", "atan2", "div", "fmod", "maximum", "minimum", "mul", "pow", "remainder", "sub")
COMPARISONS = ("eq", "ge", "gt", "le", "lt", "ne")  # -> bool
TERNARY_MATH = ("lerp",)
LOGICAL = ("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not")  # bool -> bool
TERNARY = ("where",)
FLOAT_OPS = UNARY_MATH + UNARY_PREDICATES + BINARY_MATH + TERNARY_MATH + COMPARISONS  # of float operands
ELEMENTWISE_OPS = FLOAT_OPS + LOGICAL + TERNARY


@dataclass(frozen=True)
class Kernel:
    """One fusion region: ``inputs`` in argument order, ``nodes`` in topological order."""

    inputs: tuple[Input, ...]
    nodes: tuple[Node, ...]
    outputs: tuple[str, ...]

    def node(self, name: str) -> Node:
        return self._by_name()[name]

    def _by_name(self) -> dict[str, Node]:
        by_name = self.__dict__.get("_by_name_cache")
        if by_name is None:
            by_name = {n.name: n for n in (*self.inputs, *self.nodes)}
            object.__setattr__(self, "_by_name_cache", by_name)
        return by_name

    def key(self) -> str:
        """A structural key: equal for kernels that differ only in names."""
        cached = self.__dict__.get("_key_cache")
        if cached is None:
            cached = repr(canonicalize(self))
            object.__setattr__(self, "_key_cache", cached)
        return cached


def _renamed(node: Node, names: dict[str, str]) -> Node:
    changes = {"name": names[node.name]}
    for f in fields(node):
        value = getattr(node, f.name)
        if f.name in ("operand",):
            changes[f.name] = names[value]
        elif f.name in ("operands",):
            changes[f.name] = tuple(names[v] if isinstance(v, str) else v for v in value)
    return type(node)(**{**{f.name: getattr(node, f.name) for f in fields(node)}, **changes})


def canonicalize(kernel: Kernel) -> Kernel:
    """The same kernel with names ``in0, in1, ...`` and ``v0, v1, ...`` in order of appearance."""
    names = {inp.name: f"in{i}" for i, inp in enumerate(kernel.inputs)}
    names.update({node.name: f"v{i}" for i, node in enumerate(kernel.nodes)})
    return Kernel(
        inputs=tuple(_renamed(i, names) for i in kernel.inputs),
        nodes=tuple(_renamed(n, names) for n in kernel.nodes),
        outputs=tuple(names[o] for o in kernel.outputs),
    )

