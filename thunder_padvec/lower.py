"""Lowering: a region's flattened prims -> one :class:`~thunder_padvec.ir.Kernel`."""

from __future__ import annotations

from collections.abc import Sequence

from thunder.core.proxies import TensorProxy

from . import ir, ops


def lower(inputs: Sequence[TensorProxy], outputs: Sequence[TensorProxy], bsyms: Sequence) -> ir.Kernel:
    """Translates claimed prims, in trace order, into IR nodes named after their proxies."""
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
    kernel_outputs = tuple(lowering.env[p.name] for p in outputs)
    return ir.Kernel(tuple(kernel_inputs), tuple(lowering.nodes), kernel_outputs)
