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
    kernel's, which reads the input anyway. Reshapes of values the kernel computes are pushed down
    to its loads (:mod:`.reshapes`), or raise :class:`~thunder_padvec.reshapes.UnfoldableReshape`."""
    lowering = ops.Lowering()
    kernel_inputs = []
    for index, proxy in enumerate(inputs):
        kernel_inputs.append(ir.Input(proxy.name, lowering.tensor_type(proxy), index))
        lowering.env[proxy.name] = proxy.name
        lowering.chains[proxy.name] = (proxy.name, ())
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
    kernel_outputs = tuple(lowering.env[p.name] for p in outputs if p.name not in skipped)
    kernel = ir.Kernel(tuple(kernel_inputs), tuple(lowering.nodes), kernel_outputs)
    return push_reshapes(kernel), tuple(views)
