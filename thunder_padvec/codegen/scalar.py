"""C++ for one lane: register types, literals, conversions and the elementwise operations.

Math runs in a compute type (``float`` for 16- and 32-bit floats, ``double`` for float64) and
is rounded to the node's dtype afterwards, as PyTorch's eager kernels do. Nothing here is
contracted into FMAs or approximated: the compilers run with contraction off.
"""

from __future__ import annotations

import math

from .. import ir

CTYPE = {
    ir.DType.float64: "double",
    ir.DType.float32: "float",
    ir.DType.float16: "padvec_half",
    ir.DType.bfloat16: "padvec_bf16",
    ir.DType.int64: "long long",
    ir.DType.int32: "int",
    ir.DType.bool: "bool",
}

PACK_PAIR = {ir.DType.bfloat16: "padvec_pack_bf16x2", ir.DType.float16: "padvec_pack_halfx2"}
_SIXTEEN_BIT = {ir.DType.float16: "padvec_half_from_float", ir.DType.bfloat16: "padvec_bf16_from_float"}
_FLOAT32_BITS = {math.inf: "0x7f800000u", -math.inf: "0xff800000u"}


def compute_type(dtype: ir.DType) -> ir.DType:
    """The type math on ``dtype`` values runs in."""
    if dtype in (ir.DType.float32, ir.DType.float16, ir.DType.bfloat16):
        return ir.DType.float32
    return dtype


def literal(value: ir.Scalar, dtype: ir.DType) -> str:
    """``value`` as a C++ expression of ``dtype``'s register type (rounded as PyTorch rounds a Python scalar)."""
    if dtype == ir.DType.bool:
        return "true" if value else "false"
    if dtype in (ir.DType.int32, ir.DType.int64):
        return f"(({CTYPE[dtype]}){int(value)}ll)"
    value = float(value)
    if math.isnan(value):
        as_float = "padvec_float_from_bits(0x7fc00000u)"
    elif math.isinf(value):
        as_float = f"padvec_float_from_bits({_FLOAT32_BITS[value]})"
    else:
        as_float = f"((float){value.hex()})"
    if dtype == ir.DType.float64:
        return f"((double){as_float})" if not math.isfinite(value) else f"((double){value.hex()})"
    if dtype in _SIXTEEN_BIT:
        return f"{_SIXTEEN_BIT[dtype]}({as_float})"
    return as_float


def to_compute(expr: str, source: ir.DType, target: ir.DType) -> str:
    """Reads a ``source`` register value as the compute type ``target`` (float, double or bool)."""
    if source == target:
        return expr
    if target == ir.DType.bool:
        return f"({to_compute(expr, source, compute_type(source))} != 0)"
    if source in _SIXTEEN_BIT:
        as_float = f"padvec_to_float({expr})"
        return as_float if target == ir.DType.float32 else f"(({CTYPE[target]}){as_float})"
    if source == ir.DType.bool:
        return f"({expr} ? ({CTYPE[target]})1 : ({CTYPE[target]})0)"
    return f"(({CTYPE[target]}){expr})"


def from_compute(expr: str, compute: ir.DType, target: ir.DType) -> str:
    """Rounds a compute-type value to ``target``'s register type."""
    if compute == target:
        return expr
    if target in _SIXTEEN_BIT:
        return f"{_SIXTEEN_BIT[target]}({to_compute(expr, compute, ir.DType.float32)})"
    return to_compute(expr, compute, target)


def cast(expr: str, source: ir.DType, target: ir.DType) -> str:
    if target == ir.DType.bool:
        return to_compute(expr, source, target)
    compute = ir.DType.float64 if target == ir.DType.float64 else compute_type(target)
    return from_compute(to_compute(expr, source, compute), compute, target)


_LIBM = {
    "abs": "fabs", "round": "nearbyint",
    **{name: name for name in (
        "acos", "acosh", "asin", "asinh", "atan", "atanh", "ceil", "cos", "cosh", "erf", "erfc", "exp", "exp2",
        "expm1", "floor", "log", "log10", "log1p", "log2", "sin", "sinh", "sqrt", "tan", "tanh", "trunc",
        "atan2", "fmod", "pow",
    )},
}
_INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/", "eq": "==", "ne": "!=", "lt": "<", "le": "<=",
          "gt": ">", "ge": ">=", "bitwise_and": "&&", "bitwise_or": "||", "bitwise_xor": "!="}  # (bool masks)


def _libm(name: str, compute: ir.DType) -> str:
    return _LIBM[name] + ("f" if compute == ir.DType.float32 else "")


def math_expr(op: str, args: list[str], compute: ir.DType) -> str:
    """The C++ of elementwise ``op`` on compute-type arguments."""
    one = literal(1, compute)
    if op in _INFIX:
        return f"({args[0]} {_INFIX[op]} {args[1]})"
    if op == "neg":
        return f"(-{args[0]})"
    if op == "bitwise_not":
        return f"(!{args[0]})"
    if op == "sign":  # PyTorch's (0 < x) - (x < 0): NaN and -0 give +0
        zero = literal(0, compute)
        return f"(({CTYPE[compute]})(({zero} < {args[0]}) - ({args[0]} < {zero})))"
    if op in ("remainder", "lerp"):  # (the prelude's, as PyTorch computes them)
        return f"padvec_{op}({', '.join(args)})"
    if op == "reciprocal":
        return f"({one} / {args[0]})"
    if op == "rsqrt":
        return f"({one} / {_libm('sqrt', compute)}({args[0]}))"
    if op in ("maximum", "minimum"):
        return f"padvec_nan_{op[:3]}({args[0]}, {args[1]})"
    if op in ("isfinite", "signbit"):
        return f"((bool){op}({args[0]}))"
    if op == "where":
        return f"({args[0]} ? {args[1]} : {args[2]})"
    return f"{_libm(op, compute)}({', '.join(args)})"
