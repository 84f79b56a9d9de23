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
    kernel_outputs = tuple(lowering.env[p.name] for p in outputs if p.name not in lowering.chains)
    return ir.Kernel(tuple(kernel_inputs), tuple(lowering.nodes), kernel_outputs)


def view_outputs(inputs: Sequence[TensorProxy], outputs: Sequence[TensorProxy], bsyms: Sequence) -> tuple:
    """The region's outputs that are layout ops of its inputs: ``(output position, input position,
    chain)``. PyTorch makes them, as views where it can, as eager does: a kernel would only copy."""
    lowering = ops.Lowering()
    for proxy in inputs:
        lowering.chains[proxy.name] = (proxy.name, ())
    for bsym in bsyms:
        if bsym.sym.id in ops.LAYOUT_PRIMS:
            lowering.extend_chain(bsym.args[0], bsym.output, ops.layout_op(bsym))
    position = {p.name: i for i, p in enumerate(inputs)}
    return tuple((k, position[lowering.chains[p.name][0]], lowering.chains[p.name][1])
                 for k, p in enumerate(outputs) if p.name in lowering.chains)
