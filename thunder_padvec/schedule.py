"""Launch parameters: how the threads of one launch cover the segments of a vector plan.

Each thread owns one group of ``lanes`` consecutive reference elements of its segment. The
segments share one 1-D grid: segment ``s`` takes blocks ``[first_block, first_block + blocks)``.
In row mode a block stages ``tile_rows`` rows; otherwise a thread owns one group.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .vectorize import VectorPlan
from .vectorize.plan import MIN_THREADS, STAGED_WARPS, WARP

INDEX32_LIMIT = 1 << 30  # leaves room for the offsets pads and slices add to in-bounds indices
REGISTER_SLACK = 8  # registers per thread a kernel may give up, at most, for one more block per SM
# ... more where the kernel asks the L2 for its lines first (LaunchParams.prefetch): the prefetches' addresses
# stay live until the loads (the grouped-query qkv backward of Llama-3-8B: 90 registers, 86 without)
PREFETCH_SLACK = 4
REGISTER_UNIT = 256  # registers are allocated to a warp in units of this many
RELOAD_BLOCK = 128  # block of a launch whose every segment reloads (``vectorize.plan.lane_steps``); see schedule()


@dataclass
class Tuning:
    """Knobs of the kernels' shape, for experiments: changes apply to specializations built afterwards."""

    block: int = 256
    max_row_bytes: int = 512  # a thread owns whole rows up to this size (see vectorize.plan)
    min_threads: int = MIN_THREADS  # threads share rows' broadcast loads while a launch keeps this many
    min_blocks: int = 0  # blocks per SM the compiler keeps registers for (__launch_bounds__), 0: its choice
    warp_tiles: bool = True  # staged rows that no warp splits: each warp stages its own (else the block's tile)
    register_rows: bool = True  # staged rows whose chunks read only their own columns: held in registers
    load_hints: bool = False  # inputs read once are loaded streaming (ld.global.cs), broadcast ones cached
    store_hints: bool = False  # outputs are stored streaming (st.global.cs)
    keep_hints: bool = True  # inputs are loaded with an L2 evict_last policy (see codegen.render._load_op)
    plane_order: bool = False  # tiled rows along a row dim: consecutive blocks take the same rows of each plane
    fit_registers: bool = True  # a kernel a few registers over one more block per SM is built again to fit
    interleave: bool = True  # a launch holding pieces of cut rows interleaves its segments' blocks (render._interleave)
    tune_hints: bool = True  # the first call on a GPU times keep_hints on and off and keeps the faster (runtime.tune)
    word_pairs: bool = True  # 16-bit lanes widened and stored two at a time as 32-bit words (codegen.render)
    one_row_fit: bool = True  # threads of a kernel of few blocks per SM take one row where that fits more (fusion)
    wave_fit: bool = True  # a launch whose last wave is mostly idle takes twice the threads a row (fusion)
    team_scale: int = 1  # threads sharing a row, this many times the planned count (vectorize.wider_teams)
    reload_variant: bool = True  # the first call also times the plan whose lanes reload, a chunk a lane (fusion)
    tokens_first_variant: bool = True  # ... and rows that lie apart along the tokens taken token by token (tune)
    tokens_first: bool = False  # that variant as the default (LaunchParams.tokens_first)
    prefetch_variant: bool = False  # ... and the default's and tokens first's with the L2 prefetches (tune.prefetched)
    prefetch: bool = False  # that variant as the default (LaunchParams.prefetch)
    eager_orders: bool = True  # outputs allocated in the memory order PyTorch gives them (executor._eager_orders)
    eager_order_bytes: int = 128  # ... only where their rows are whole multiples of this many bytes (cache lines)
    source_orders: bool = True  # else an output of a region that transposes in the memory order of the views it is
    # read from (executor._source_orders: the grouped-query form's q, k and v, heads inner to tokens, as in qkv)


TUNING = Tuning()


@dataclass(frozen=True)
class SegmentLaunch:
    first_block: int
    blocks: int
    groups: int  # lane groups, one per thread


@dataclass(frozen=True)
class LaunchParams:
    block: int
    grid: int
    segments: tuple[SegmentLaunch, ...]
    index_bits: int  # 32 or 64
    smem_bytes: int = 0  # static shared memory of a block
    min_blocks: int = 0  # blocks per SM that __launch_bounds__ asks registers for; 0: the compiler's choice
    warp_tiles: bool = True  # see Tuning
    load_hints: bool = False  # see Tuning
    store_hints: bool = False  # see Tuning
    keep_hints: bool = True  # see Tuning
    plane_order: bool = False  # see Tuning
    interleave: bool = False  # see Tuning
    word_pairs: bool = True  # see Tuning; off where the words cost a block per SM (fusion._without_word_pairs)
    keep_once: bool = True  # with keep_hints: inputs read once kept too (codegen.render._load_op); else only reused
    tokens_first: bool = False  # rows that lie apart along the tokens taken a token of every head in turn (render)
    prefetch: bool = False  # a tiled segment's hoisted loads: each line asked of the L2 before any is loaded (render)

    @property
    def register_slack(self) -> int:
        """Registers per thread a build of this launch may give up, at most, for one more block per SM."""
        return REGISTER_SLACK + (PREFETCH_SLACK if self.prefetch else 0)

    def __str__(self) -> str:
        parts = ", ".join(f"seg{i}: blocks {s.first_block}+{s.blocks}" for i, s in enumerate(self.segments))
        smem = f", {self.smem_bytes} B shared" if self.smem_bytes else ""
        bounds = f", registers for {self.min_blocks} blocks per SM" if self.min_blocks else ""
        order = ", segments interleaved" if self.interleave else ""
        order += ", tokens first" if self.tokens_first else ""
        order += ", L2 prefetches" if self.prefetch else ""
        pairs = "" if self.word_pairs else ", 16-bit lanes one at a time"
        return (f"grid {self.grid} x block {self.block}, int{self.index_bits} indices{smem}{bounds}{order}{pairs}"
                f" ({parts})")


def fit_blocks(registers: int, block: int, blocks_per_sm: int, registers_per_sm: int = 65536,
               threads_per_sm: int = 2048, slack: int | None = None) -> int:
    """Blocks per SM worth asking ``__launch_bounds__`` for: one more than a kernel of ``registers``
    registers per thread gets (``blocks_per_sm``), where that needs at most ``slack`` fewer registers
    (``REGISTER_SLACK`` where not given; a launch's own: ``LaunchParams.register_slack``); 0 otherwise.
    (On the H200, the grouped-query qkv backward at 86 registers, 2 blocks of 256 per SM, fitted to 80 and
    3 blocks: 6% faster.)"""
    want = blocks_per_sm + 1
    if blocks_per_sm < 1 or want * block > threads_per_sm:
        return 0
    warps = want * -(-block // 32)
    budget = registers_per_sm // warps // REGISTER_UNIT * REGISTER_UNIT // 32
    return want if 0 < registers - budget <= (REGISTER_SLACK if slack is None else slack) else 0


def _span(shape: tuple[int, ...], strides: tuple[int, ...]) -> int:
    """One past the largest element offset a tensor of this shape and strides reaches."""
    if 0 in shape:
        return 0
    return 1 + sum((size - 1) * abs(stride) for size, stride in zip(shape, strides))


def index_bits(plan: VectorPlan) -> int:
    kernel = plan.kernel
    sizes = [math.prod(s.segment.shape) for s in plan.segments]
    sizes += [kernel.node(o).type.numel for o in kernel.outputs]
    sizes += [_span(i.type.shape, layout.strides) for i, layout in zip(kernel.inputs, plan.layouts)]
    return 64 if max(sizes, default=0) >= INDEX32_LIMIT else 32


def interleaves(plan: VectorPlan) -> bool:
    """Whether the launch interleaves its segments' blocks: where some are pieces of cut rows
    (``vectorize.segments``). One after the other, the first piece's blocks read part of every row's
    lines and the second's come back for the rest after the L2 has let them go: on the H200, phi-2's
    qkv forward at batch 2 read 59.0 MB from DRAM for 46.4 (29.7 µs interleaved against 37.2, ncu and
    explore in ``benchmarks/results/2026-12-03-interleave/``). Segments that are not pieces (the q, k and
    v pieces of a qkv gradient) gain nothing: Llama-3's qkv backward 170.6 / 171.3 µs."""
    return TUNING.interleave and len(plan.segments) > 1 and any(s.segment.row_piece for s in plan.segments)


def schedule(plan: VectorPlan, block: int | None = None) -> LaunchParams:
    """The launch of ``plan``: blocks of ``block`` threads (``TUNING.block``), of the staged warps where
    rows are staged, of ``RELOAD_BLOCK`` where every segment's lanes reload (one chunk of one row a lane,
    rows across blocks: on the H200 Phi-3-mini's RoPE forward, b1 17.6 / 17.5 µs in blocks of 128 against
    17.8 / 17.9 in 256 and 19.7 in 64, b2 30.8 / 30.7 against 31.4 / 31.4 and 34.7; torch.compile 17.7
    and 29.8, ``benchmarks/results/2026-12-04-reload-block/explore-reload-block.log``)."""
    block = block or TUNING.block
    smem = max((seg.smem_bytes for seg in plan.segments), default=0)
    if plan.segments and all(seg.reloads for seg in plan.segments):
        block = RELOAD_BLOCK
    elif any(seg.whole_rows for seg in plan.segments):
        block = WARP * STAGED_WARPS
    segments, first = [], 0
    for seg in plan.segments:
        groups = seg.groups
        if seg.reloads:  # lanes laid end to end over the grid, rows across blocks
            blocks = -(-groups * seg.team // block)
        else:
            blocks = -(-groups // (seg.tile_rows if seg.whole_rows else block))
        segments.append(SegmentLaunch(first, blocks, groups))
        first += blocks
    return LaunchParams(block, first, tuple(segments), index_bits(plan), smem, TUNING.min_blocks, TUNING.warp_tiles,
                        TUNING.load_hints, TUNING.store_hints, TUNING.keep_hints,
                        TUNING.plane_order, interleaves(plan), TUNING.word_pairs, tokens_first=TUNING.tokens_first,
                        prefetch=TUNING.prefetch)
