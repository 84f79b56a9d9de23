"""Reshapes of computed values, pushed down to the loads.

A kernel folds layout ops into the addresses of its inputs (:class:`~thunder_padvec.ir.View`),
but a reshape of a value it computes has no address to fold into. A reshape that only *splits*
dims (each dim becomes consecutive dims whose sizes multiply to it; dims of size 1 may appear or
vanish) commutes with every node whose work does not act across a split dim, so the value is
computed in the new shape instead: its producers are cloned in that shape, down to the loads,
whose views take the reshape as one more step of their chain.

Pointwise ops, casts, broadcasts and sums commute with any split; a pad, slice or cat commutes
where the dim it resizes splits into one dim of its size and dims of size 1 (LitGPT's gradient of
q, ``[B, nh, T, hs] -> [B, groups, nh / groups, T, hs]``, resized along ``hs`` only).

A reshape that only *merges* dims goes the other way, up to the outputs: the value keeps its
unmerged shape, and so does every node computed from it (its other operands split to that shape,
as above), down to the kernel's outputs, which the kernel writes in the unmerged shape into
row-major memory of the region's shape (a reshape that is a view). GPT-J-style rotary's
``stack((-x2, x1), -1).flatten(-2)`` followed by the math on the flat row is one kernel this way.
A pad, slice or cat of a split or merged dim acts on its outer dim where its offsets and sizes are
whole rows of the inner ones. A merge stops at a pad, slice or cat that cuts a merged dim inside its
rows, a broadcast that expands a merged dim, a sum, or a reshape of the merged value that neither
splits nor merges. Elsewhere :class:`UnfoldableReshape` names the reshape, and the executor leaves it
to PyTorch.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from . import ir
from .errors import UnsupportedError
from .vectorize.views import folds_contiguous


class UnfoldableReshape(UnsupportedError):
    """A reshape of a computed value that can't be pushed to the loads; ``name`` is its result."""

    def __init__(self, name: str, reason: str):
        super().__init__(f"the reshape to {name} can't be computed in its new shape: {reason}")
        self.name = name


def split_groups(old: tuple[int, ...], new: tuple[int, ...]) -> list[list[int]] | None:
    """Per dim of ``old``, the dims of ``new`` it splits into; None unless the reshape only splits."""
    groups, j = [], 0
    for size in old:
        group, product = [], 1
        if size == 1 and j < len(new) and new[j] == 1:  # a dim of size 1 keeps one where there is one
            group, j = [j], j + 1
        while product < size and j < len(new):
            group.append(j)
            product *= new[j]
            j += 1
        if product != size:
            return None
        groups.append(group)
    if any(new[k] != 1 for k in range(j, len(new))):
        return None
    if j < len(new):  # trailing dims of size 1
        if not groups:
            return None
        groups[-1] += list(range(j, len(new)))
    return groups


def _outer_dim(node, groups: list[list[int]], fine: tuple[int, ...], d: int, shape_of, reshape: str) -> tuple[int, int]:
    """Where a pad, slice or cat of dim ``d`` acts in the finer shape ``fine`` (``groups[d]``: the dims ``d``
    is made of): ``(the outermost of them of size > 1, the product of the sizes inside it)``. Every offset
    and size of the resize must be whole rows of that product, else :class:`UnfoldableReshape`."""
    kind = type(node).__name__.lower()
    group = groups[d]
    if not group:
        raise UnfoldableReshape(reshape, f"dim {d}, which a {kind} resizes, has no dim of its own")
    wide = [k for k in group if fine[k] != 1]
    if not wide:
        return group[0], 1
    inner = math.prod(fine[k] for k in wide[1:])
    if isinstance(node, ir.Pad):
        amounts = node.widths[d]
    elif isinstance(node, ir.Slice):
        amounts = (node.start[d], node.end[d], shape_of(node.operand)[d])
    else:
        amounts = tuple(shape_of(p)[d] for p in node.operands)
    if any(a % inner for a in amounts):
        raise UnfoldableReshape(reshape, f"it splits or merges dim {d}, which a {kind} resizes, and the {kind} "
                                         f"cuts into its rows of {inner}")
    return wide[0], inner


def merge_groups(old: tuple[int, ...], new: tuple[int, ...]) -> list[list[int]] | None:
    """Per dim of ``new``, the dims of ``old`` that merge into it; None unless the reshape only merges."""
    return split_groups(new, old)


class _Lifted(NamedTuple):
    """A value the kernel computes in the shape a merge reshape took it from."""

    name: str  # the node that holds it in the unmerged shape
    groups: list[list[int]]  # per dim of the merged shape, its dims in the unmerged one
    reshape: str  # the merge reshape, for errors


class _Pusher:
    def __init__(self, kernel: ir.Kernel):
        self.nodes: dict[str, ir.Node] = {n.name: n for n in kernel.inputs}
        self.order: list[ir.Node] = []
        self.clones: dict[tuple[str, tuple[int, ...]], str] = {}
        self.lifted: dict[str, _Lifted] = {}  # merged values by name (never computed in the merged shape)
        self.reshape = ""  # the reshape being pushed, for errors

    def add(self, node: ir.Node) -> str:
        self.nodes[node.name] = node
        self.order.append(node)
        return node.name

    def fresh(self, name: str) -> str:
        k = 0
        while f"{name}.r{k}" in self.nodes:
            k += 1
        return f"{name}.r{k}"

    def reshaped(self, name: str, shape: tuple[int, ...], as_name: str | None = None) -> str:
        """The name of a node that holds ``name`` reshaped to ``shape``."""
        node = self.nodes[name]
        if node.type.shape == shape and as_name is None:
            return name
        key = (name, shape)
        if key in self.clones and as_name is None:
            return self.clones[key]
        groups = split_groups(node.type.shape, shape)
        if groups is None:
            raise UnfoldableReshape(self.reshape, f"{node.type.shape} -> {shape} merges dims")
        out = self._clone(node, shape, groups, as_name or self.fresh(name))
        if as_name is None:
            self.clones[key] = out
        return out

    def _clone(self, node: ir.Node, shape: tuple[int, ...], groups: list[list[int]], name: str) -> str:
        t = ir.TensorType(shape, node.type.dtype)
        if isinstance(node, ir.Input):
            return self.add(ir.View(name, t, node.name, (("reshape", shape),)))
        if isinstance(node, ir.View):
            chain = (*node.chain, ("reshape", shape))
            if not folds_contiguous(chain, self.nodes[node.operand].type.shape):
                raise UnfoldableReshape(self.reshape, f"{node.name}, layout ops of {node.operand}, can't be split "
                                                      f"to {shape} in its loads")
            return self.add(ir.View(name, t, node.operand, chain))
        if isinstance(node, ir.Elementwise):
            operands = tuple(self.reshaped(o, shape) if isinstance(o, str) else o for o in node.operands)
            return self.add(ir.Elementwise(name, t, node.op, operands))
        if isinstance(node, ir.Cast):
            return self.add(ir.Cast(name, t, self.reshaped(node.operand, shape)))
        if isinstance(node, ir.Broadcast):
            return self._broadcast(node, shape, groups, name)
        if isinstance(node, ir.Reduce):
            return self._reduce(node, shape, groups, name)
        if isinstance(node, (ir.Pad, ir.Slice, ir.Cat)):
            return self._resize(node, shape, groups, name)
        raise UnfoldableReshape(self.reshape, f"no rule for {type(node).__name__}")

    def _broadcast(self, node: ir.Broadcast, shape, groups, name) -> str:
        operand = self.nodes[node.operand]
        op_shape, dims = [], []
        for i, d in enumerate(node.broadcast_dims):
            if operand.type.shape[i] == node.type.shape[d]:
                op_shape += [shape[k] for k in groups[d]]
                dims += groups[d]
            else:  # a dim of size 1, expanded: it stays one dim of size 1, at the group's first dim
                op_shape.append(1)
                dims.append(groups[d][0])
        source = self.reshaped(node.operand, tuple(op_shape))
        return self.add(ir.Broadcast(name, ir.TensorType(shape, node.type.dtype), source, tuple(dims)))

    def _reduce(self, node: ir.Reduce, shape, groups, name) -> str:
        operand = self.nodes[node.operand]
        op_shape, dims, kept = [], [], iter(groups)
        for i, size in enumerate(operand.type.shape):
            if i in node.dims:
                dims.append(len(op_shape))
                op_shape.append(size)
            else:
                op_shape += [shape[k] for k in next(kept)]
        source = self.reshaped(node.operand, tuple(op_shape))
        return self.add(ir.Reduce(name, ir.TensorType(shape, node.type.dtype), source, tuple(dims)))

    def _resize(self, node, shape, groups, name) -> str:
        return self.add(self._fine_resize(node, shape, groups, name, lambda n: self.nodes[n].type.shape,
                                          self.reshaped))

    def _fine_resize(self, node, fine: tuple[int, ...], groups, name: str, shape_of, operand_in) -> ir.Node:
        """A pad, slice or cat computed in a finer shape: ``groups[d]``, the dims of ``fine`` its dim ``d`` is
        made of; ``fine``, a fine shape of its result along the dims it does not resize; ``shape_of``, an
        operand's own shape; ``operand_in(name, shape)``, the operand in a fine shape."""
        resized = [d for d in range(node.type.rank) if _resizes(node, shape_of, d)]
        target = {d: _outer_dim(node, groups, fine, d, shape_of, self.reshape) for d in resized}

        def in_fine(coarse: tuple[int, ...]) -> tuple[int, ...]:
            sizes = list(fine)
            for d, (k, inner) in target.items():
                sizes[k] = coarse[d] // inner
            return tuple(sizes)

        def per_fine_dim(values, default):
            out = [default] * len(fine)
            for d, (k, inner) in target.items():
                out[k] = tuple(v // inner for v in values[d]) if isinstance(values[d], tuple) else values[d] // inner
            return tuple(out)

        t = ir.TensorType(in_fine(node.type.shape), node.type.dtype)
        if isinstance(node, ir.Cat):
            pieces = tuple(operand_in(p, in_fine(shape_of(p))) for p in node.operands)
            return ir.Cat(name, t, pieces, target[node.dim][0])
        source = operand_in(node.operand, in_fine(shape_of(node.operand)))
        if isinstance(node, ir.Pad):
            return ir.Pad(name, t, source, node.value, per_fine_dim(node.widths, (0, 0)))
        end = in_fine(node.end) if target else fine
        return ir.Slice(name, t, source, per_fine_dim(node.start, 0), end)

    # ----------------------------------------------------------------------------------------
    # Merges, lifted to the outputs
    # ----------------------------------------------------------------------------------------

    def merge(self, node: ir.Reshape) -> None:
        """A reshape that merges dims of ``node.operand`` (itself computed, or lifted)."""
        source = self.lifted.get(node.operand)
        unmerged_name = source.name if source else node.operand
        unmerged = self.nodes[unmerged_name].type.shape
        groups = merge_groups(unmerged, node.type.shape)
        if groups is None:
            raise UnfoldableReshape(node.name, f"{unmerged} -> {node.type.shape} neither splits nor merges dims")
        self.lifted[node.name] = _Lifted(unmerged_name, groups, source.reshape if source else node.name)

    def lift(self, node: ir.Node) -> None:
        """``node``, an operand of which is lifted, computed in the unmerged shape (under its own name:
        the merged one is never computed) and lifted too."""
        first = next(self.lifted[o] for o in node.operand_names() if o in self.lifted)
        self.reshape = first.reshape
        if isinstance(node, ir.Reshape):
            return self.merge(node)
        shape, groups = self.nodes[first.name].type.shape, first.groups
        t = ir.TensorType(shape, node.type.dtype)
        if isinstance(node, ir.Cast):
            lifted = ir.Cast(node.name, t, self._unmerged(node.operand, shape))
        elif isinstance(node, ir.Elementwise):
            operands = tuple(self._unmerged(o, shape) if isinstance(o, str) else o for o in node.operands)
            lifted = ir.Elementwise(node.name, t, node.op, operands)
        elif isinstance(node, ir.Broadcast):
            lifted, groups = self._lift_broadcast(node, first)
        elif isinstance(node, (ir.Pad, ir.Slice, ir.Cat)):
            lifted, groups = self._lift_resize(node, first)
        else:
            raise UnfoldableReshape(self.reshape, f"no rule for {type(node).__name__} of a merged value")
        self.add(lifted)
        self.lifted[node.name] = _Lifted(node.name, groups, first.reshape)

    def _unmerged(self, name: str, shape: tuple[int, ...]) -> str:
        """``name`` in the unmerged ``shape``: its lifted node, or the value split to that shape."""
        lifted = self.lifted.get(name)
        if lifted is None:
            return self.reshaped(name, shape)
        if self.nodes[lifted.name].type.shape != shape:
            raise UnfoldableReshape(self.reshape, f"{name} is merged from {self.nodes[lifted.name].type.shape}, "
                                                  f"not from {shape}")
        return lifted.name

    def _lift_broadcast(self, node: ir.Broadcast, source: _Lifted) -> tuple[ir.Node, list[list[int]]]:
        operand = self.nodes[source.name].type.shape
        by_dim = dict(zip(node.broadcast_dims, range(len(node.broadcast_dims))))
        shape, groups, dims = [], [], [0] * len(operand)
        for d, size in enumerate(node.type.shape):
            i = by_dim.get(d)
            if i is None or len(source.groups[i]) == 1:  # a new dim, or one the merge left alone
                if i is not None:
                    dims[source.groups[i][0]] = len(shape)
                groups.append([len(shape)])
                shape.append(size)
                continue
            if self._shape(node.operand)[i] != size:
                raise UnfoldableReshape(self.reshape, f"a broadcast expands merged dim {i}")
            groups.append([])
            for k in source.groups[i]:
                dims[k] = len(shape)
                groups[-1].append(len(shape))
                shape.append(operand[k])
        t = ir.TensorType(tuple(shape), node.type.dtype)
        return ir.Broadcast(node.name, t, source.name, tuple(dims)), groups

    def _lift_resize(self, node, first: _Lifted) -> tuple[ir.Node, list[list[int]]]:
        fine = self.nodes[first.name].type.shape
        return self._fine_resize(node, fine, first.groups, node.name, self._shape, self._unmerged), first.groups

    def _shape(self, name: str) -> tuple[int, ...]:
        """The merged shape of ``name``, lifted or not."""
        lifted = self.lifted.get(name)
        if lifted is None:
            return self.nodes[name].type.shape
        unmerged = self.nodes[lifted.name].type.shape
        return tuple(math.prod(unmerged[k] for k in group) for group in lifted.groups)


def _resizes(node: ir.Node, shape_of, d: int) -> bool:
    if isinstance(node, ir.Cat):
        return d == node.dim
    if isinstance(node, ir.Pad):
        return node.widths[d] != (0, 0)
    return node.start[d] != 0 or node.end[d] != shape_of(node.operand)[d]


def push_reshapes(kernel: ir.Kernel) -> ir.Kernel:
    """The kernel without :class:`~thunder_padvec.ir.Reshape` nodes; :class:`UnfoldableReshape` names
    the first that can't be pushed to the loads."""
    if not any(isinstance(n, ir.Reshape) for n in kernel.nodes):
        return kernel
    pusher = _Pusher(kernel)
    for node in kernel.nodes:
        if any(o in pusher.lifted for o in node.operand_names()):
            pusher.lift(node)
        elif isinstance(node, ir.Reshape):
            pusher.reshape = node.name
            if split_groups(pusher.nodes[node.operand].type.shape, node.type.shape) is not None:
                pusher.reshaped(node.operand, node.type.shape, as_name=node.name)
            else:
                pusher.merge(node)
        else:
            pusher.add(node)
    outputs = tuple(pusher.lifted[o].name if o in pusher.lifted else o for o in kernel.outputs)
    return _without_dead(ir.Kernel(kernel.inputs, tuple(pusher.order), outputs))


def _without_dead(kernel: ir.Kernel) -> ir.Kernel:
    live = set(kernel.outputs)
    for node in reversed(kernel.nodes):
        if node.name in live:
            live.update(node.operand_names())
    return ir.Kernel(kernel.inputs, tuple(n for n in kernel.nodes if n.name in live), kernel.outputs)


