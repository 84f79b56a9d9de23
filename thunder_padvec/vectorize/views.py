"""Folding a chain of layout ops on an input into the addresses of its loads.

A view's dim is a mixed-radix number: a tuple of *components* ``(extent, stride)``, outermost
first, whose extents multiply to the dim's size. Coordinate ``c`` of the dim addresses
``sum(((c // inner_k) % extent_k) * stride_k)``, ``inner_k`` the product of the extents after
component ``k``. A plain strided dim is one component; a reshape that merges dims a strided
tensor can't merge (the heads of an expanded key in grouped-query attention) keeps several.

- permute: reorders the dims.
- slice [start, end): moves the base by ``start * stride``; on a dim of several components only
  when the slice keeps whole multiples of the inner components. With a step: the stride times the
  step, on a dim of one component; on a dim of several, where its inner components (one split if
  need be) make exactly the step, those stay at the start's digits and the outer ones are sliced.
- expand (broadcast_in_dim): new and expanded dims get stride 0.
- reshape: the components of all dims in order are the *atoms* of the element order; the new
  dims take atoms from the front, splitting an atom ``(e, s)`` into ``(e / m, s * m), (m, s)``
  where a dim needs only part of it (always valid in row-major order).

Adjacent components that are contiguous with each other merge; extent-1 components vanish.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

Component = tuple[int, int]  # (extent, stride)


@dataclass(frozen=True)
class ViewLayout:
    dims: tuple[tuple[Component, ...], ...]
    offset: int  # elements from the input's data pointer to the view's element 0

    def strides(self) -> tuple[int, ...]:
        """Per dim, the stride of its innermost component (0 for a dim of extent 1)."""
        return tuple(d[-1][1] if d else 0 for d in self.dims)


def _simplify(components: list[Component]) -> tuple[Component, ...]:
    merged: list[Component] = []
    for extent, stride in components:
        if extent == 1:
            continue
        if merged and merged[-1][1] == extent * stride:
            extent *= merged.pop()[0]
        merged.append((extent, stride))
    return tuple(merged)


def _reshape(dims: list[tuple[Component, ...]], shape: tuple[int, ...]) -> list[tuple[Component, ...]] | None:
    if 0 in shape:  # no element is ever addressed: any strides do
        return [_simplify([(size, 0)]) for size in shape]
    atoms = [c for d in dims for c in d]
    out = []
    for size in shape:
        taken, need = [], size
        while need > 1:
            if not atoms:
                return None
            extent, stride = atoms.pop(0)
            if extent <= need:
                if need % extent:
                    return None
                taken.append((extent, stride))
                need //= extent
            else:
                if extent % need:
                    return None
                taken.append((need, stride * (extent // need)))
                atoms.insert(0, (extent // need, stride))
                need = 1
        out.append(_simplify(taken))
    return out if not atoms else None


def _address(dim: tuple[Component, ...], c: int) -> int:
    """Elements from the dim's coordinate 0 to its coordinate ``c``."""
    inner, address = math.prod(e for e, _ in dim), 0
    for extent, stride in dim:
        inner //= extent
        address += (c // inner % extent) * stride
    return address


def _slice(dim: tuple[Component, ...], start: int, end: int, step: int = 1) -> tuple[tuple[Component, ...], int] | None:
    """The dim's components after the slice, and the offset it adds."""
    size = math.prod(e for e, _ in dim)
    count = len(range(start, end, step))
    if start == 0 and count == size:
        return dim, 0
    if step != 1:
        return _strided_slice(dim, start, count, step)
    if not dim:
        return None
    inner = math.prod(e for e, _ in dim[1:])
    if start % inner or end % inner:
        return None
    (_, stride), rest = dim[0], dim[1:]
    return _simplify([((end - start) // inner, stride), *rest]), (start // inner) * stride


def _strided_slice(dim: tuple[Component, ...], start: int, count: int, step: int):
    """``count`` coordinates ``step`` apart from ``start``: one component of ``step`` times the stride where the
    dim has one; else the dim's inner components, split where needed, that make ``step`` stay at ``start``'s
    digits (an offset) and the outer ones are sliced with unit steps. None where no inner run makes
    ``step``."""
    if count <= 1:
        return _simplify([(count, 0)]), _address(dim, start) if count else 0
    if len(dim) == 1:
        ((_, stride),) = dim
        return ((count, stride * step),), start * stride
    components, made = list(dim), 1
    k = len(components)
    while made < step and k > 0:  # made divides step throughout: each extent taken divides what is needed
        extent, stride = components[k - 1]
        need = step // made
        if extent <= need:
            if need % extent:
                return None
            made, k = made * extent, k - 1
        else:
            if extent % need:
                return None
            components[k - 1:k] = [(extent // need, stride * need), (need, stride)]
            made = step
    if made != step:
        return None
    outer, inner = tuple(components[:k]), tuple(components[k:])
    found = _slice(outer, start // step, start // step + count)
    if found is None:
        return None
    outer, moved = found
    return outer, moved + _address(inner, start % step)


def steps(op: tuple) -> tuple[int, ...]:
    """The steps of a chain's ``("slice", start, end[, steps])`` op (1 where it has none)."""
    return op[3] if len(op) > 3 else (1,) * len(op[1])


def fold(chain: tuple[tuple, ...], shape: tuple[int, ...], strides: tuple[int, ...]) -> ViewLayout | None:
    """The view of a tensor of ``shape`` and ``strides`` after ``chain``; None if it can't be folded."""
    dims = [_simplify([(size, stride)]) for size, stride in zip(shape, strides)]
    offset = 0
    for op in chain:
        kind = op[0]
        if kind == "permute":
            dims = [dims[d] for d in op[1]]
        elif kind == "slice":
            for d, (start, end, step) in enumerate(zip(op[1], op[2], steps(op))):
                found = _slice(dims[d], start, end, step)
                if found is None:
                    return None
                dims[d], moved = found
                offset += moved
        elif kind == "expand":
            new_shape, broadcast_dims = op[1], op[2]
            out = [_simplify([(size, 0)]) for size in new_shape]
            for i, d in enumerate(broadcast_dims):
                if math.prod(e for e, _ in dims[i]) == new_shape[d]:
                    out[d] = dims[i]
            dims = out
        elif kind == "reshape":
            dims = _reshape(dims, op[1])
            if dims is None:
                return None
        else:
            return None
    return ViewLayout(tuple(dims), offset)


def folds_contiguous(chain: tuple[tuple, ...], shape: tuple[int, ...]) -> bool:
    """Whether ``chain`` folds into the addresses of a row-major tensor of ``shape``. A chain that does not
    (a reshape that splits a dim of an expanded one across its repeats) can't be a view of an input, which
    a kernel reads in any layout; where the input is laid out otherwise at run time, the planner checks
    again."""
    return fold(chain, shape, contiguous_strides(shape)) is not None


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))
