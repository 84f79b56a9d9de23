"""Lowering: a region's flattened prims -> one :class:`~thunder_padvec.ir.Kernel`."""

from __future__ import annotations

from collections.abc import Sequence

from thunder.core.proxies import TensorProxy

import torch

from . import ir, ops
from .fusion import apply_chain
from .reshapes import push_reshapes


def lower(inputs: Sequence[TensorProxy], outputs: Sequence[TensorProxy], bsyms: Sequence) -> tuple[ir.Kernel, tuple]:
    """Translates claimed prims, in trace order, into IR nodes named after their proxies.

    Returns the kernel and the region's outputs that are views of its inputs, ``(output position,
    input position, chain)``: PyTorch makes those, as eager does, where the chain makes a view of a
    contiguous input; a chain that makes PyTorch copy (a reshape of an expanded dim) stays the
    kernel's, which reads the input anyway. An output that is a merge of another (one node of the
    kernel) is a view of it, ``(output position, ("output", kernel output index), chain)``. Reshapes of
    values the kernel computes are pushed down to its loads or up to its outputs (:mod:`.reshapes`), or
    raise :class:`~thunder_padvec.reshapes.UnfoldableReshape`."""
    lowering = ops.Lowering()
    kernel_inputs = []
    for index, proxy in enumerate(inputs):
        kernel_inputs.append(ir.Input(proxy.name, lowering.tensor_type(proxy), index))
        lowering.env[proxy.name] = proxy.name
        lowering.chains[proxy.name] = (proxy.name, ())
        lowering.input_shapes[proxy.name] = kernel_inputs[-1].type.shape
    for bsym in bsyms:
        _, translate = ops.OPS[bsym.sym.id]
        node = translate(bsym, lowering)
        if isinstance(node, ir.Node):
            lowering.add(node)
            lowering.env[node.name] = node.name
    position = {p.name: i for i, p in enumerate(inputs)}
    views = []
    for k, p in enumerate(outputs):
        if p.name in lowering.chains:
            source, chain = lowering.chains[p.name]
            shape = tuple(int(s) for s in inputs[position[source]].shape)
            if not chain or apply_chain(torch.empty(shape, device="meta"), chain)._is_view():
                views.append((k, position[source], chain))
    skipped = {outputs[k].name for k, _, _ in views}
    written = [k for k, p in enumerate(outputs) if p.name not in skipped]
    kernel = push_reshapes(ir.Kernel(tuple(kernel_inputs), tuple(lowering.nodes),
                                     tuple(lowering.env[outputs[k].name] for k in written)))
    # a value and its merge are one node (see reshapes): the kernel writes it once, the other is a view of it
    first: dict[str, int] = {}
    for k, name in zip(written, kernel.outputs):
        if name in first:
            views.append((k, ("output", first[name]), (("reshape", tuple(int(s) for s in outputs[k].shape)),)))
        else:
            first[name] = len(first)
    kernel = ir.Kernel(kernel.inputs, kernel.nodes, tuple(first))
    return kernel, tuple(sorted(views, key=lambda view: view[0]))
