"""Random programs of pad, slice, cat, casts and pointwise ops, through padvec, against eager.

Hypothesis draws the program (pads of any widths on any dim, slices, cats of 2 to 5 pieces with empty ones,
broadcasts, casts, pointwise ops, where on masks combined, permutes and reshapes of computed values, splits of
their dims and merges, sums over small dims, 0-d sums and single elements scaling a whole value, strided
slices (their gradients are dilated pads), pairs interleaved along the last dim, GPT-J's rotation of pairs and
each element repeated twice, two dims of an input merged then strided, read through its strides or from a
row-major copy where they don't fold), the shapes (sizes 0 to 9, and rows of 16 to 64 that threads share), the
dtypes (float64 and int32 too, which padvec leaves to PyTorch) and the layouts (contiguous, transposed, offset
views, a broadcast first dim, rows narrowed from wider ones, the same tensor as both inputs), and teams of
threads sharing a row up to 4 times wider than planned. Each runs with poisoned outputs: in CPU emulation in
CI with a fixed seed and budget, and with a larger budget on the GPU.
"""

from __future__ import annotations

import contextlib
import math

import pytest
import thunder
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, assume, example, given, reject, settings
from hypothesis import strategies as st

from helpers import grads, jit_and_run
from thunder_padvec import padvec, schedule

DTYPES = [torch.float32, torch.bfloat16, torch.float16]
INPUT_DTYPES = DTYPES * 3 + [torch.float64, torch.int32]
UNARY = [torch.neg, torch.abs, torch.sin, torch.tanh, lambda t: t * 0.5, lambda t: t + 1.0, lambda t: t - torch.sign(t)]
BINARY = [torch.add, torch.sub, torch.mul, torch.maximum]
# in forward programs only (Thunder 0.2.6 has no gradient for lerp)
FORWARD_UNARY = [lambda t: torch.lerp(t, t * 0.5 + 1.0, 0.3) if t.is_floating_point() else -t]


@st.composite
def programs(draw):
    rank = draw(st.integers(1, 3))
    shape = [draw(st.integers(1, 9)) for _ in range(rank)]
    shape[-1] = draw(st.sampled_from([shape[-1]] * 3 + [16, 24, 32, 48, 64]))
    if draw(st.integers(0, 19)) == 0:
        shape[0] = 0  # an empty tensor
    steps = draw(st.lists(st.tuples(st.sampled_from(["unary", "binary", "pad", "slice", "cat", "cast", "where",
                                                      "broadcast", "row", "permute", "split", "sum", "total",
                                                      "element", "stride", "interleave", "merge", "rotate",
                                                      "repeat", "view"]),
                                    st.integers(0, 10 ** 6)), min_size=1, max_size=6))
    layouts = ["contiguous", "transposed", "offset", "expanded", "rows", "alias"]
    if any(kind == "view" for kind, _ in steps):  # mostly layouts whose merged dims don't fold (the row-major copy)
        layouts += ["rows", "transposed"] * 3
    return dict(shape=shape, dtype=draw(st.sampled_from(INPUT_DTYPES)), share=draw(st.booleans()),
                layout=draw(st.sampled_from(layouts)), steps=steps, teams=draw(st.sampled_from([1, 2, 4])))


def _input(shape, dtype, layout, generator, device="cpu"):
    def values(*size):
        v = torch.randn(*size, generator=generator)
        return (v * 8).to(dtype) if not dtype.is_floating_point else v.to(dtype)

    if layout == "transposed" and len(shape) > 1:
        t = values(*reversed(shape)).transpose(0, -1)
    elif layout == "offset":
        t = values(1 + torch.Size(shape).numel())[1:].view(shape)
    elif layout == "expanded" and shape:  # the first dim broadcast (stride 0), as a user's expanded cos
        t = values(1, *shape[1:]).expand(shape)
    elif layout == "rows" and shape:  # each row a narrow of a wider one: rows further apart than their length
        t = values(*shape[:-1], shape[-1] + 3).narrow(-1, 1, shape[-1])
    else:
        t = values(*shape)
    if device == "cpu":
        return t
    return t.to(device) if layout == "contiguous" else _same_layout_on(t, device)


def _same_layout_on(t, device):
    return _view_like(t, _storage(t).to(device, copy=True))


def _storage(t):
    """All of ``t``'s storage, a flat view."""
    return torch.as_strided(t, (t.untyped_storage().nbytes() // t.element_size(),), (1,), 0)


def _view_like(t, storage):
    """``t``'s view of its storage, taken of ``storage`` (a flat copy of it)."""
    return torch.as_strided(storage, t.shape, t.stride(), t.storage_offset())


def _narrow(t: torch.Tensor, dim: int, start: int, length: int) -> torch.Tensor:
    """``t.narrow(dim, start, length)`` as indexing writes it (a slice in Thunder's trace; ``narrow``, which Thunder
    runs as an opaque PyTorch call, padvec turns into one too, see ``test_executor``)."""
    return t[(slice(None),) * dim + (slice(start, start + length),)]


def _program(spec, forward_only: bool = False):
    """The drawn steps as a function of two inputs of the drawn shape (with ``forward_only``, its unary ops
    drawn from ops without a gradient too)."""
    unary = UNARY + FORWARD_UNARY if forward_only else UNARY

    def fn(a, b, row):
        values = [a, b]
        for kind, r in spec["steps"]:
            v = values[r % len(values)]
            dim = r % v.dim()
            if v.numel() == 0 and kind in ("slice", "cat", "broadcast"):
                kind = "unary"  # nothing to narrow
            if kind == "unary":
                v = unary[r % len(unary)](v)
            elif kind == "binary":
                other = next((w for w in reversed(values) if w.shape == v.shape), v)
                v = BINARY[r % len(BINARY)](v, other.to(v.dtype))
            elif kind == "pad":  # up to all dims, from the last: widths -2 to 2 at the low end, -1 to 2 high
                widths = []
                for d in range(1, min(v.dim(), 1 + r % 3) + 1):
                    lo, hi = (r >> (4 * d)) % 5 - 2, (r >> (4 * d + 2)) % 4 - 1
                    widths += [lo, hi] if v.shape[-d] + min(lo, 0) + min(hi, 0) >= 1 else [1, 1]
                v = F.pad(v, widths, value=0.25 if v.is_floating_point() else 3)
            elif kind == "slice":
                size = v.shape[dim]
                start = r % size
                stop = start + 1 + (r // 7) % (size - start)
                v = _narrow(v, dim, start, stop - start)
            elif kind == "cat":  # 2 to 5 pieces of unequal widths, some empty
                pieces = [v]
                for k in range(1 + (r >> 3) % 4):
                    width = (r >> (5 + 2 * k)) % (v.shape[dim] + 1)
                    start = (r >> 7) % (v.shape[dim] - width + 1)
                    pieces.append(-_narrow(v, dim, start, width) if k % 2 else _narrow(v, dim, start, width) * 2)
                v = torch.cat(pieces, dim=dim)
            elif kind == "cast":
                v = v.to(DTYPES[r % len(DTYPES)])
            elif kind == "where":  # on a mask, or on masks combined (and, or, xor, not)
                mask = v > 0
                if r % 3 == 1:
                    mask = mask & ~(v > 1)
                elif r % 3 == 2:
                    mask = (mask ^ (v < -1)) | (v.abs() < 0.25)
                v = torch.where(mask, v, v * -0.5 if v.is_floating_point() else -v)
            elif kind == "broadcast":  # a size-1 slice broadcast back over the dim
                v = v * _narrow(v, dim, r % v.shape[dim], 1)
            elif kind == "row":  # a row broadcast over every leading dim, as cos and sin are over heads
                v = v + row.to(v.dtype) if v.shape[-1] == row.shape[-1] else -v
            elif kind == "permute":  # of a computed value (PyTorch's), then flattened as a qkv gradient is
                order, lead = list(range(v.dim())), max(v.dim() - (r % 2), 1)  # odd r: the last dim stays last
                i, j = r % lead, (r // 5) % lead
                order[i], order[j] = order[j], order[i]
                v = (v * 2).permute(order)
                # (not of an empty tensor: Thunder's reshape can't infer the -1 there)
                v = v.reshape(-1, v.shape[-1]) if (r // 3) % 2 and v.dim() > 1 and v.numel() else v
            elif kind == "split":  # a reshape that splits a computed dim (a gradient's heads into groups)
                size = v.shape[dim]
                outer = next((k for k in (2, 3) if size % k == 0 and size > k), 1)
                v = (v + 1).reshape(*v.shape[:dim], outer, size // outer, *v.shape[dim + 1:])
            elif kind == "sum":  # over a small dim, as an expand's gradient sums the expanded heads
                v = (v * 2).sum(dim=dim, keepdim=bool(r % 2)) if v.dim() > 1 else v
            elif kind == "stride":  # a strided slice (PyTorch's view; a dilated pad in the backward)
                step = 2 + r % 2
                index = [slice(None)] * v.dim()
                index[dim] = slice((r // 3) % min(step, max(v.shape[dim], 1)), None, step)
                v = v[tuple(index)] * 2
            elif kind == "view":  # two dims of the first input merged, then strided (steps of 2 to 7): layout
                # ops its loads read through its drawn strides (or a row-major copy, where they don't fold)
                v = a
                if v.dim() > 1 and v.numel():
                    # mostly the last two dims merged, in steps that don't divide the last (where its rows lie
                    # apart, that doesn't fold: the copy); else any two, every 2nd or 3rd element
                    lead, step = (r // 3) % (v.dim() - 1), 2 + r % 2
                    if r % 7 < 4:
                        lead, step = v.dim() - 2, next(k for k in (3, 2, 5, 7) if v.shape[-1] % k or k == 7)
                    v = v.flatten(lead, lead + 1)
                    index = [slice(None)] * v.dim()
                    index[lead] = slice((r // 5) % min(step, v.shape[lead]), None, step)
                    v = v[tuple(index)] * 2  # read by a kernel even where it is the program's output
                else:
                    v = v * 2
            elif kind == "merge":  # a reshape that merges two dims of a computed value
                lead = (r // 3) % max(v.dim() - 1, 1)
                v = (v * 2).flatten(lead, lead + 1) if v.dim() > 1 else v * 2
            elif kind == "interleave":  # two values' last dims interleaved, as GPT-J's rotary writes its pairs
                v = torch.stack((v, -v * 0.5), dim=-1).flatten(-2) if v.numel() else -v
            elif kind == "rotate":  # GPT-J's rotation of pairs: the strided halves of v, stacked and flattened
                if v.dim() and v.shape[-1] % 2 == 0 and v.numel():
                    v = torch.stack((-v[..., 1::2], v[..., ::2]), dim=-1).flatten(-2) * (0.5 if r % 2 else 1.0)
                else:
                    v = -v
            elif kind == "repeat":  # each element of the last dim twice (a repeat_interleave, HF GPT-J's sin and cos)
                v = (v.unsqueeze(-1).expand(*v.shape, 2).flatten(-2) if v.dim() and v.numel() else v) + 1
            elif kind == "element":  # one element of the first input, a 0-d view of it, scaling all of v
                if a.numel():
                    v = v * a[(r % a.shape[0],) + (0,) * (a.dim() - 1)].to(v.dtype)
                else:
                    v = -v
            elif kind == "total":  # a 0-d sum of a corner of v, scaling all of v (Thunder broadcasts it)
                corner = v
                for d in range(v.dim()):
                    corner = _narrow(corner, d, 0, min(2, v.shape[d]))
                v = v * (corner.sum() * 0.25).to(v.dtype)
            values.append(v)
        return values[-1], values[len(values) // 2]

    return fn


@contextlib.contextmanager
def _drawn_knobs(spec):
    """The knobs a spec draws, for its run: "share" lifts the launch-size floor so that threads also take
    several rows at these small sizes; "teams": threads sharing a row, that many times the planned count
    (``fusion._with_wider_teams``)."""
    saved = schedule.TUNING.min_threads, schedule.TUNING.team_scale
    schedule.TUNING.min_threads = 0 if spec["share"] else saved[0]
    schedule.TUNING.team_scale = spec["teams"]
    try:
        yield
    finally:
        schedule.TUNING.min_threads, schedule.TUNING.team_scale = saved


def _check(spec, device):
    generator = torch.Generator().manual_seed(len(spec["steps"]) * 7919 + sum(spec["shape"]))
    a = _input(spec["shape"], spec["dtype"], spec["layout"], generator, device)
    # "alias": both inputs the same tensor
    b = a if spec["layout"] == "alias" else _input(spec["shape"], spec["dtype"], "contiguous", generator, device)
    row = _input(spec["shape"][-1:], spec["dtype"], "contiguous", generator, device)
    fn = _program(spec, forward_only=True)
    with _drawn_knobs(spec):
        _, outs, _ = jit_and_run(fn, a, b, row)
    for got, want in zip(outs, fn(a, b, row)):
        assert got.shape == want.shape and got.dtype == want.dtype
        # sin and tanh come from the host's libm here and PyTorch's own code in eager: the last bits may differ.
        torch.testing.assert_close(got, want, rtol=1e-5 if want.dtype in (torch.float32, torch.float64) else 1e-2,
                                   atol=1e-5, equal_nan=True)


@settings(max_examples=int(__import__("os").environ.get("PADVEC_PROGRAMS", 60)), deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(spec=programs())
# a sum over a padded dim: x was loaded (and dropped) at the points the pad fills, before x's first element
@example(spec={"shape": [1, 6, 1], "dtype": torch.float32, "share": False, "layout": "contiguous", "teams": 1,
               "steps": [("pad", 980), ("unary", 0), ("unary", 0), ("sum", 397)]})
# a merge of rows 10 apart, each of 7 elements, in steps of 3: the kernel reads a row-major copy of the input
@example(spec={"shape": [2, 3, 7], "dtype": torch.bfloat16, "share": False, "layout": "rows", "teams": 1,
               "steps": [("view", 3), ("pad", 977)]})
def test_random_programs_match_eager(emulated, spec):
    _check(spec, "cpu")


@pytest.mark.gpu
@settings(max_examples=int(__import__("os").environ.get("PADVEC_GPU_PROGRAMS", 80)), deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(spec=programs())
def test_random_programs_match_eager_on_the_gpu(spec):
    _check(spec, "cuda")


@settings(max_examples=int(__import__("os").environ.get("PADVEC_GRAD_PROGRAMS", 30)), deadline=None,
          derandomize=True, suppress_health_check=list(HealthCheck))
@given(spec=programs())
# an empty piece of a cat, then GPT-J's rotation: the gradient's empty output computed in the unmerged shape
@example(spec={"shape": [4, 6], "dtype": torch.float32, "share": False, "layout": "contiguous", "teams": 1,
               "steps": [("unary", 27695), ("unary", 476), ("cat", 502), ("unary", 0), ("rotate", 454360)]})
# each element repeated, then the row split across the repeats: that split, pushed down to x's loads, can't
# be folded into them (it stays in PyTorch)
@example(spec={"shape": [1, 9], "dtype": torch.float32, "share": False, "layout": "contiguous", "teams": 1,
               "steps": [("unary", 0), ("repeat", 0), ("split", 756143)]})
# float32 cast to bf16, then tanh: Thunder's backward of tanh rounds to bf16 where eager's fused one does
# not; padvec's gradient equals Thunder's own executors', one bf16 unit from eager's (the 16-bit rule)
@example(spec={"shape": [4, 1, 1], "dtype": torch.float32, "share": False, "layout": "contiguous", "teams": 1,
               "steps": [("cast", 165904), ("unary", 0), ("unary", 0), ("unary", 0), ("unary", 0), ("unary", 177)]})
# the same in the forward, rows 8 apart, each of 5 elements, in steps of 3
@example(spec={"shape": [3, 5], "dtype": torch.float32, "share": False, "layout": "rows", "teams": 1,
               "steps": [("view", 0), ("unary", 1)]})
def test_random_programs_gradients_match(emulated, spec):
    _check_gradients(spec, "cpu")


@pytest.mark.gpu
@settings(max_examples=int(__import__("os").environ.get("PADVEC_GPU_GRAD_PROGRAMS", 40)), deadline=None,
          derandomize=True, suppress_health_check=list(HealthCheck))
@given(spec=programs())
def test_random_programs_gradients_match_on_the_gpu(spec):
    _check_gradients(spec, "cuda")


def _check_gradients(spec, device):
    """The random programs with inputs that require grad: their outputs and the gradients of the inputs
    (each a view, in its drawn layout, of a leaf that holds its storage), through padvec's forward and
    backward kernels. float32 and float64 against eager, unless the program casts to a 16-bit type. 16-bit
    (and those): no farther from a float64 run than twice
    eager is or Thunder's own executors are, whichever is farther, plus one unit in the last place of the
    largest value (eager's autograd adds a gradient's contributions in another order than Thunder's
    backward trace, and each 16-bit add rounds; padvec keeps the trace's order; torch.compile's executor,
    where it is Thunder's, skips the trace's roundings inside its kernels and may be exact where eager and
    padvec round). Programs with a 0-d value (a sum, an element) are left out: Thunder 0.2.6
    differentiates ``mul`` by a 0-d tensor without summing the gradient back to 0-d, with or without padvec
    (wrong gradients or errors; see ``test_a_region_whose_trace_contradicts_itself_runs_in_pytorch``)."""
    assume(spec["dtype"].is_floating_point and all(kind not in ("total", "element") for kind, _ in spec["steps"]))
    generator = torch.Generator().manual_seed(len(spec["steps"]) * 7919 + sum(spec["shape"]))
    inputs = [_input(spec["shape"], spec["dtype"], spec["layout"], generator, device),
              _input(spec["shape"], spec["dtype"], "contiguous", generator, device),
              _input(spec["shape"][-1:], spec["dtype"], "contiguous", generator, device)]
    alias = spec["layout"] == "alias"
    if alias:
        inputs[1] = inputs[0]
    fn = _program(spec)
    cotangents = [torch.randn(o.shape, generator=generator).to(device=device, dtype=o.dtype)
                  for o in fn(*inputs)]

    def run(f, dtype=None):
        # each input a view of a leaf that holds its whole storage: the program reads it in its drawn layout
        # (transposed, offset, broadcast, narrowed rows) and the gradients reach the leaf through the view;
        # "alias": the first input twice
        leaves, args = [], []
        for k, t in enumerate(inputs):
            if alias and k == 1:
                args.append(args[0])
                continue
            leaves.append(_storage(t).detach().to(dtype or t.dtype, copy=True).requires_grad_(True))
            args.append(_view_like(t, leaves[-1]))
        outs = f(*args)
        used = [(o, c.to(o.dtype)) for o, c in zip(outs, cotangents) if o.requires_grad]
        grads = torch.autograd.grad([o for o, _ in used], leaves, [c for _, c in used], allow_unused=True)
        return [o.detach() for o in outs] + [g if g is not None else torch.zeros_like(t) for g, t in zip(grads, leaves)]

    try:
        with _drawn_knobs(spec):
            got = run(thunder.jit(fn, executors=[padvec]))
    except Exception:
        try:  # where Thunder fails without padvec too (an executor after it, in hunt.py), the example is void
            run(thunder.jit(fn))
        except Exception:
            reject()
        raise
    # a program that casts to a 16-bit type rounds there, in its backward too, where Thunder's trace and
    # eager's autograd need not: it takes the 16-bit rule, at the coarsest of its types' units
    casts = [DTYPES[r % len(DTYPES)] for kind, r in spec["steps"] if kind == "cast"]
    coarsest = max([spec["dtype"], *casts], key=lambda d: torch.finfo(d).eps)
    if coarsest in (torch.float32, torch.float64):
        for value, want in zip(got, run(fn)):
            assert value.shape == want.shape and value.dtype == want.dtype
            torch.testing.assert_close(value, want, rtol=1e-5, atol=1e-4, equal_nan=True)
        return
    try:
        reference = run(thunder.jit(fn))
    except Exception:  # Thunder's own executors fail: there is nothing to compare with
        reject()
    for value, theirs, eager, exact in zip(got, reference, run(fn), run(fn, torch.float64)):
        assert value.shape == theirs.shape and value.dtype == theirs.dtype
        assert torch.equal(value.isfinite(), theirs.isfinite())
        finite = theirs.isfinite() & eager.isfinite() & exact.isfinite()
        error, their_error, eager_error = ((v.double() - exact)[finite].abs().max().item() if finite.any() else 0.0
                                           for v in (value, theirs, eager))
        ulp = torch.finfo(coarsest).eps * (exact[finite].abs().max().item() if finite.any() else 0.0)
        assert error <= 2 * max(their_error, eager_error) + ulp, (error, their_error, eager_error, ulp)


@st.composite
def partial_rotations(draw):
    """RoPE of ``n`` features starting at column ``start`` of rows of ``hs``, the others passed through:
    their halves rotated (LitGPT's), or their pairs (GPT-J's)."""
    hs = draw(st.sampled_from([24, 48, 64, 80, 96, 128, 160]))
    n = draw(st.sampled_from([n for n in (4, 8, 16, 32, 48, 64) if n < hs]))
    start = draw(st.sampled_from([s for s in (0, 4, 8, 16, 32, 40) if s + n <= hs]))
    lead = [draw(st.integers(1, 3)), draw(st.integers(1, 4)), draw(st.integers(1, 9))]
    return dict(hs=hs, n=n, start=start, lead=lead, dtype=draw(st.sampled_from(DTYPES)),
                extra=draw(st.booleans()), pairs=draw(st.booleans()))


def _partial_rotation(n, start, extra, pairs=False):
    def fn(x, cos, sin):
        r = x[..., start:start + n]
        if pairs:
            rotated = torch.stack((-r[..., 1::2], r[..., ::2]), -1).flatten(-2)
        else:
            rotated = torch.cat((-r[..., n // 2:], r[..., :n // 2]), -1)
        roped = (r * cos + rotated * sin).to(x.dtype)
        out = torch.cat((x[..., :start], roped, x[..., start + n:]), -1)
        return out * 2 if extra else out

    return fn


@settings(max_examples=int(__import__("os").environ.get("PADVEC_PROGRAMS", 60)), deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(spec=partial_rotations())
# two pieces of equal width: the check finds the cut dim by the pieces' offsets, not their widths
@example(spec={"hs": 96, "n": 48, "start": 0, "lead": [1, 1, 1], "dtype": torch.float32, "extra": False,
               "pairs": False})
# GPT-J's pairs, rotated in the middle of the row: three pieces along the pairs' dim
@example(spec={"hs": 160, "n": 64, "start": 32, "lead": [2, 1, 3], "dtype": torch.bfloat16, "extra": True,
               "pairs": True})
def test_rows_in_pieces_match_eager(emulated, spec):
    """Rotations of a part of each row, anywhere in it: where padvec cuts the rows into pieces
    (``vectorize.segments.ROW_PIECES``; GPT-J's pairs along the pairs' dim), the pieces tile each row
    once, cut on 16-byte edges into pieces of at least ``MIN_ROW_PIECE_BYTES``, and the output
    (poisoned first) equals eager's."""
    _check_pieces(spec, "cpu")


def _check_pieces(spec, device):
    from thunder_padvec import explain
    from thunder_padvec.vectorize import segments

    generator = torch.Generator().manual_seed(spec["hs"] * 1009 + spec["n"] * 31 + spec["start"])
    *lead, t = spec["lead"]
    x = torch.randn(*lead, t, spec["hs"], generator=generator).to(device, spec["dtype"])
    cos, sin = (torch.randn(t, spec["n"], generator=generator).to(device, spec["dtype"]) for _ in range(2))
    fn = _partial_rotation(spec["n"], spec["start"], spec["extra"], spec.get("pairs", False))
    jitted, out, _ = jit_and_run(fn, x, cos, sin)
    assert torch.equal(out, fn(x, cos, sin))
    itemsize = x.element_size()
    for report in explain(jitted):
        shapes = [seg.segment.shape for seg in report.plan.segments]
        offsets = [seg.segment.stores[0].offsets for seg in report.plan.segments]
        # the cut dim: the last, or the one before a last dim of pairs, where the pieces' offsets differ
        d = next((d for d in reversed(range(len(shapes[0]))) if len({o[d] for o in offsets}) > 1), len(shapes[0]) - 1)
        inner = math.prod(shapes[0][d + 1:])  # elements of a column along the cut dim
        spans = sorted((seg.segment.stores[0].offsets[d] * inner, seg.segment.shape[d] * inner)
                       for seg in report.plan.segments)
        if len(spans) > 1:
            assert report.launch.interleave, str(report)
            assert [a for a, _ in spans] == [0] + [a + w for a, w in spans[:-1]], spans
            assert spans[-1][0] + spans[-1][1] == spec["hs"], spans
            assert all(a * itemsize % 16 == 0 and w * itemsize >= segments.MIN_ROW_PIECE_BYTES for a, w in spans)


@st.composite
def prologues(draw):
    """LitGPT's RoPE at random sizes: the RoPE form on ``[B, n_head, T, hs]`` or the qkv-split form with
    ``groups`` query groups, full or partial rotary, under the launch floor or with it lifted (threads
    then take several heads), teams up to twice as wide."""
    n_head = draw(st.sampled_from([1, 2, 3, 4, 6, 8]))
    hs = draw(st.sampled_from([8, 16, 24, 32, 48, 64, 80, 96, 128, 160, 256]))
    return dict(form=draw(st.sampled_from(["rope", "qkv"])), batch=draw(st.integers(1, 2)), n_head=n_head,
                groups=draw(st.sampled_from([g for g in range(1, n_head + 1) if n_head % g == 0])), hs=hs,
                n=draw(st.sampled_from(sorted({hs, hs // 2 + hs // 2 % 2, 8, 16, 32}))), t=draw(st.integers(1, 9)),
                dtype=draw(st.sampled_from(DTYPES)), share=draw(st.booleans()), teams=draw(st.sampled_from([1, 2])))


@settings(max_examples=int(__import__("os").environ.get("PADVEC_PROLOGUES", 20)), deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(spec=prologues())
def test_rope_prologues_forward_and_backward_match_eager(emulated, spec):
    _check_prologue(spec, "cpu")


@pytest.mark.gpu
@settings(max_examples=int(__import__("os").environ.get("PADVEC_GPU_PROLOGUES", 20)), deadline=None,
          derandomize=True, suppress_health_check=list(HealthCheck))
@given(spec=prologues())
def test_rope_prologues_forward_and_backward_match_eager_on_the_gpu(spec):
    _check_prologue(spec, "cuda")


def _check_prologue(spec, device):
    """The forward's outputs equal eager's bit for bit; x's gradient is within twice eager's error of a
    float64 reference (both passes run padvec kernels)."""
    import functools

    from thunder_padvec import explain, padvec
    from thunder_padvec.examples import litgpt_rope, qkv_split_rope

    n, hs, t = min(spec["n"], spec["hs"]), spec["hs"], spec["t"]
    generator = torch.Generator().manual_seed(hs * 7919 + n * 31 + t)
    if spec["form"] == "rope":
        fn = functools.partial(litgpt_rope, rope_n_elem=n)
        shape = (spec["batch"], spec["n_head"], t, hs)
    else:
        fn = functools.partial(qkv_split_rope, n_head=spec["n_head"], n_query_groups=spec["groups"], head_size=hs,
                               rope_n_elem=n)
        shape = (spec["batch"], t, (spec["n_head"] + 2 * spec["groups"]) * hs)
    x, cos, sin = (torch.randn(*s, generator=generator).to(device=device, dtype=spec["dtype"])
                   for s in (shape, (t, n), (t, n)))
    eager_outs = fn(x, cos, sin)
    eager_outs = eager_outs if isinstance(eager_outs, tuple) else (eager_outs,)
    cotangents = [torch.randn(*o.shape, generator=generator).to(device=device, dtype=o.dtype) for o in eager_outs]
    with _drawn_knobs(spec):
        jitted = thunder.jit(fn, executors=[padvec])
        outs, grad = grads(jitted, x, cos, sin, cotangents)
    eager_outs, eager_grad = grads(fn, x, cos, sin, cotangents)
    _, exact_grad = grads(fn, x.double(), cos.double(), sin.double(), [c.double() for c in cotangents])
    for out, want in zip(outs, eager_outs):
        assert out.shape == want.shape and torch.equal(out, want)
    padvec_error = (grad.double() - exact_grad).abs().max().item()
    eager_error = (eager_grad.double() - exact_grad).abs().max().item()
    assert padvec_error <= 2 * eager_error + 1e-6, (padvec_error, eager_error)
    assert {r.trace for r in explain(jitted)} == {"forward", "backward"}
