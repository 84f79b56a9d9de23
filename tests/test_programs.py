"""Random programs of pad, slice, cat, casts and pointwise ops, through padvec, against eager.

Hypothesis draws the program, the shapes (sizes 1 to 9, size-1 dims included), the dtypes and the
layouts (contiguous, transposed, offset views); each runs in CPU emulation with poisoned outputs.
A fixed seed and example budget keep CI repeatable.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import jit_and_run

DTYPES = [torch.float32, torch.bfloat16, torch.float16]
UNARY = [torch.neg, torch.abs, torch.sin, torch.tanh, lambda t: t * 0.5, lambda t: t + 1.0]
BINARY = [torch.add, torch.sub, torch.mul, torch.maximum]


@st.composite
def programs(draw):
    rank = draw(st.integers(1, 3))
    shape = [draw(st.integers(1, 9)) for _ in range(rank)]
    steps = draw(st.lists(st.tuples(st.sampled_from(["unary", "binary", "pad", "slice", "cat", "cast", "where", "broadcast"]),
                                    st.integers(0, 10 ** 6)), min_size=1, max_size=6))
    return dict(shape=shape, dtype=draw(st.sampled_from(DTYPES)), layout=draw(st.sampled_from(
        ["contiguous", "transposed", "offset"])), steps=steps)


def _input(shape, dtype, layout, generator):
    if layout == "transposed" and len(shape) > 1:
        return torch.randn(*reversed(shape), generator=generator).to(dtype).transpose(0, -1)
    if layout == "offset":
        flat = torch.randn(1 + torch.Size(shape).numel(), generator=generator).to(dtype)
        return flat[1:].view(shape)
    return torch.randn(*shape, generator=generator).to(dtype)


def _program(spec):
    """The drawn steps as a function of two inputs of the drawn shape."""

    def fn(a, b):
        values = [a, b]
        for kind, r in spec["steps"]:
            v = values[r % len(values)]
            dim = r % v.dim()
            if kind == "unary":
                v = UNARY[r % len(UNARY)](v)
            elif kind == "binary":
                other = next((w for w in reversed(values) if w.shape == v.shape), v)
                v = BINARY[r % len(BINARY)](v, other.to(v.dtype))
            elif kind == "pad":  # the last dim, and the one before it where there is one
                widths = []
                for d in range(1, min(v.dim(), 1 + r % 2) + 1):
                    lo, hi = (r >> (4 * d)) % 5 - 2, (r >> (4 * d + 2)) % 4 - 1
                    widths += [lo, hi] if v.shape[-d] + min(lo, 0) + min(hi, 0) >= 1 else [1, 1]
                v = F.pad(v, widths, value=0.25)
            elif kind == "slice":
                size = v.shape[dim]
                start = r % size
                stop = start + 1 + (r // 7) % (size - start)
                v = v.narrow(dim, start, stop - start)
            elif kind == "cat":
                v = torch.cat((v, -v.narrow(dim, 0, 1 + r % v.shape[dim]), v * 2.0), dim=dim)
            elif kind == "cast":
                v = v.to(DTYPES[r % len(DTYPES)])
            elif kind == "where":
                v = torch.where(v > 0, v, v * -0.5)
            elif kind == "broadcast":  # a size-1 slice broadcast back over the dim
                v = v * v.narrow(dim, r % v.shape[dim], 1)
            values.append(v)
        return values[-1], values[len(values) // 2]

    return fn


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(spec=programs())
def test_random_programs_match_eager(emulated, spec):
    generator = torch.Generator().manual_seed(len(spec["steps"]) * 7919 + sum(spec["shape"]))
    a = _input(spec["shape"], spec["dtype"], spec["layout"], generator)
    b = _input(spec["shape"], spec["dtype"], "contiguous", generator)
    fn = _program(spec)
    _, outs, _ = jit_and_run(fn, a, b)
    for got, want in zip(outs, fn(a, b)):
        assert got.shape == want.shape and got.dtype == want.dtype
        # sin and tanh come from the host's libm here and PyTorch's own code in eager: the last bits may differ.
        torch.testing.assert_close(got, want, rtol=1e-5 if want.dtype == torch.float32 else 1e-2, atol=1e-5,
                                   equal_nan=True)
