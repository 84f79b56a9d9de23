"""GPU timing: CUDA events around each repeat, the L2 flushed between repeats, the median kept.

The flush writes ``L2_FLUSH_BYTES``. Writes alone do not evict lines that a kernel loaded with an
evict_last cache policy (torch.compile's Triton kernels load broadcast inputs and re-read halves that
way): those stay in the L2 from one repeat to the next, and into the next executor timed on the same
tensors. So the flush first returns them to normal priority (``cuCtxResetPersistingL2Cache``); the GPU
is idle then (each repeat ends in a synchronize), and the write evicts them.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

import torch

L2_FLUSH_BYTES = 256 << 20  # several times the L2 of current GPUs


def median_ms(fn: Callable[[], object], repeats: int = 50, warmup: int = 5,
              flush: bool | Callable[[], object] = True) -> float:
    """Median milliseconds of ``fn()`` on the current stream. ``flush``: before each repeat, flush the
    L2 (True, see :func:`l2_flush`), nothing (False), or call the given flush."""
    if flush is True:
        flush = l2_flush()
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        if flush:
            flush()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def l2_flush(nbytes: int = L2_FLUSH_BYTES, device: torch.device | str = "cuda") -> Callable[[], object]:
    """The flush: lines kept by evict_last policies made normal, then ``nbytes`` written."""
    from .runtime.launch import reset_persisting_l2

    buffer = torch.empty(nbytes, dtype=torch.uint8, device=device)
    device = buffer.device.index

    def flush():
        reset_persisting_l2(device)
        buffer.zero_()

    return flush


def graph_median_ms(fn: Callable[[], object], repeats: int = 50, warmup: int = 3) -> float:
    """Median milliseconds of one replay of a CUDA graph of ``fn()``, the L2 flushed before each:
    the device time of its kernels without the host's per-call overhead."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return median_ms(graph.replay, repeats=repeats, warmup=1)


def copy_roofline_ms(nbytes: int, **kwargs) -> float:
    """A device-to-device copy that reads and writes ``nbytes`` in all (``nbytes / 2`` each way)."""
    return copies_ms((nbytes,), **kwargs)


def copies_ms(parts: tuple[int, ...], **kwargs) -> float:
    """Device-to-device copies one after another, the ``k``-th reading and writing ``parts[k]`` bytes in
    all: the roofline of work that takes one kernel per part (a forward, then its backward)."""
    pairs = []
    for nbytes in parts:
        src = torch.empty(max(nbytes // 2, 1), dtype=torch.uint8, device="cuda")
        pairs.append((src, torch.empty_like(src)))
    return median_ms(lambda: [dst.copy_(src) for src, dst in pairs], **kwargs)


def gbps(nbytes: int, ms: float) -> float:
    return nbytes / (ms * 1e-3) / 1e9
