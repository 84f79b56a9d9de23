"""The ``padvec`` Thunder fusion executor: checkers, the fusion pass, and ``fuse``.

It claims the prims of :mod:`thunder_padvec.ops`, groups claimed symbols into regions with
Thunder's partitioner, and replaces each region by one fused bound symbol, ``padvec<N>``, whose
callable (:class:`~thunder_padvec.fusion.PadvecFusion`) launches one generated kernel.
"""

from __future__ import annotations

import collections
import logging
import time
import warnings

from thunder.core import prims, utils
from thunder.core.proxies import Proxy, TensorProxy, Variable, unvariableify, variableify
from thunder.core.rematerialization import rematerialize
from thunder.core.symbol import BoundSymbol
from thunder.core.trace import TraceCtx, TraceProvenance, from_trace, tracectx
from thunder.core.transform_common import dce
from thunder.executors.data_dependent_partition import Node, fuse_bound_symbols
from thunder.executors.passes import update_fusion_call_ctx
from thunder.executors.utils import Region
from thunder.extend import FUEL_LEVEL, FusionExecutor, register_executor

from . import __version__, ir, knobs, ops
from .errors import InconsistentTrace, InternalError
from .explain import fusions
from .fusion import TORCH_DTYPES, PadvecFusion, WithPrologue, strides_for_order
from .lower import lower
from .reshapes import UnfoldableReshape, merge_groups, split_groups
from .schedule import TUNING
from .vectorize.plan import whole_lines
from .vectorize.views import contiguous_strides, fold

log = logging.getLogger("thunder_padvec")


class PadvecExecutor(FusionExecutor):
    """Claims the prims of :mod:`thunder_padvec.ops`. With ``required_ops`` (prim ids), only the regions
    that hold one of them become fusions; the other regions' symbols are left to the executors after it,
    as Thunder's ``torchcompile_cat`` leaves regions without a cat."""

    def __init__(self, name: str = "padvec", required_ops: frozenset | None = None):
        super().__init__(name, version=__version__)
        for prim_id, (check, _) in ops.OPS.items():
            self.register_supported(prim_id, check)
        for narrow in ops.NARROW:
            self.register_supported(narrow, ops.narrow_checker, execution_transform=ops.narrow_as_slice)
        self.required_ops = required_ops
        self._fuel: int | FUEL_LEVEL = FUEL_LEVEL.UNLIMITED

    # Optimization fuel, as Thunder's nvFuser executor has it: bisect a wrong fusion by
    # allowing only the first N.
    def get_fuel(self, amount: int = 1, /) -> bool:
        if self._fuel is FUEL_LEVEL.UNLIMITED:
            return True
        if self._fuel < amount:
            return False
        self._fuel -= amount
        return True

    def set_fuel(self, value: int | FUEL_LEVEL) -> None:
        if isinstance(value, int) and value < 0:
            raise ValueError(f"fuel must be non-negative: {value}")
        self._fuel = value

    def flatten(self, bsym: BoundSymbol) -> list[BoundSymbol]:
        """The claimed prims a (possibly torch-level) bound symbol is made of."""
        if self.can_execute(bsym):
            return [bsym]
        utils.check(bsym.subsymbols, lambda: f"padvec cannot flatten {bsym.sym.name}", AssertionError)
        return [prim for sub in bsym.subsymbols for prim in self.flatten(sub)]

    def fuse(self, region, fusion_counter: int, raise_unfoldable: bool = False) -> BoundSymbol:
        """Accepts Thunder's ``Region`` or any object with ``inputs``, ``outputs`` and ``bound_symbols``.

        A region with a reshape that can't be computed in its new shape raises
        :class:`~thunder_padvec.reshapes.UnfoldableReshape` where ``raise_unfoldable`` (the fusion
        pass then leaves that reshape to PyTorch), and otherwise runs in PyTorch as a whole. A region
        with symbols a kernel can't take (another executor's fusion pass, rematerializing, can move them
        in) runs those in PyTorch before its kernel (``_prologue``)."""
        inputs: list[Proxy] = [unvariableify(x) for x in region.inputs]
        outputs: list[Proxy] = [unvariableify(x) for x in region.outputs]
        name = f"{self.name}{fusion_counter}"
        head = self._prologue(list(region.bound_symbols))
        if head:
            return self._fuse_after_prologue(name, inputs, outputs, list(region.bound_symbols), head)
        flat = [prim for bsym in region.bound_symbols for prim in self.flatten(bsym)]
        flat = _dce(inputs, outputs, flat)
        try:
            kernel, views = lower(inputs, outputs, flat)
            fusion = PadvecFusion(kernel, name, lambda: _pytorch_callable(inputs, outputs, flat), views,
                                  _shapes(outputs, views))
        except UnfoldableReshape as err:
            if raise_unfoldable:
                raise
            log.debug("%s runs in PyTorch: %s", name, err)
            return self._in_pytorch(name, inputs, outputs, flat)
        except InconsistentTrace as err:  # its symbols as they are, as Thunder's own executors would run them
            log.debug("%s runs in PyTorch: %s", name, err)
            return self._in_pytorch(name, inputs, outputs, list(region.bound_symbols))
        except Exception as err:  # a fault of padvec's own: the region runs in PyTorch, as its checkers had declined
            internal = InternalError.wrapping("lowering the region", err)
            if knobs.strict():
                raise internal
            warnings.warn(f"{name} runs in PyTorch: {internal}", RuntimeWarning, stacklevel=2)
            return self._in_pytorch(name, inputs, outputs, flat)
        _remembered_orders(fusion)
        return self.register_temporary_operation(name, fusion, inputs=inputs, outputs=outputs, bsyms=flat)

    def _in_pytorch(self, name: str, inputs: list[Proxy], outputs: list[Proxy], bsyms: list[BoundSymbol]):
        return self.register_temporary_operation(name, _pytorch_callable(inputs, outputs, bsyms), inputs=inputs,
                                                 outputs=outputs, bsyms=bsyms)

    def _prologue(self, bsyms: list[BoundSymbol]) -> set[int]:
        """Positions of the bound symbols a kernel can't take, with the region's own producers of their
        operands: symbols padvec does not claim, and layout ops (a permute, a strided slice, a reshape that
        neither only splits nor only merges dims) of values the region computes. Padvec's own fusion pass
        never builds such a region; another executor's can, where Thunder's rematerialization moves a
        producer fusion's ops into it."""
        producer, computed, head = {}, set(), set()
        for k, bsym in enumerate(bsyms):
            try:
                if _folds_computed(self.flatten(bsym), computed):
                    head.add(k)
            except AssertionError:  # not padvec's
                head.add(k)
            producer.update((p.name, k) for p in bsym.flat_proxy_outs)
        if not head:
            return head
        pending = list(head)
        while pending:  # what the prologue reads from the region it computes itself
            for p in bsyms[pending.pop()].flat_proxy_args:
                k = producer.get(p.name)
                if k is not None and k not in head:
                    head.add(k)
                    pending.append(k)
        return head

    def _fuse_after_prologue(self, name: str, inputs: list[Proxy], outputs: list[Proxy], bsyms: list[BoundSymbol],
                             head: set[int]) -> BoundSymbol:
        """The region's fusion where its ``head`` (positions in ``bsyms``, see ``_prologue``) runs in PyTorch
        first: a :class:`~thunder_padvec.fusion.WithPrologue` whose kernel takes the rest, or all of it
        in PyTorch where the rest makes no kernel."""
        prologue = [b for k, b in enumerate(bsyms) if k in head]
        rest = [b for k, b in enumerate(bsyms) if k not in head]
        made = {p.name: p for b in prologue for p in b.flat_proxy_outs if isinstance(p, TensorProxy)}
        read = {p.name for b in rest for p in b.flat_proxy_args} | {p.name for p in outputs}
        head_outputs = [p for n, p in made.items() if n in read]
        head_inputs = [p for p in inputs if any(p.name == a.name for b in prologue for a in b.flat_proxy_args)]
        passed = {p.name for p in inputs}  # outputs that are inputs come straight from the arguments
        kernel_outputs = [p for p in outputs if p.name not in made and p.name not in passed]
        kernel_inputs = [*inputs, *head_outputs]
        try:
            flat = _dce(kernel_inputs, kernel_outputs, [prim for b in rest for prim in self.flatten(b)])
            if not kernel_outputs or not flat:
                raise ValueError("nothing left for a kernel")
            kernel, views = lower(kernel_inputs, kernel_outputs, flat)
            fusion = PadvecFusion(kernel, name, lambda: _pytorch_callable(kernel_inputs, kernel_outputs, flat),
                                  views, _shapes(kernel_outputs, views))
        except Exception as err:  # the region runs in PyTorch instead, as a whole
            log.debug("%s runs in PyTorch: %s", name, err)
            return self._in_pytorch(name, inputs, outputs, bsyms)
        _remembered_orders(fusion)
        position = {p.name: ("arg", k) for k, p in enumerate(inputs)}
        position.update((p.name, ("prologue", k)) for k, p in enumerate(head_outputs))
        position.update((p.name, ("fusion", k)) for k, p in enumerate(kernel_outputs))
        composed = WithPrologue(_pytorch_callable(head_inputs, head_outputs, prologue),
                                tuple(position[p.name][1] for p in head_inputs), fusion,
                                tuple(position[p.name] for p in kernel_inputs),
                                tuple(position[p.name] for p in outputs), tuple(b.sym.name for b in prologue))
        log.debug("%s: %d symbols run in PyTorch before its kernel: %s", name, len(prologue),
                  ", ".join(b.sym.name for b in prologue))
        return self.register_temporary_operation(name, composed, inputs=inputs, outputs=outputs, bsyms=bsyms)

    def _fusible(self, bsyms: list[BoundSymbol], region: Region) -> bool:
        if len(bsyms) == 1 and not self.can_fuse(bsyms[0]):
            return False
        # Shape ops alone are views in PyTorch: a kernel would only copy.
        if all(prims.OpTags.SHAPE_OP in (p.sym.tags or ()) for b in bsyms for p in self.flatten(b)):
            return False
        if not all(isinstance(unvariableify(x), TensorProxy) for x in (*region.inputs, *region.outputs)):
            return False
        if self.required_ops is not None and not any(
                p.sym.id in self.required_ops for b in bsyms for p in self.flatten(b)):
            return False
        return self.get_fuel()

    def _unfoldable(self, trace: TraceCtx) -> set[int]:
        """Ids of the bound symbols with a permute, a strided slice, or a reshape that neither only splits
        nor only merges dims, of a value padvec would compute: a kernel folds those ops only into the
        loads of its inputs, so they stay in PyTorch. (A value split is computed in its new shape, a
        value merged in its old one, see :mod:`.reshapes`.)"""
        computed: set[str] = set()
        return {id(bsym) for bsym in trace.bound_symbols
                if self.can_fuse(bsym) and _folds_computed(self.flatten(bsym), computed)}

    def _fused(self, trace: TraceCtx, blocked: set[int], producers, consumers,
               raise_unfoldable: bool = True) -> list[BoundSymbol]:
        """The trace's bound symbols with each region of claimed ones replaced by its fusion."""

        def claimable(node: Node) -> bool:
            if any(id(b) in blocked for b in node.group_bsyms):
                return False
            return len(node.group_bsyms) > 1 or self.can_fuse(node.group_bsyms[0])

        fused_bsyms, counter = [], 0
        for bsyms in fuse_bound_symbols(trace, lambda a, b: claimable(a) and claimable(b)):
            region = Region(producers, consumers, bsyms)
            if not self._fusible(bsyms, region):
                fused_bsyms.extend(bsyms)
                continue
            fused_bsyms.append(self.fuse(region, counter, raise_unfoldable))
            counter += 1
        return fused_bsyms

    def fusion_pass(self, trace: TraceCtx) -> TraceCtx:
        start = time.perf_counter_ns()
        fused_trace = from_trace(trace)
        producers, consumers = utils.producers_and_consumers(trace)

        blocked = self._unfoldable(trace)
        while True:  # a reshape that can't be computed in its new shape is left to PyTorch, and regions built again
            try:
                fused_bsyms = self._fused(trace, blocked, producers, consumers)
                break
            except UnfoldableReshape as err:
                culprit = next((b for b in trace.bound_symbols if id(b) not in blocked and self.can_fuse(b) and any(
                    p.name == err.name for prim in self.flatten(b) for p in prim.flat_proxy_outs)), None)
                log.debug("padvec leaves a reshape to PyTorch: %s", err)
                if culprit is None:
                    fused_bsyms = self._fused(trace, blocked, producers, consumers, raise_unfoldable=False)
                    break
                blocked.add(id(culprit))
        fused_trace.bound_symbols = fused_bsyms
        fused_trace = update_fusion_call_ctx(dce(rematerialize(fused_trace)))
        _order_outputs_for_permutes(fused_trace)
        elapsed_ms = (time.perf_counter_ns() - start) // 1_000_000
        fused_trace.set_provenance(TraceProvenance(f"{self.name} fusion (took {elapsed_ms} milliseconds)"))
        return fused_trace


# The order each fusion output is allocated in (see ``_order_outputs_for_permutes``), by the output's name
# and shape: where a later executor's fusion pass fuses a padvec region again (Thunder's
# ``update_fusion_call_ctx`` calls ``fuse`` for every fusion of the trace), the new fusion allocates those
# outputs as the first did. Names repeat between traces; an order is a layout, never a value, so a
# stale one costs speed at most, and each padvec pass sets its own fusions' orders again.
_OUTPUT_ORDERS: collections.OrderedDict = collections.OrderedDict()
_OUTPUT_ORDERS_KEPT = 4096


def _output_keys(fusion: PadvecFusion) -> list[tuple[str, tuple[int, ...]]]:
    return [(name, fusion.kernel.node(name).type.shape) for name in fusion.kernel.outputs]


def _remembered_orders(fusion: PadvecFusion) -> None:
    orders = tuple(_OUTPUT_ORDERS.get(key) for key in _output_keys(fusion))
    if any(orders):
        fusion.set_output_orders(orders)


def _order_outputs_for_permutes(trace: TraceCtx) -> None:
    """An output whose one consumer permutes it (keeping its innermost dim) is allocated in the
    permuted order: the permute's result is then contiguous, and a reshape after it is a view
    rather than a copy (the gradient of a qkv tensor, assembled from q, k and v). In a region that
    transposes, other outputs take the order PyTorch gives them (``_eager_orders``), else that of the views
    they are read from (``_source_orders``), where their rows are whole cache lines."""
    _, consumers = utils.producers_and_consumers(trace)
    for fusion, bsym in fusions(trace, prologues=False):  # (a prologue's bound symbol has other outputs)
        view_positions = {position for position, _, _ in fusion.views}
        kernel_outputs = [p for k, p in enumerate(bsym.flat_proxy_outs) if k not in view_positions]
        orders = tuple(_permuted_order(proxy, consumers.get(proxy, [])) for proxy in kernel_outputs)
        types = [fusion.kernel.node(name).type for name in fusion.kernel.outputs]
        transposes = (TUNING.eager_orders or TUNING.source_orders) and _transposes(bsym)
        if transposes and TUNING.eager_orders and any(_whole_lines(t.shape, t.dtype.itemsize) for t in types):
            # where no permute decides: the order PyTorch lays the output out in (the region runs on meta
            # tensors only where some output could take it)
            eager = _eager_orders(fusion, view_positions, len(orders))
            orders = tuple(order or eager_order for order, eager_order in zip(orders, eager))
        if transposes and TUNING.source_orders:
            orders = tuple(order or source for order, source in zip(orders, _source_orders(fusion.kernel)))
        if any(orders) or any(fusion.output_orders):
            fusion.set_output_orders(orders)
        for key, order in zip(_output_keys(fusion), orders):
            _OUTPUT_ORDERS.pop(key, None)
            if order is not None:
                _OUTPUT_ORDERS[key] = order
        while len(_OUTPUT_ORDERS) > _OUTPUT_ORDERS_KEPT:
            _OUTPUT_ORDERS.popitem(last=False)
        if any(orders):
            log.debug("%s: outputs allocated in the order of their permutes, PyTorch's or their sources': %s",
                      bsym.sym.name, orders)


def _transposes(bsym: BoundSymbol) -> bool:
    """Whether a region transposes anything: without, PyTorch lays every output out row-major (pointwise ops,
    cat, pad and slices of row-major tensors), and the region need not run to say so."""
    return any(sub.sym.id == prims.PrimIDs.TRANSPOSE or _transposes(sub) for sub in bsym.subsymbols)


def _eager_orders(fusion: PadvecFusion, view_positions: set[int], count: int) -> tuple[tuple[int, ...] | None, ...]:
    """The memory order of each kernel output as PyTorch lays it out from row-major inputs (the region run
    by Thunder's PyTorch executor on meta tensors): an output computed pointwise from a permuted view (the
    q and k of a qkv tensor, heads inner to tokens) comes out in the view's order, and allocated so, the
    kernel writes it in the order it reads the input, and returns the strides PyTorch would. None where
    that order is row-major, not a dense permutation keeping the innermost dim innermost, not one of whole
    cache lines a row (``_whole_lines``), or not known (the region does not run on meta tensors)."""
    import torch

    unknown = (None,) * count
    if fusion._fallback is None:
        return unknown
    try:
        run = fusion._fallback()
        args = [torch.empty(node.type.shape, dtype=TORCH_DTYPES[node.type.dtype], device="meta")
                for node in fusion.kernel.inputs]
        outputs = list(run(*args))
    except Exception as err:  # an op without a meta kernel: row-major, as before
        log.debug("%s: PyTorch's output order not known: %s", fusion.name, err)
        return unknown
    written = [o for k, o in enumerate(outputs) if k not in view_positions]
    if len(written) != count:
        return unknown
    return tuple(_dense_order(t) if _whole_lines(t.shape, t.element_size()) else None for t in written)


def _whole_lines(shape, itemsize: int) -> bool:
    """Whether rows (the innermost dim) of a tensor of ``shape`` fill whole cache lines
    (``TUNING.eager_order_bytes``): rows in PyTorch's order lie apart, and a row that ends inside a line shares
    that line with a row another block writes (on an H100, Phi-3-mini's q and k, rows of 192 bytes, were
    written 4% slower so)."""
    return whole_lines(shape, itemsize, TUNING.eager_order_bytes)


def _source_orders(kernel: ir.Kernel) -> tuple[tuple[int, ...] | None, ...]:
    """Per kernel output: the memory order of the loads it is computed from, where every load of its rank
    that reaches it through pointwise ops, casts, pads, slices and cats (ops that keep each dim in place) is
    a view of an input in one order that keeps the innermost dim innermost and is not row-major, and the
    output's rows are whole cache lines (``_whole_lines``); else None. Allocated so, the output is written in
    the order its source is read, one stream each (the grouped-query form's q, k and v: eager's reshape
    copies them row-major, a plane per head, while qkv holds them heads inner to tokens). A load of another
    rank (cos and sin, broadcast) has no say; a row-major input of the output's rank keeps it row-major."""
    orders = []
    for name in kernel.outputs:
        out = kernel.node(name).type
        try:
            found = _load_orders(kernel, name, out.rank) if _whole_lines(out.shape, out.dtype.itemsize) else {None}
        except Exception as err:  # an order is a layout: row-major, as before, rather than no fusion
            log.debug("%s: the order of its source not known: %s", name, err)
            found = {None}
        orders.append(found.pop() if len(found) == 1 else None)
    return tuple(orders)


def _load_orders(kernel: ir.Kernel, name: str, rank: int) -> set:
    """The memory orders (``_view_order``) of the loads of rank ``rank`` that ``name`` is computed from
    through rank-keeping ops; None stands for a row-major load or one of no single order."""
    found, seen, stack = set(), set(), [name]
    while stack:
        node = kernel.node(stack.pop())
        if node.name in seen or node.type.rank != rank:
            continue
        seen.add(node.name)
        if isinstance(node, ir.Input):
            found.add(None)
        elif isinstance(node, ir.View):
            found.add(_view_order(node, kernel.node(node.operand).type.shape))
        elif isinstance(node, (ir.Elementwise, ir.Cast, ir.Pad, ir.Slice, ir.Cat)):
            stack.extend(node.operand_names())
    return found


def _view_order(view: ir.View, shape: tuple[int, ...]) -> tuple[int, ...] | None:
    """The order of ``view``'s dims in the memory of its row-major input of ``shape``, outermost first, by
    the stride of each dim's innermost component that moves (size-1 dims keep their places); None where it
    is row-major, moves the innermost dim, or is not one order (a dim that only repeats, or two dims of
    equal strides)."""
    layout = fold(view.chain, shape, contiguous_strides(shape))
    if layout is None:
        return None
    sized = [d for d, size in enumerate(view.type.shape) if size > 1]
    keys = {}
    for d in sized:
        moving = [stride for _, stride in layout.dims[d] if stride]
        if not moving:
            return None
        keys[d] = moving[-1]
    if len(set(keys.values())) != len(keys):
        return None
    order = _by_stride(keys, view.type.rank)
    return order if _keeps_rows(order) else None


def _by_stride(strides: dict[int, int], rank: int) -> tuple[int, ...]:
    """The dims of a tensor of ``rank`` dims in memory order: those in ``strides`` (dim: stride; the dims of
    more than one element) by stride, the largest first; the others (size 1, their strides say nothing) in
    their places."""
    by_stride = iter(sorted(strides, key=lambda d: (-strides[d], d)))
    return tuple(next(by_stride) if d in strides else d for d in range(rank))


def _keeps_rows(order: tuple[int, ...]) -> bool:
    """Whether ``order`` is a permutation other than row-major that keeps the innermost dim innermost: one
    an output can be allocated in with its rows still contiguous."""
    return bool(order) and order[-1] == len(order) - 1 and order != tuple(range(len(order)))


def _dense_order(t) -> tuple[int, ...] | None:
    """``order`` with ``t.permute(order)`` contiguous, where ``t`` is dense and that order keeps its innermost
    dim innermost and is not row-major; else None. Dims of size 1 keep their places (their strides say
    nothing); the others take theirs by stride, the largest first."""
    order = _by_stride({d: t.stride(d) for d in range(t.ndim) if t.shape[d] > 1}, t.ndim)
    dense = strides_for_order(tuple(t.shape), order)
    if any(t.shape[d] > 1 and t.stride(d) != dense[d] for d in range(t.ndim)):  # gaps or repeats
        return None
    return order if _keeps_rows(order) else None


def _permuted_order(proxy: TensorProxy, users: list[BoundSymbol]) -> tuple[int, ...] | None:
    """The permutation of the one consumer of ``proxy``, if that consumer permutes it and keeps its
    innermost dim innermost."""
    permutation = _permutation(users[0]) if len(users) == 1 else None
    return permutation if permutation and len(permutation) == proxy.ndim and _keeps_rows(permutation) else None


def _permutation(bsym: BoundSymbol) -> tuple[int, ...] | None:
    """The permutation of a transpose prim, or of a torch-level permute made of one."""
    if bsym.sym.id == prims.PrimIDs.TRANSPOSE:
        return tuple(bsym.args[1])
    if len(bsym.subsymbols) == 1:
        return _permutation(bsym.subsymbols[0])
    return None


def _folds_computed(flat: list[BoundSymbol], computed: set[str]) -> bool:
    """Whether prims ``flat`` permute, slice with steps, or reshape other than by only splitting or only
    merging dims, a value in ``computed`` (a kernel folds those ops only into its inputs' loads); adds
    what they compute to ``computed`` (layout ops of inputs compute nothing: they fold into the loads)."""
    folds = False
    for prim in flat:
        from_computed = any(p.name in computed for p in prim.flat_proxy_args)
        if prim.sym.id not in ops.LAYOUT_PRIMS or from_computed:
            computed.update(p.name for p in prim.flat_proxy_outs)
        folded = prim.sym.id in ops.FOLDED_PRIMS or ops.strided(prim)
        folds |= folded and from_computed and not _splits_or_merges(prim)
    return folds


def _splits_or_merges(prim: BoundSymbol) -> bool:
    """Whether a prim is a reshape that only splits dims, or only merges them (see :mod:`.reshapes`)."""
    if prim.sym.id not in ops.RESHAPE_PRIMS:
        return False
    old, new = tuple(int(s) for s in prim.args[0].shape), tuple(int(s) for s in prim.output.shape)
    return split_groups(old, new) is not None or merge_groups(old, new) is not None


def _shapes(outputs: list[Proxy], views: tuple) -> tuple[tuple[int, ...], ...]:
    """The shapes of a region's outputs that its kernel writes (those not made as views of inputs)."""
    skipped = {position for position, _, _ in views}
    return tuple(tuple(int(s) for s in p.shape) for k, p in enumerate(outputs) if k not in skipped)


def _dce(inputs: list[Proxy], outputs: list[Proxy], bsyms: list[BoundSymbol]) -> list[BoundSymbol]:
    """Drops prims the outputs don't need, and the inputs only they read."""
    trace = TraceCtx(None)
    trace.bound_symbols = [*bsyms, prims.python_return.bind(outputs, output=None)]
    needed: set[Variable] = set()
    trace = dce(trace, needed)
    inputs[:] = [x for x in inputs if variableify(x) in needed]
    return [b for b in trace.bound_symbols if b.sym.id != prims.PrimIDs.RETURN]


def _pytorch_callable(inputs: list[Proxy], outputs: list[Proxy], bsyms: list[BoundSymbol]):
    """The region as a Python function run by Thunder's PyTorch executor."""
    from thunder.core.codeutils import SigInfo
    from thunder.executors.passes import transform_for_execution
    from thunder.executors.torchex import ex as pytorch_ex

    region = TraceCtx(None)
    region.args, region.kwargs = list(inputs), {}
    region.names = {p.name for p in inputs}
    with tracectx(region):
        for p in inputs:
            prims.unpack_trivial(p, name=p.name)
    region.bound_symbols += [*bsyms, prims.python_return.bind(outputs, output=None)]
    for bsym in bsyms:
        for out in bsym.flat_proxy_outs:
            if out.name not in region.names:
                region.add_name(out.name)
    region._siginfo = SigInfo("padvec_fallback")
    region._siginfo.args = [(p.name, None) for p in inputs]
    return transform_for_execution(region, executors_list=(pytorch_ex,)).python_callable(include_decorators=False)


padvec = PadvecExecutor()
register_executor(padvec)

# Only the regions with a cat or a pad: RoPE's forward (a cat) and its backward (pads, from the slices),
# with the pointwise ops around them. Pointwise-only regions (a norm's scaling, an MLP's gating) stay with
# the executors after it, which can fuse them with the reductions and matmuls beside them.
padvec_cat = PadvecExecutor("padvec_cat", required_ops=frozenset({prims.PrimIDs.CAT, prims.PrimIDs.PAD}))
register_executor(padvec_cat)
