"""The Thunder prims padvec claims: for each, its checker and its translator to the kernel IR.

A checker decides, from a bound symbol's arguments alone, whether padvec can run it; it never
raises, and logs at DEBUG why it declines. A translator turns a claimed bound symbol into one IR
node (or a literal, for a cast of a Python number).
"""

from __future__ import annotations

import functools
import logging
import numbers
from collections.abc import Callable, Sequence

from thunder.core import dtypes, prims
from thunder.core.devices import DeviceType
from thunder.core.proxies import NumberProxy, TensorProxy

from . import ir, knobs
from .errors import InconsistentTrace
from .reshapes import UnfoldableReshape
from .vectorize.views import folds_contiguous

log = logging.getLogger("thunder_padvec")

_DTYPES = {
    dtypes.float64: ir.DType.float64,
    dtypes.float32: ir.DType.float32,
    dtypes.float16: ir.DType.float16,
    dtypes.bfloat16: ir.DType.bfloat16,
    dtypes.bool8: ir.DType.bool,
}
FLOAT_DTYPES = {ir.DType.float64, ir.DType.float32, ir.DType.float16, ir.DType.bfloat16}


def ir_dtype(dtype) -> ir.DType | None:
    return _DTYPES.get(dtypes.to_strong_dtype(dtype)) if isinstance(dtype, dtypes.dtype) else None


# --------------------------------------------------------------------------------------------
# Checking arguments
# --------------------------------------------------------------------------------------------


def _tensor_problem(t: TensorProxy, allowed: set[ir.DType]) -> str | None:
    if ir_dtype(t.dtype) not in allowed:
        return f"dtype {t.dtype} of {t.name}"
    if not all(isinstance(s, int) for s in t.shape):
        return f"symbolic shape of {t.name}"
    if t.device.devicetype is DeviceType.CPU and not knobs.emulate():
        return f"{t.name} is on the CPU and emulation is off"
    if t.device.devicetype not in (DeviceType.CUDA, DeviceType.CPU):
        return f"{t.name} is on {t.device}"
    return None


def _number_problem(x) -> str | None:
    if isinstance(x, NumberProxy):
        return f"number proxy {x.name}"
    if isinstance(x, bool) or (isinstance(x, numbers.Real) and not isinstance(x, complex)):
        return None
    return f"argument of type {type(x).__name__}"


def tensors_problem(tensors: Sequence, allowed: set[ir.DType] = FLOAT_DTYPES) -> str | None:
    """Why these operands can't run in one padvec kernel, or None when they can."""
    devices = set()
    for t in tensors:
        if isinstance(t, TensorProxy):
            problem = _tensor_problem(t, allowed)
            devices.add(t.device.devicetype)
        else:
            problem = _number_problem(t)
        if problem:
            return problem
    if len(devices) > 1:
        return "operands on different kinds of device"
    if not devices:
        return "no tensor operand"
    return None


def checker(problem: Callable[..., str | None]) -> Callable[..., bool]:
    """Wraps a function that explains a refusal into a Thunder checker that never raises."""

    @functools.wraps(problem)
    def check(*args, **kwargs) -> bool:
        try:
            reason = problem(*args, **kwargs)
        except Exception as err:  # a checker never raises: an odd argument is a refusal
            reason = f"unexpected arguments ({type(err).__name__}: {err})"
        if reason is not None:
            log.debug("padvec declines %s: %s", problem.__name__.removesuffix("_problem"), reason)
        return reason is None

    return check


# --------------------------------------------------------------------------------------------
# Lowering state
# --------------------------------------------------------------------------------------------


class Lowering:
    """The IR under construction: ``env`` maps a proxy's name to an IR name or a literal."""

    def __init__(self):
        self.nodes: list[ir.Node] = []
        self.env: dict[str, ir.Operand] = {}
        # proxies that are layout ops of a kernel input: their input's name and the ops
        self.chains: dict[str, tuple[str, tuple[tuple, ...]]] = {}
        self.input_shapes: dict[str, tuple[int, ...]] = {}  # the kernel's inputs, by name

    def view(self, out: TensorProxy) -> ir.View:
        """``out``, layout ops of a kernel input, as one :class:`~thunder_padvec.ir.View`;
        :class:`~thunder_padvec.reshapes.UnfoldableReshape` naming ``out`` where they can't be folded into
        the input's loads (the executor then leaves that op to PyTorch)."""
        source, chain = self.chains[out.name]
        if not folds_contiguous(chain, self.input_shapes[source]):
            raise UnfoldableReshape(out.name, f"the layout ops {chain} of {source} can't be folded into its loads")
        return ir.View(out.name, self.tensor_type(out), source, chain)

    def extend_chain(self, operand, out, op: tuple) -> None:
        if isinstance(operand, TensorProxy) and operand.name in self.chains:
            source, chain = self.chains[operand.name]
            self.chains[out.name] = (source, (*chain, op))

    def operand(self, x) -> ir.Operand:
        if isinstance(x, TensorProxy):
            return self.env[x.name]
        if isinstance(x, NumberProxy):
            return self.env.get(x.name, x.value)
        return x

    def tensor_type(self, t: TensorProxy) -> ir.TensorType:
        return ir.TensorType(tuple(int(s) for s in t.shape), ir_dtype(t.dtype))

    def add(self, node: ir.Node) -> None:
        self.nodes.append(node)

    def operand_at(self, x, out: TensorProxy, position: int) -> ir.Operand:
        """``x``, operand ``position`` of an elementwise ``out``: a 0-d tensor beside tensors of higher rank
        (which Thunder's elementwise prims accept, as PyTorch does) becomes an explicit broadcast to ``out``'s
        shape, so that every tensor operand has the shape of the node that reads it."""
        operand = self.operand(x)
        if not isinstance(x, TensorProxy) or tuple(x.shape) == tuple(out.shape):
            return operand
        if x.ndim:
            raise InconsistentTrace(f"{out.name} of shape {tuple(out.shape)} reads {x.name} of shape {tuple(x.shape)}")
        node = ir.Broadcast(f"{out.name}.b{position}", ir.TensorType(self.tensor_type(out).shape, ir_dtype(x.dtype)),
                            operand, ())
        self.add(node)
        return node.name


Translator = Callable[[object, Lowering], "ir.Node | ir.Scalar"]
OPS: dict[object, tuple[Callable[..., bool], Translator]] = {}


def _register(prim, problem, translate: Translator) -> None:
    OPS[prim.id] = (checker(problem), translate)


# --------------------------------------------------------------------------------------------
# Elementwise
# --------------------------------------------------------------------------------------------

_MATH_PRIMS = {getattr(prims, name): name for name in ir.FLOAT_OPS}
_LOGICAL_PRIMS = {getattr(prims, name): name for name in ir.LOGICAL}


def _elementwise_problem(*args) -> str | None:
    return tensors_problem(args)


def _logical_problem(*args) -> str | None:
    """Bool masks only (integer bitwise math runs in PyTorch): bool tensors and Python bools."""
    if any(not isinstance(a, (TensorProxy, bool)) for a in args):
        return "an operand that is not bool"
    return tensors_problem(args, {ir.DType.bool})


def _where_problem(pred, a, b) -> str | None:
    if not isinstance(pred, TensorProxy):
        return "a Python condition"
    return tensors_problem([pred], {ir.DType.bool}) or tensors_problem([pred, a, b], FLOAT_DTYPES | {ir.DType.bool})


def _elementwise_translator(op: str) -> Translator:
    def translate(bsym, lowering: Lowering) -> ir.Node:
        out = bsym.output
        operands = tuple(lowering.operand_at(a, out, k) for k, a in enumerate(bsym.args))
        return ir.Elementwise(out.name, lowering.tensor_type(out), op, operands)

    return translate


for _prim, _name in _MATH_PRIMS.items():
    _register(_prim, _elementwise_problem, _elementwise_translator(_name))
for _prim, _name in _LOGICAL_PRIMS.items():
    _register(_prim, _logical_problem, _elementwise_translator(_name))
_register(prims.where, _where_problem, _elementwise_translator("where"))


# --------------------------------------------------------------------------------------------
# Casts and broadcasts
# --------------------------------------------------------------------------------------------


def _convert_element_type_problem(a, dtype) -> str | None:
    if ir_dtype(dtype) is None:
        return f"target dtype {dtype}"
    if not isinstance(a, TensorProxy):
        return _number_problem(a)
    return tensors_problem([a], FLOAT_DTYPES | {ir.DType.bool})


def _translate_convert(bsym, lowering: Lowering):
    a, dtype = bsym.args[0], bsym.args[1]
    if not isinstance(a, TensorProxy):  # a Python number: fold it
        value = lowering.operand(a)
        folded = bool(value) if ir_dtype(dtype) == ir.DType.bool else float(value)
        if isinstance(bsym.output, NumberProxy):
            lowering.env[bsym.output.name] = folded
        return folded
    out = bsym.output
    return ir.Cast(out.name, lowering.tensor_type(out), lowering.operand(a))


def _broadcast_in_dim_problem(a, shape, broadcast_dims) -> str | None:
    if not all(isinstance(s, int) for s in (*shape, *broadcast_dims)):
        return "symbolic broadcast"
    if not _valid_broadcast(tuple(a.shape), tuple(shape), tuple(broadcast_dims)):
        return f"an invalid broadcast of {tuple(a.shape)} to {tuple(shape)} along dims {tuple(broadcast_dims)}"
    return tensors_problem([a], FLOAT_DTYPES | {ir.DType.bool})


def _valid_broadcast(shape: tuple[int, ...], to: tuple[int, ...], dims: tuple[int, ...]) -> bool:
    """``broadcast_in_dim``'s contract: one increasing result dim per operand dim, of the same size or 1."""
    return (len(dims) == len(shape) and all(0 <= d < len(to) for d in dims) and list(dims) == sorted(set(dims))
            and all(s in (1, to[d]) for s, d in zip(shape, dims)))


def _translate_broadcast(bsym, lowering: Lowering) -> ir.Node:
    a, _, broadcast_dims = bsym.args[:3]
    out = bsym.output
    lowering.extend_chain(a, out, layout_op(bsym))
    return ir.Broadcast(out.name, lowering.tensor_type(out), lowering.operand(a), tuple(broadcast_dims))


def _shallow_copy_problem(a) -> str | None:
    return tensors_problem([a], FLOAT_DTYPES | {ir.DType.bool})


def _translate_shallow_copy(bsym, lowering: Lowering) -> ir.Node:
    """``Tensor.to`` to the same dtype, or a slice that keeps a whole tensor: an alias in PyTorch, a register
    copy here; of a view of a kernel input, a view too for the layout ops after it (a strided slice)."""
    out = bsym.output
    lowering.extend_chain(bsym.args[0], out, ("reshape", tuple(int(s) for s in out.shape)))
    return ir.Cast(out.name, lowering.tensor_type(out), lowering.operand(bsym.args[0]))


_register(prims.convert_element_type, _convert_element_type_problem, _translate_convert)
_register(prims.shallow_copy, _shallow_copy_problem, _translate_shallow_copy)
_register(prims.broadcast_in_dim, _broadcast_in_dim_problem, _translate_broadcast)


# --------------------------------------------------------------------------------------------
# Resizes: pad, slice, cat
# --------------------------------------------------------------------------------------------


def _pad_problem(a, value, config) -> str | None:
    for entry in config:
        if len(entry) != 3 or not all(isinstance(v, int) for v in entry):
            return f"padding config {config}"
    dilated = [d for d, entry in enumerate(config) if entry[2] != 0]
    if len(dilated) > 1:
        return "a pad dilated along several dims"
    if dilated:
        (d,) = dilated
        lo, hi, interior = config[d]
        if interior < 0 or not isinstance(a, TensorProxy) or int(a.shape[d]) == 0:
            return "a dilated pad of an empty dim, or with a negative interior"
        if dilation(lo, hi, interior, int(a.shape[d])) is None:
            return "a dilated pad whose ends cut into its rows"
    return tensors_problem([a], FLOAT_DTYPES | {ir.DType.bool}) or _number_problem(value)


def dilation(lo: int, hi: int, interior: int, size: int) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """A dilated pad of a dim of ``size`` as rows of ``interior + 1``: each element starts a row, the
    rows padded (or cropped) whole at the ends, ``(outer (lo, hi), inner (lo, hi))``, or None where the
    ends cut into a row or crop more rows than there are. The element ``k`` lands at
    ``lo + k * (interior + 1)``: row ``outer lo + k``, column ``inner lo``."""
    step = interior + 1
    rows_before, column = divmod(lo, step)
    rows_after, rest = divmod(hi + column - interior, step)
    if rest or rows_before + size + rows_after < 0 or min(rows_before, rows_after) < -size:
        return None
    return (rows_before, rows_after), (column, interior - column)


def _translate_pad(bsym, lowering: Lowering) -> ir.Node:
    a, value, config = bsym.args[:3]
    out = bsym.output
    widths = [(lo, hi) for lo, hi, _ in config]
    dilated = [d for d, entry in enumerate(config) if entry[2] != 0]
    if not dilated:
        return ir.Pad(out.name, lowering.tensor_type(out), lowering.operand(a), lowering.operand(value), tuple(widths))
    # a dilated pad: each element a row of its own (a new dim of size 1), the rows padded to interior + 1 and
    # at the ends, then merged back (see reshapes: the merge goes to the outputs)
    (d,) = dilated
    t = lowering.tensor_type(a)
    widths[d:d + 1] = dilation(*config[d], t.shape[d])
    rows = (*t.shape[:d + 1], 1, *t.shape[d + 1:])
    row = ir.Broadcast(f"{out.name}.rows", ir.TensorType(rows, t.dtype), lowering.operand(a),
                       tuple(k + (k > d) for k in range(t.rank)))
    padded = tuple(size + lo + hi for size, (lo, hi) in zip(rows, widths))
    pad = ir.Pad(f"{out.name}.padded", ir.TensorType(padded, t.dtype), row.name, lowering.operand(value), tuple(widths))
    lowering.add(row)
    lowering.add(pad)
    return ir.Reshape(out.name, lowering.tensor_type(out), pad.name)  # named as the pad: a reshape the executor
    # can't take in its region leaves the whole pad to PyTorch


def _slice_problem(a, start, end, strides=None) -> str | None:
    if not all(isinstance(v, int) for v in (*start, *end, *(strides or ()))):
        return "symbolic slice bounds"
    if any(s < 1 for s in strides or ()):
        return "a slice step below 1"
    return tensors_problem([a], FLOAT_DTYPES | {ir.DType.bool})


def _narrow_problem(a, dim, start, length) -> str | None:
    if not isinstance(a, TensorProxy):
        return "no tensor to narrow"
    if not all(type(v) is int for v in (dim, start, length)):
        return "a dim, start or length that is not a Python int"
    if not -a.ndim <= dim < a.ndim or not isinstance(a.shape[dim], int):
        return f"dim {dim} of a {a.ndim}-d tensor"
    size = a.shape[dim]
    first = start + size if start < 0 else start
    if not (0 <= first <= size and 0 <= length <= size - first):
        return f"start {start} and length {length} outside a dim of {size}"
    return tensors_problem([a], FLOAT_DTYPES | {ir.DType.bool})


def narrow_as_slice(a, dim: int, start: int, length: int):
    """``Tensor.narrow``, which Thunder runs as one opaque PyTorch call, as the slice it is (the execution
    transform of ``narrow``: the fusion pass then sees a slice)."""
    dim %= a.ndim
    first = start + a.shape[dim] if start < 0 else start
    starts, ends = [0] * a.ndim, list(a.shape)
    starts[dim], ends[dim] = first, first + length
    return prims.slice_prim(a, starts, ends)


def _narrow_symbols() -> list:
    """Thunder's symbols of ``torch.narrow`` and ``Tensor.narrow``: the traced one, and the PyTorch executor's
    that a differentiated trace's forward calls; none where this Thunder has them not."""
    try:
        import torch
        from thunder.executors.torchex import ex as pytorch_ex
        from thunder.torch import _torch_to_thunder_function_map

        found = [_torch_to_thunder_function_map.get(torch.narrow), pytorch_ex.opmap.get("narrow")]
    except Exception:  # another Thunder: narrow runs as that Thunder runs it
        return []
    return [sym for sym in found if sym is not None]


NARROW = _narrow_symbols()
narrow_checker = checker(_narrow_problem)


def strided(bsym) -> bool:
    """Whether a bound symbol is a slice with a step other than 1 (claimed only on a region's inputs,
    folded into the addresses of their loads)."""
    return bsym.sym.id == prims.slice_prim.id and any(s != 1 for s in _steps(bsym))


def _steps(bsym) -> tuple[int, ...]:
    steps = bsym.args[3] if len(bsym.args) > 3 else bsym.kwargs.get("strides")
    return tuple(steps) if steps is not None else (1,) * len(bsym.args[1])


def _translate_slice(bsym, lowering: Lowering) -> ir.Node:
    a, start, end = bsym.args[:3]
    out = bsym.output
    lowering.extend_chain(a, out, layout_op(bsym))
    if strided(bsym):
        if a.name not in lowering.chains:
            raise ValueError(f"a strided slice of {a.name}, which is not a view of a kernel input")
        return lowering.view(out)
    return ir.Slice(out.name, lowering.tensor_type(out), lowering.operand(a), tuple(start), tuple(end))


def _cat_problem(tensors, dim) -> str | None:
    if not isinstance(dim, int):
        return "a symbolic dim"
    if not all(isinstance(t, TensorProxy) for t in tensors):
        return "a non-tensor piece"
    return tensors_problem(list(tensors), FLOAT_DTYPES | {ir.DType.bool})


def _translate_cat(bsym, lowering: Lowering) -> ir.Node:
    tensors, dim = bsym.args[:2]
    out = bsym.output
    dim = dim % out.ndim
    return ir.Cat(out.name, lowering.tensor_type(out), tuple(lowering.operand(t) for t in tensors), dim)


_register(prims.pad, _pad_problem, _translate_pad)
_register(prims.slice_prim, _slice_problem, _translate_slice)
_register(prims.cat, _cat_problem, _translate_cat)


# --------------------------------------------------------------------------------------------
# Sums of a few elements (the gradient of an expand: grouped-query attention's key and value)
# --------------------------------------------------------------------------------------------

MAX_SUMMED = 16  # elements summed per output element, at most: each is a register site in the kernel


def _sum_problem(a, dims) -> str | None:
    if not isinstance(a, TensorProxy) or not all(isinstance(d, int) for d in dims):
        return "symbolic arguments"
    problem = tensors_problem([a])
    if problem:
        return problem
    summed = 1
    for d in set(dims):
        summed *= int(a.shape[d])
    if summed > MAX_SUMMED:
        return f"a sum of {summed} elements per output (padvec sums at most {MAX_SUMMED})"
    return None


def _translate_sum(bsym, lowering: Lowering) -> ir.Node:
    a, dims = bsym.args[:2]
    out = bsym.output
    dims = tuple(sorted({d % a.ndim for d in dims}))
    return ir.Reduce(out.name, lowering.tensor_type(out), lowering.operand(a), dims)


_register(prims.sum, _sum_problem, _translate_sum)


# --------------------------------------------------------------------------------------------
# Layout ops: folded into the loads of a kernel input (the executor claims them only there)
# --------------------------------------------------------------------------------------------

RESHAPE_PRIMS = {prims.reshape.id, prims.squeeze.id}  # (a squeeze: a reshape that drops dims of size 1)
LAYOUT_PRIMS = {*RESHAPE_PRIMS, prims.transpose.id, prims.slice_prim.id, prims.broadcast_in_dim.id,
                prims.shallow_copy.id}
FOLDED_PRIMS = {*RESHAPE_PRIMS, prims.transpose.id}  # claimed only on layout ops of a region's input


def _reshape_problem(a, shape) -> str | None:
    if not all(isinstance(s, int) for s in shape):
        return "a symbolic shape"
    return tensors_problem([a], FLOAT_DTYPES | {ir.DType.bool})


def _squeeze_problem(a, dims) -> str | None:
    if not all(isinstance(d, int) for d in dims):
        return "symbolic dims"
    return tensors_problem([a], FLOAT_DTYPES | {ir.DType.bool})


def _transpose_problem(a, permutation) -> str | None:
    if not all(isinstance(d, int) for d in permutation):
        return "a symbolic permutation"
    return tensors_problem([a], FLOAT_DTYPES | {ir.DType.bool})


def _translate_view(bsym, lowering: Lowering) -> ir.Node:
    a, out = bsym.args[0], bsym.output
    if a.name not in lowering.chains:
        if bsym.sym.id not in RESHAPE_PRIMS:
            raise ValueError(f"{bsym.sym.name} of {a.name}, which is not a view of a kernel input")
        return ir.Reshape(out.name, lowering.tensor_type(out), lowering.operand(a))  # see reshapes.py
    lowering.extend_chain(a, out, layout_op(bsym))
    return lowering.view(out)


_register(prims.reshape, _reshape_problem, _translate_view)
_register(prims.squeeze, _squeeze_problem, _translate_view)
_register(prims.transpose, _transpose_problem, _translate_view)


def layout_op(bsym) -> tuple:
    """A layout prim as a step of a view chain (see :class:`~thunder_padvec.ir.View`)."""
    sym, args, out = bsym.sym.id, bsym.args, bsym.output
    if sym in RESHAPE_PRIMS:
        return ("reshape", tuple(int(s) for s in out.shape))
    if sym == prims.transpose.id:
        return ("permute", tuple(args[1]))
    if sym == prims.slice_prim.id:
        steps = _steps(bsym)
        return ("slice", tuple(args[1]), tuple(args[2])) + ((steps,) if any(s != 1 for s in steps) else ())
    return ("expand", tuple(int(s) for s in out.shape), tuple(args[2]))
