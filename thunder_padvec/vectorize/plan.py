"""The layout-dependent half of the analysis: lanes per thread, vector widths, staging.

Lanes. By default a thread owns one 16-byte vector of the reference (``lanes`` elements, which
may span short rows), and pads and cats select lane by lane at run time. Where the program
resizes the innermost dim (a RoPE's halves and pieces) and a row is at most ``max_row_bytes``,
a thread owns a whole row instead, walked in chunks of one 16-byte vector: every coordinate
along the row is then a compile-time constant, so the selects fold away and each chunk runs only
its own piece's arithmetic.

Tiles. One thread per row would make each warp access memory at a stride of one row. The points
along a row at which the code changes (a pad's or a cat piece's edge, a box's bound) cut it into
slabs. Where they fall on chunk boundaries, ``threads_per_row`` consecutive threads share a row
instead, in *steps*: at each step the threads take consecutive chunks of one slab, thread ``t``
the step's first chunk plus ``t`` (threads past the slab's end sit the step out). All threads of
a step run the same code, so the coordinates it branches on are compile-time constants, and a
quarter warp reads and writes up to 128 contiguous bytes of a row straight from global memory
(LitGPT's RoPE with its halves at 48, 64 or 128 features). The widest sharing that keeps at least
``MIN_THREAD_USE`` of the threads busy wins; where it still leaves some idle (Phi-3's halves of 6
chunks: 8 threads, 6 busy), the greatest common divisor of the slabs' chunk counts takes the row
instead (6 threads, all busy; a block's threads past its last whole team sit out), as long as the
launch keeps ``MIN_THREADS`` threads. Rows it does not suit (the seed's RoPE with 4-wide halves) are
staged.

Rows per thread. In tiled mode a thread also takes ``rows_per_thread`` rows that differ only along
``row_dim``, a dim that an input is broadcast along (a RoPE's heads, for cos and sin): the loads of
that input serve all of the thread's rows. Only as many as keep at least ``MIN_THREADS`` threads
(a team counted as the power of two it stands in for, ``team_slots``),
and only where they cut a row's share of the loads held in registers (``hoisted_bytes``) to at most
``ROW_SHARING`` of a single row's (``ROW_PIECE_SHARING`` for a piece of a row): LitGPT's RoPE (cos and
sin are 4 of a row's 6 vectors) takes 4 heads per thread, the qkv form (q and k: 8 vectors a row, 5 with
4 heads) 4 as well, phi-2's rotated piece (x, cos and sin at 4 columns: 4 vectors a row with 2 heads,
against 6) 2, in the qkv form too (75%); rows whose shared loads save less (phi-2's whole row: 12
vectors for 2 rows against 8 for one; the grouped-query backward's key rows) take one, as the registers
of several rows cost more warps than the shared loads save. Where the compiled kernel then keeps few
blocks per SM, the fusion plans it again with one row per thread (``max_rows``) and keeps that build
where it holds at least twice the blocks (``fusion._with_one_row``: LitGPT's backward kernels).
Where a thread's steps go side by side (below) and its rows lie far apart in every tensor it reads and
writes, each a stream of its own (the RoPE form's heads), it takes ``APART_ROWS`` at most (``rows_apart``).

Steps side by side. Where a tiled row's steps are all whole (the threads of the team busy at each)
and every load of a step is some step's own chunk of the input (a RoPE: x at the lane's column and
at the other half's, cos and sin at the lane's column), ``lane_steps`` teams of lanes take the steps
side by side instead of one team taking them in turn: lane ``t`` of the ``k``-th team runs step ``k``
alone, loads its own chunk of each input once and takes the other steps' chunks from the lanes
that loaded them (``__shfl_sync`` within a warp). The x of a row is still read once, but a thread
holds a chunk per input where it held one per step and input: LitGPT's full-rotary forward in 44
registers instead of 73, 5 blocks of 256 per SM instead of 3. Where the teams do not fit a warp evenly
(Phi-3-mini's halves of 6 chunks), the lanes load the other steps' chunks again instead (``reloads``,
see ``lane_steps``): one row a thread, the lanes laid end to end over the grid, as Inductor lays out
its pointwise kernels (28 registers against 80).

Staging. In staged row mode a block's tile of rows moves between global and shared memory at once, consecutive
threads on consecutive 16-byte vectors (coalesced): inputs whose rows are evenly spaced in
memory are copied in before the arithmetic, outputs copied out after it, and every read of a
staged input, shifted along the row or not, comes from shared memory; the input is read from
global memory once. A block is 8 warps: ``column_groups`` of them split each row's chunks (a
warp's threads all take the same chunks, so each warp runs one specialization of the row's
code), the rest take further slabs of 32 rows.

Register rows. Where every read of a staged row by a chunk's code stays inside that chunk's own
columns (the seed's RoPE in 16-bit types: its halves of 4 lie inside the first 8-lane chunk), shared
memory is not needed: a row's chunks go to consecutive threads (``column_groups`` is then the
chunks of a row, one per thread), each thread loads its own chunk into registers and stores its
output chunk, so that a warp's loads and stores are single coalesced instructions, as in a copy,
with no barriers; only the code between them branches on the chunk. A warp runs the branches one
after another, so this is chosen only where at most one chunk computes (the others only move
values): the seed's backward adds in every chunk, and its rows stay in shared memory. A thread
takes ``repeats`` rows a block apart, their loads issued together.

Widths. A site's width is the largest power of two that divides its contiguous inner run, is at
most 16 bytes and at most a chunk, and for inputs read from global memory divides the pointer's
alignment and every stride outside the run (in elements).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from .. import ir
from ..errors import UnsupportedError
from .projection import Frontier, Projection, Segment, Site, inner_run, lane_capacity, pow2_factor
from .views import contiguous_strides, fold

MAX_VECTOR_BYTES = 16
MAX_ROW_BYTES = 512
WARP = 32
SMEM_BYTES_PER_BLOCK = 48 * 1024  # the static shared memory every CUDA device gives a block
STAGED_WARPS = 8  # warps of a block in row mode
CHUNKS_PER_THREAD = 4  # a row's chunks per thread, at most, before warps split the row
MAX_STEPS = 8  # a row's chunks per thread, at most, when threads share rows
MIN_THREAD_USE = 0.6  # of the threads' chunk slots, when threads share rows
EXACT_THREADS = True  # threads sharing a row: a count that keeps every slot busy, where a power of two leaves some idle
MIN_EXACT_THREADS = 4  # ... of at least this many (fewer take more chunks each: see share_rows)
MIN_TILED_CHUNK_BYTES = 8  # narrower chunks, down to this, whose edges meet a row's breakpoints ...
NARROW_MAX_THREADS = 1 << 20  # ... in launches of at most this many threads
MAX_ROWS_PER_THREAD = 4
APART_ROWS = 2  # ... and this many where its steps go side by side and its rows are a stream each (tiled_rows)
APART_BYTES = 4096  # ... that is, where its rows lie at least this far apart in every tensor it reads or writes by row
LANE_STEPS = True  # tiled steps taken side by side by lanes that exchange (or reload) their chunks (see lane_steps)
LANE_STEPS_MAX_SITES = 1.2  # ... where their one code holds at most this many times the sites of a step's own
LANE_RELOADS = True  # ... and where their teams do not fit a warp evenly, each lane loading the others' chunks again
ALL_RELOADS = False  # ... and where they do too, in every plan: a chunk of a row a lane (experiments; see lane_steps)
PLAIN_VECTORS = 1  # 16-byte vectors a thread takes in a segment without rows, where they divide its rows (experiments)
ROW_SHARING = 0.7  # several rows per thread only where that cuts a row's loads to this fraction, at most
ROW_PIECE_SHARING = 0.8  # ... and for a piece of rows (Segment.row_piece: partial rotary's rotated features)
MIN_THREADS = 1 << 18  # a launch keeps at least this many threads (two waves of a large GPU)
REGISTER_REPEATS = 2  # register rows: rows a thread takes, while the launch keeps MIN_THREADS threads


@dataclass(frozen=True)
class Layout:
    """What the analysis needs to know of a runtime tensor: strides (in elements) and pointer alignment (bytes)."""

    strides: tuple[int, ...]
    alignment: int
    components: tuple | None = None  # a view's dims as mixed-radix components (see .views)
    offset: int = 0  # a view's first element, from its input's data pointer

    def parts(self, shape: tuple[int, ...]) -> tuple:
        """Each dim's ``(extent, stride)`` components, outermost first: a view's own, else one per dim."""
        return self.components or tuple(((e, s),) for e, s in zip(shape, self.strides))


LINE_BYTES = 128  # a cache line


def whole_lines(shape, itemsize: int, line: int = LINE_BYTES) -> bool:
    """Whether rows (the innermost dim) of a tensor of ``shape`` fill whole lines of ``line`` bytes."""
    return len(shape) > 0 and line > 0 and shape[-1] > 0 and shape[-1] * itemsize % line == 0


def shared_by_rows(offset: int, parts: tuple, rows: int) -> bool:
    """Whether a dim that a thread's ``rows`` rows step along, read at ``offset``, addresses one element
    for all of them: its innermost component is broadcast (stride 0) over a multiple of ``rows`` (the
    heads of a query group sharing their key), so the rows share the load."""
    return offset == 0 and bool(parts) and parts[-1][1] == 0 and parts[-1][0] % rows == 0


@dataclass(frozen=True)
class Staging:
    """A tensor whose rows a warp copies between global and shared memory, 32 rows a tile."""

    tensor: str
    index: int  # kernel input or output index
    output: bool
    itemsize: int
    col_lo: int  # first staged column of each row
    cols: int  # staged columns per row
    row_stride: int  # elements between consecutive rows in global memory
    base: int  # element offset of reference row 0, column ``col_lo``
    width: int  # elements per global vector access
    smem_offset: int  # bytes into the warp's shared memory
    pitch: int  # bytes between rows in shared memory (padded against bank conflicts)


@dataclass(frozen=True)
class SegmentPlan:
    segment: Segment
    lanes: int  # consecutive reference elements a thread owns
    chunk: int  # lanes handled together; every width divides it
    widths: tuple[int, ...]  # per site: the load width of inputs, the projected width of other nodes
    store_widths: tuple[int, ...]  # per store
    staged: tuple[Staging, ...] = ()
    column_groups: int = 1  # warps that split a row (staged row mode)
    threads_per_row: int = 1  # consecutive threads that share a row, chunk by chunk (tiled row mode)
    steps: tuple[tuple[int, int], ...] = ()  # tiled: (first chunk, chunks) of each step of the threads
    row_dim: int | None = None  # tiled: the dim along which a thread takes several rows
    rows_per_thread: int = 1
    in_registers: bool = False  # staged rows held in registers, a chunk per thread (see Register rows)
    repeats: int = 1  # register rows: rows a thread takes, a block's width apart, their loads in flight together
    lane_steps: int = 1  # tiled: teams of lanes side by side, each taking one step of the row (see lane_steps)
    reloads: bool = False  # lane steps: a lane loads the other steps' chunks again instead of exchanging them

    @property
    def team(self) -> int:
        """Tiled: the consecutive threads that take a row (``threads_per_row`` a step, all steps)."""
        return self.threads_per_row * self.lane_steps

    @property
    def whole_rows(self) -> bool:
        return bool(self.segment.shape) and self.lanes == self.segment.shape[-1]

    @property
    def mapping(self) -> str:
        """How threads cover the segment, in words."""
        shape = "x".join(map(str, self.segment.shape))
        if self.tiled:
            steps = (f"{len(self.steps)} steps side by side (chunks loaded by each lane)" if self.reloads
                     else f"{len(self.steps)} steps side by side (chunks exchanged in the warp)" if self.lane_steps > 1
                     else f"{len(self.steps)} steps")
            return (f"[{shape}] rows shared by {self.team} threads, {self.chunk}-lane chunks, "
                    f"{steps}" + (f", {self.rows_per_thread} rows per thread along dim {self.row_dim}"
                                                  if self.rows_per_thread > 1 else ""))
        if self.in_registers:
            return (f"[{shape}] a row per {self.column_groups} threads, a {self.chunk}-lane chunk each, "
                    f"staged in registers, {self.repeats} row(s) per thread")
        if self.whole_rows:
            return (f"[{shape}] a row per thread in {self.chunk}-lane chunks, staged in shared memory, "
                    f"{self.column_groups} column group(s)")
        return f"[{shape}] {self.lanes} lanes per thread"

    @property
    def busy_threads(self) -> int:
        """Tiled: the threads of a row that take part in its busiest step (the others return at once)."""
        return max(n for _, n in self.steps)

    @property
    def tiled(self) -> bool:
        return self.whole_rows and self.threads_per_row > 1

    @property
    def groups(self) -> int:
        """Threads (or, tiled, thread teams) the segment needs."""
        return math.prod(self.segment.shape) // self.lanes // self.rows_per_thread

    @property
    def tile_rows(self) -> int:
        """Rows a block covers (row mode)."""
        return WARP * STAGED_WARPS // (self.column_groups * self.team) * self.repeats

    @property
    def in_shared_memory(self) -> bool:
        """Staged rows that go through shared memory (copied in and out around barriers)."""
        return bool(self.staged) and not self.in_registers

    @property
    def smem_bytes(self) -> int:
        return sum(self.tile_rows * s.pitch for s in self.staged) if self.in_shared_memory else 0

    def columns(self, group: int) -> range:
        """The lanes whose chunks column group ``group`` computes."""
        per_group = -(-self.lanes // self.chunk // self.column_groups) * self.chunk
        return range(group * per_group, min((group + 1) * per_group, self.lanes), self.chunk)

    def staging(self, tensor: str, output: bool = False) -> Staging | None:
        return next((s for s in self.staged if s.tensor == tensor and s.output == output), None)


@dataclass(frozen=True)
class VectorPlan:
    projection: Projection
    layouts: tuple[Layout, ...]  # per kernel input
    output_alignments: tuple[int, ...]
    segments: tuple[SegmentPlan, ...]
    views: tuple[tuple[str, Layout], ...] = ()  # the layout of each view node
    output_strides: tuple[tuple[int, ...], ...] | None = None  # per output; None: all contiguous

    def output_layout(self, index: int) -> Layout:
        """An output's strides (contiguous unless allocated in a consumer's order) and alignment."""
        node = self.kernel.node(self.kernel.outputs[index])
        strides = self.output_strides[index] if self.output_strides else contiguous_strides(node.type.shape)
        return Layout(tuple(strides), self.output_alignments[index])

    def output_contiguous(self, index: int) -> bool:
        node = self.kernel.node(self.kernel.outputs[index])
        return self.output_layout(index).strides == contiguous_strides(node.type.shape)

    def layout_of(self, node: ir.Node) -> Layout:
        if isinstance(node, ir.View):
            return dict(self.views)[node.name]
        return self.layouts[node.index]

    @property
    def kernel(self) -> ir.Kernel:
        return self.projection.kernel


def _largest_pow2_at_most(n: int) -> int:
    return 1 << (max(n, 1).bit_length() - 1)


def width_of(node: ir.Node, frontier: Frontier, chunk: int, layout: Layout | None = None) -> int:
    """The vector width of a site of ``node`` (read from global memory when ``layout`` is given)."""
    shape, itemsize = node.type.shape, node.type.dtype.itemsize
    strides = layout.strides if layout is not None else None
    run, spanned = inner_run(frontier, shape, strides)
    width = min(_largest_pow2_at_most(run), MAX_VECTOR_BYTES // itemsize, chunk)
    if layout is not None:
        width = min(width, max(layout.alignment // itemsize, 1))
        for d, (size, stride) in enumerate(zip(shape, layout.strides)):
            if d not in spanned and size > 1:
                width = min(width, pow2_factor(stride))
        for d, components in enumerate(layout.components or ()):
            if len(components) < 2:
                continue
            if d in spanned:  # contiguous only within its innermost component
                width = min(width, math.prod(shape[d + 1:]) * pow2_factor(components[-1][0]))
            else:
                width = min(width, *(pow2_factor(s) for _, s in components))
    return max(width, 1)


def view_layout(node: ir.View, source: ir.Input, layout: Layout) -> Layout:
    """The layout of a view of an input; :class:`UnsupportedError` where the chain can't be folded."""
    folded = fold(node.chain, source.type.shape, layout.strides)
    if folded is None:
        raise UnsupportedError(f"the layout ops of {node.name} can't be folded for strides {layout.strides}")
    alignment = min(layout.alignment, pow2_factor(folded.offset * source.type.dtype.itemsize))
    return Layout(folded.strides(), alignment, folded.dims, folded.offset)


def _resizes_rows(kernel: ir.Kernel, segment: Segment) -> bool:
    """True when some pad, slice or cat of the segment acts on the innermost dim."""
    for site in segment.sites:
        node = kernel.node(site.node)
        last = node.type.rank - 1
        if isinstance(node, ir.Cat) and node.dim == last:
            return True
        if isinstance(node, ir.Pad) and node.widths and node.widths[-1] != (0, 0):
            return True
        if isinstance(node, ir.Slice) and node.type.shape and node.type.shape[-1] != kernel.node(
                node.operand).type.shape[-1]:
            return True
    return False


def row_breakpoints(kernel: ir.Kernel, segment: Segment, dim: int | None = None) -> set[int]:
    """The columns of the reference's rows at which the code of a row changes: the bounds of the
    sites' and stores' boxes, and the edges of pads and cat pieces along the row (along ``dim`` of the
    reference where given, its last dim by default)."""
    along = len(segment.shape) - 1 if dim is None else dim
    points = set()
    for site in segment.sites:
        points.update(site.box[along])
        node = kernel.node(site.node)
        for d, (ref, offset) in enumerate(site.index_map):
            if ref != along:
                continue
            if isinstance(node, ir.Pad) and node.widths[d] != (0, 0):
                lo, hi = node.widths[d]
                points.update((lo - offset, node.type.shape[d] - hi - offset))
            if isinstance(node, ir.Cat) and node.dim == d:
                end = 0
                for piece in node.operands:
                    end += kernel.node(piece).type.shape[d]
                    points.add(end - offset)
    for store in segment.stores:
        points.update(store.box[along])
    return {p for p in points if 0 < p < segment.shape[along]}


def row_steps(kernel: ir.Kernel, segment: Segment, chunk: int, threads: int) -> tuple[tuple[int, int], ...] | None:
    """The steps of ``threads`` threads sharing a row: ``(first chunk, chunks)``, a slab at a time;
    None where a breakpoint falls inside a chunk."""
    row = segment.shape[-1]
    points = sorted(row_breakpoints(kernel, segment) | {0, row})
    if any(p % chunk for p in points):
        return None
    steps = []
    for lo, hi in zip(points, points[1:]):
        first, size = lo // chunk, (hi - lo) // chunk
        steps += [(first + k, min(threads, size - k)) for k in range(0, size, threads)]
    return tuple(steps)


def exact_threads(kernel: ir.Kernel, segment: Segment, chunk: int) -> int:
    """The most threads that split every slab of a row into whole steps: the greatest common divisor
    of the slabs' chunk counts, the steps of a team as wide as the row (6 for Phi-3's rows of 96 in
    8-lane chunks, halves of 48)."""
    slabs = row_steps(kernel, segment, chunk, segment.shape[-1] // chunk)
    return math.gcd(*(chunks for _, chunks in slabs))


def share_rows(kernel: ir.Kernel, segment: Segment, chunk: int, least: int = 4,
               min_threads: int = MIN_THREADS, team_scale: int = 1) -> tuple[int, tuple] | None:
    """``(threads_per_row, steps)``: the most threads, a power of two at least ``least``, that keep
    ``MIN_THREAD_USE`` of their slots busy in at most ``MAX_STEPS`` steps. Where those leave slots
    idle, ``exact_threads`` instead, if they are at least ``MIN_EXACT_THREADS`` and the launch keeps ``min_threads``
    threads with them. On the H200, Phi-3's rows of 96 in 6 threads rather than 8 with 6 busy: its
    qkv form 3-6% faster, forward and fwd+bwd, its RoPE fwd+bwd 1-2%, its RoPE forward -2% to +1%.
    phi-2's rows of 80 in 2 threads rather than 4 with 62.5% busy take 5 chunks a thread: its RoPE
    fwd+bwd at batch 2 was 10% faster, but its qkv forward 9% slower. ``team_scale``: a team of a power
    of two threads taken that many times wider, as far as a warp (``wider_teams``)."""
    sharing = _share_rows(kernel, segment, chunk, least, min_threads)
    return sharing if sharing is None or team_scale == 1 else wider_teams(kernel, segment, chunk, sharing, team_scale)


def wider_teams(kernel: ir.Kernel, segment: Segment, chunk: int, sharing: tuple[int, tuple],
                team_scale: int) -> tuple[int, tuple]:
    """``sharing`` (``(threads_per_row, steps)``) with ``team_scale`` times the threads a row, each taking
    fewer of its chunks: twice the threads for the same rows. Teams of another count than a power of two
    (``exact_threads``), and teams that would outgrow a warp, stay as they are."""
    threads = sharing[0] * team_scale
    if sharing[0] & (sharing[0] - 1) or threads > WARP:
        return sharing
    steps = row_steps(kernel, segment, chunk, threads)
    return (threads, steps) if steps is not None and len(steps) <= MAX_STEPS else sharing


def _share_rows(kernel: ir.Kernel, segment: Segment, chunk: int, least: int,
                min_threads: int) -> tuple[int, tuple] | None:
    threads = WARP
    while threads >= least:
        steps = row_steps(kernel, segment, chunk, threads)
        if steps is None:
            return None
        busy = sum(n for _, n in steps)
        if len(steps) <= MAX_STEPS and busy >= MIN_THREAD_USE * threads * len(steps):
            exact = exact_threads(kernel, segment, chunk)
            if (EXACT_THREADS and busy < threads * len(steps) and max(least, MIN_EXACT_THREADS) <= exact <= WARP
                    and math.prod(segment.shape[:-1]) * exact >= min_threads):
                exact_steps = row_steps(kernel, segment, chunk, exact)
                if len(exact_steps) <= MAX_STEPS:
                    return exact, exact_steps
            return threads, steps
        threads //= 2
    return None


def team_slots(threads: int) -> int:
    """The power of two a team of ``threads`` sharing a row stands in for: a team of 6 does the
    work of a team of 8 with 2 idle, and takes as many rows per thread."""
    return 1 << (threads - 1).bit_length()


def rows_per_thread(kernel: ir.Kernel, seg: SegmentPlan, min_threads: int,
                    layouts: dict[str, Layout], max_rows: int | None = None) -> tuple[int | None, int]:
    """``(row_dim, rows)``: the dim along which a tiled thread takes several rows, and how many (at most
    ``max_rows``, by default ``MAX_ROWS_PER_THREAD``). ``layouts``: the inputs' and views' layouts by name
    (see ``hoisted_bytes``)."""
    max_rows = MAX_ROWS_PER_THREAD if max_rows is None else max_rows
    shape, last = seg.segment.shape, len(seg.segment.shape) - 1
    candidates = []
    for site in seg.segment.sites:
        if isinstance(kernel.node(site.node), ir.LOADS):
            used = {ref for ref, _ in site.index_map}
            candidates += [d for d in range(last) if d not in used and shape[d] > 1]
    if not candidates:
        return None, 1
    dim = max(candidates, key=lambda d: (shape[d], d))
    rows = 1
    while (rows < max_rows and shape[dim] % (2 * rows) == 0 and len(seg.steps) * rows * 2 <= MAX_STEPS
           and seg.groups // (2 * rows) * team_slots(seg.threads_per_row) >= min_threads):
        rows *= 2
    # the rows' registers cost warps: worth it only where the shared loads (cos and sin) are a large
    # part of a row's (on the H200, LitGPT's RoPE: a row's 6 vectors fall to 3 with 4 rows, 3% faster
    # than 1 row; phi-2's rotated piece 6 to 4 with 2 rows: its forward 2-4% faster; the qkv form's 8 to
    # 5, with steps side by side: Gemma 1-3% faster, Llama-2 0-1% slower; the grouped-query backward's
    # key rows with 2 or 4 rows, above 70%: 5% slower; a piece of rows holds fewer registers: phi-2's
    # rotated q and k pieces at 75%, its qkv forward 2% faster)
    sharing = ROW_PIECE_SHARING if seg.segment.row_piece else ROW_SHARING
    if rows > 1 and hoisted_bytes(kernel, seg, dim, rows, layouts) > sharing * rows * hoisted_bytes(
            kernel, seg, dim, 1, layouts):
        rows = 1
    return (dim, rows) if rows > 1 else (None, 1)


def tiled_rows(kernel: ir.Kernel, seg: SegmentPlan, min_threads: int, layouts: dict[str, Layout],
               max_rows: int | None, output_layouts: tuple[Layout, ...], all_reloads: bool = False) -> SegmentPlan:
    """A tiled segment with its rows per thread (``rows_per_thread``) and its steps side by side where
    they may be (``lane_steps``); where the steps go side by side and the thread's rows lie apart
    (``rows_apart``), with ``APART_ROWS`` rows at most, if its steps still go side by side so."""
    row_dim, rows = rows_per_thread(kernel, seg, min_threads, layouts, max_rows)
    planned = lane_steps(kernel, replace(seg, row_dim=row_dim, rows_per_thread=rows), all_reloads)
    if rows <= APART_ROWS or planned.lane_steps == 1 or not rows_apart(kernel, planned, row_dim, layouts,
                                                                         output_layouts):
        return planned
    row_dim, rows = rows_per_thread(kernel, seg, min_threads, layouts, APART_ROWS)
    fewer = lane_steps(kernel, replace(seg, row_dim=row_dim, rows_per_thread=rows), all_reloads)
    return fewer if fewer.lane_steps > 1 and fewer.rows_per_thread > 1 else planned


def rows_apart(kernel: ir.Kernel, seg: SegmentPlan, dim: int, layouts: dict[str, Layout],
               output_layouts: tuple[Layout, ...]) -> bool:
    """Whether a thread's rows along ``dim`` lie at least ``APART_BYTES`` apart in every input whose
    address varies along it and in every output the segment stores: each row a stream of its own.

    LitGPT's RoPE forward, its steps side by side, reads and writes its heads ``T * head_size`` elements
    apart; on the H200, same process (``benchmarks/results/2026-12-05-apart-rows/``, two runs,
    torch.compile in brackets), two rows a thread against four: Llama-2 b2 36.4 / 36.9 and 36.4 / 37.0 µs
    (36.6), Mistral b2 36.3 / 36.7 and 36.5 / 37.0 (36.6), Gemma b2 37.7 / 38.0 (37.9), Mistral b1 20.9 /
    21.1 (21.3); the batch-1 rows of Llama-2, Llama-3 and Gemma within 1.4% either way. The qkv form's
    heads are adjacent in qkv (one row apart) and keep four: two rows there are 1.4-2.1% slower with all
    heads, 4.5-6.1% with grouped queries. The backward kernels, whose steps go in turn (and which the
    one-row rule of ``fusion`` takes from four rows to one), were not timed with two."""
    for site in seg.segment.sites:
        node = kernel.node(site.node)
        if not isinstance(node, ir.LOADS) or not _varies_along(node, site, dim, APART_ROWS, layouts[site.node]):
            continue
        parts = layouts[site.node].parts(node.type.shape)
        if any(ref == dim and abs(parts[d][-1][1]) * node.type.dtype.itemsize < APART_BYTES
               for d, (ref, _) in enumerate(site.index_map)):
            return False
    for store in seg.segment.stores:
        itemsize = kernel.node(store.output).type.dtype.itemsize
        if abs(output_layouts[store.output_index].strides[dim]) * itemsize < APART_BYTES:
            return False
    return True


def step_distance(seg: SegmentPlan, site: Site) -> int | None:
    """Steps side by side: how many teams along (mod the steps) the lanes are whose own chunk holds
    what a load site reads, the same at every step that reads it; 0 where that is the lane's own
    chunk, None where no step reads it, -1 where no lane's own chunk holds it or the steps differ."""
    n, team_columns = len(seg.steps), seg.threads_per_row * seg.chunk
    (ref, offset), (lo, hi) = site.index_map[-1] if site.index_map else ((None, 0), (0, 0)), site.box[-1]
    distances = set()
    for k, (first, _) in enumerate(seg.steps):
        column = first * seg.chunk
        if lo <= column < hi:
            owner, rest = divmod(column + offset, team_columns)
            if ref != len(seg.segment.shape) - 1 or rest or not 0 <= owner < n:
                return -1
            distances.add((owner - k) % n)
    if not distances:
        return None
    return distances.pop() if len(distances) == 1 else -1


def _uniform_sites(kernel: ir.Kernel, seg: SegmentPlan) -> float:
    """The computed sites of every step (what lanes running one code compute) over those of a
    step on average (what a step's own code computes, its other sites folded away)."""
    columns = [first * seg.chunk for first, _ in seg.steps]
    every, own = 0, 0
    for site in seg.segment.sites:
        if isinstance(kernel.node(site.node), (*ir.LOADS, ir.Slice, ir.Broadcast)):
            continue
        lo, hi = site.box[-1]
        steps = sum(lo <= column < hi for column in columns)
        every, own = every + (steps > 0), own + steps
    return every * len(columns) / own if own else 1.0


def lane_steps(kernel: ir.Kernel, seg: SegmentPlan, all_reloads: bool = False) -> SegmentPlan:
    """``seg`` with its tiled row's steps taken side by side by ``len(steps)`` teams where they may be, else
    as it is (one team, in turn). Side by side where the steps are whole and consecutive (step ``k`` is
    chunks ``k * t`` to ``(k + 1) * t`` of ``t`` threads), the teams together fit a warp evenly, and every
    load is one chunk-wide vector held by the lanes the same number of teams along at every step that reads
    it (``step_distance``): the lanes then run one code, with the step's first column a run-time value. And
    where the blocks hold whole teams of rows only (every lane of a warp takes part in the exchanges), a
    thread takes several rows (the registers it saves are those rows' loads), and that one code holds at
    most ``LANE_STEPS_MAX_SITES`` times the computed sites of a step's own (the forward's selects of the
    cat's halves: 1.1; the backward's pads of both halves, computed by every lane: 1.3).

    On the H200, same process, one team in turn / side by side (``benchmarks/results/2026-12-03-lane-steps/``,
    ``explore-lane-steps-fwd.log``; torch.compile in brackets): LitGPT's RoPE forward, Llama-2 b2 37.3 /
    36.7 µs (36.6), Llama-3 b1 38.7 / 38.0 (38.0), b2 72.0 / 70.4 (70.0), Mistral b2 37.2 / 36.7 (36.6), the
    batch-1 rows of Llama-2, Mistral and Gemma within 0.5%; the grouped-query qkv forward, Llama-3 b1 86.7
    / 82.6 (89.4), b2 165.9 / 158.8 (172.5), Mistral b1 43.8 / 42.4 (48.6), b2 84.0 / 80.1 (89.9). With one
    row a thread: phi-2's RoPE forward b2 16.0 / 16.8, Llama-2's qkv forward b2 70.0 / 71.3. Backward
    kernels (``explore-lane-steps-bwd.log``, fwd+bwd): Llama-2 b1 RoPE 41.2 / 44.6, Llama-3 b2 141.7 / 149.8.

    Where the teams do not fit a warp evenly (Phi-3-mini's rows of 96, halves of 6 chunks: 12 lanes a
    row), the lanes load the other steps' chunks again instead of exchanging them (``reloads``; from the
    L1, where the lanes that own them have just loaded them), one row a thread: each lane takes one chunk
    of one row, as Inductor's kernels do, and the dispatcher lays the lanes end to end over the grid
    (``codegen.render``), rows across blocks. On the H200 (``benchmarks/results/2026-12-04-reloads/``,
    same process, torch.compile in brackets): Phi-3-mini's RoPE forward b1 17.5 µs against 18.1 for one
    team of 6 taking both halves of 4 heads in turn (17.4), b2 30.9 against 30.9 (29.4); its fwd+bwd b1
    33.4 against 34.0 (33.8), b2 58.3 against 59.1 (59.2); its qkv forward b1 32.4 against 31.9 (33.0), b2
    56.2 against 56.9 (69.0). A hand-written kernel of the same layout and rounding steps
    (``tools/flat_probe.py``) took 17.2 and 29.4 µs.

    ``all_reloads`` (or ``ALL_RELOADS``): the lanes reload where the teams fit a warp too, one chunk of one
    row each. The first call times that plan beside the default where it changes the kernel
    (``fusion.PadvecFusion._specialize_cuda``): on the H100 it ran LitGPT's RoPE forwards 1-2% faster than
    the lanes that exchange (Llama-2-7b b2 49.6 against 50.3 µs, torch.compile 49.3-49.7), on the H200 the
    hand-written kernel of that layout was no faster (``benchmarks/NOTES.md``)."""
    n, threads = len(seg.steps), seg.threads_per_row
    if not (LANE_STEPS and _uniform_steps(kernel, seg)):
        return seg
    if WARP % (n * threads) or all_reloads or ALL_RELOADS:  # each lane loads the others' chunks again
        return replace(seg, lane_steps=n, reloads=True, row_dim=None, rows_per_thread=1) if LANE_RELOADS else seg
    if seg.rows_per_thread > 1 and not seg.groups % replace(seg, lane_steps=n).tile_rows:
        return replace(seg, lane_steps=n)
    return seg


def _uniform_steps(kernel: ir.Kernel, seg: SegmentPlan) -> bool:
    """Whether lanes side by side can run a tiled row's steps as one code: the steps are whole and
    consecutive, that code holds at most ``LANE_STEPS_MAX_SITES`` times a step's own computed sites,
    and every load is a chunk-wide vector of whole 32-bit words that some step's lanes own."""
    n, threads = len(seg.steps), seg.threads_per_row
    if not (seg.tiled and n > 1 and seg.steps == tuple((k * threads, threads) for k in range(n))):
        return False
    if _uniform_sites(kernel, seg) > LANE_STEPS_MAX_SITES:
        return False
    for site in seg.segment.sites:
        node = kernel.node(site.node)
        if not isinstance(node, ir.LOADS):
            continue
        distance = step_distance(seg, site)
        if distance is None:
            continue
        if distance < 0 or seg.widths[site.id] != seg.chunk or seg.chunk * node.type.dtype.itemsize % 4:
            return False
    return True


def hoisted_bytes(kernel: ir.Kernel, seg: SegmentPlan, row_dim: int, rows: int, layouts: dict[str, Layout]) -> int:
    """The bytes a tiled thread loads into registers in front of its steps when it takes ``rows``
    rows along ``row_dim``: one vector per distinct input element a step reads (a row's aligned and
    shifted reads of the same columns share theirs), per row where the address depends on the row."""
    loads = {}
    for site in seg.segment.sites:
        node = kernel.node(site.node)
        if not isinstance(node, ir.LOADS) or not site.index_map:
            continue
        (ref, offset), (lo, hi) = site.index_map[-1], site.box[-1]
        width = seg.widths[site.id]
        copies = rows if _varies_along(node, site, row_dim, rows, layouts[site.node]) else 1
        for first, _ in seg.steps:
            for lane in range(first * seg.chunk, (first + 1) * seg.chunk, width):
                if lo <= lane < hi:
                    key = (site.node, site.index_map[:-1], lane + offset if ref is not None else 0, width)
                    loads[key] = width * node.type.dtype.itemsize * copies
    return sum(loads.values())


def _varies_along(node: ir.Node, site: Site, dim: int, rows: int, layout: Layout) -> bool:
    """Whether a load's address differs between a thread's rows along ``dim``: it does unless the
    input is broadcast along it (stride 0) over a multiple of ``rows`` (a query group's shared key)."""
    parts = layout.parts(node.type.shape)
    return any(ref == dim and not shared_by_rows(offset, parts[d], rows)
               for d, (ref, offset) in enumerate(site.index_map))


def choose_lanes(kernel: ir.Kernel, segment: Segment, max_row_bytes: int,
                 min_threads: int = MIN_THREADS, team_scale: int = 1) -> tuple[int, int, tuple | None]:
    """``(lanes, chunk, sharing)`` of a segment: one vector, or (row mode) one row in chunks of a
    vector, shared by threads as ``sharing = (threads_per_row, steps)`` says, or staged. ``team_scale``:
    see ``share_rows``."""
    itemsizes = [kernel.node(s.output).type.dtype.itemsize for s in segment.stores]
    chunk = MAX_VECTOR_BYTES // min(itemsizes)
    shape = segment.shape
    row = shape[-1] if shape else 1
    if shape and chunk <= row and _resizes_rows(kernel, segment):
        chunk = min(chunk, pow2_factor(row))
        sharing = share_rows(kernel, segment, chunk, min_threads=min_threads, team_scale=team_scale)
        if sharing is not None:
            return row, chunk, sharing
        # Before staging, in small launches: narrower chunks whose edges meet the breakpoints (on the
        # H200, pythia's rows: 9-13% faster, as the staged blocks' load, compute and store phases do not
        # overlap; the seed's in float32, 4 M rows: 14% slower than staged)
        narrow = chunk // 2
        while narrow * min(itemsizes) >= MIN_TILED_CHUNK_BYTES:
            sharing = share_rows(kernel, segment, narrow, min_threads=min_threads, team_scale=team_scale)
            if sharing is not None and math.prod(shape[:-1]) * sharing[0] <= NARROW_MAX_THREADS:
                return row, narrow, sharing
            narrow //= 2
        if row * max(itemsizes) <= max_row_bytes:
            return row, chunk, None
        sharing = share_rows(kernel, segment, chunk, least=2, min_threads=min_threads, team_scale=team_scale)
        if sharing is not None:
            return row, chunk, sharing
    # several vectors in one chunk: every vector's loads before the chunk's stores (a loop over vectors
    # orders each one's loads after the previous store: ``benchmarks/NOTES.md``, the grouped-query v piece)
    vectors = PLAIN_VECTORS if shape and shape[-1] % (chunk * PLAIN_VECTORS) == 0 else 1
    lanes = min(lane_capacity(shape), chunk * vectors)
    return lanes, lanes, None


# --------------------------------------------------------------------------------------------
# Staging
# --------------------------------------------------------------------------------------------


def _row_stride(index_map, strides, shape, ref_shape) -> tuple[int, int] | None:
    """``(row_stride, base)`` when the tensor's rows, in reference row order, are evenly spaced."""
    last = len(ref_shape) - 1
    step_of: dict[int, int] = {}
    base = 0
    for (ref, offset), stride, size in zip(index_map[:-1], strides[:-1], shape[:-1]):
        if ref is None or size == 1:
            if offset or (ref is None and size != 1):
                return None
            continue
        step_of[ref] = stride
        base += offset * stride
    rows = [k for k in range(last) if ref_shape[k] > 1]
    if set(step_of) != set(rows) or index_map[-1][0] != last:
        return None
    row_stride = step_of[rows[-1]] if rows else 0
    for k in rows:
        if step_of[k] != row_stride * math.prod(ref_shape[k + 1:last]):
            return None
    return row_stride, base


def _stage_input(kernel, seg: SegmentPlan, node: ir.Input, sites: list[Site], layout: Layout) -> Staging | None:
    if not node.type.shape:  # a 0-d input: one value, read as it is
        return None
    ref_shape = seg.segment.shape
    last = len(ref_shape) - 1
    maps = {s.index_map[:-1] for s in sites}
    if len(maps) != 1 or any(s.box[:-1] != tuple((0, n) for n in ref_shape[:-1]) for s in sites):
        return None
    found = _row_stride(sites[0].index_map, layout.strides, node.type.shape, ref_shape)
    if found is None or layout.strides[-1] != 1:
        return None
    row_stride, base = found
    col_lo = max(0, min(s.box[last][0] + s.index_map[-1][1] for s in sites))
    col_hi = min(node.type.shape[-1], max(s.box[last][1] + s.index_map[-1][1] for s in sites))
    itemsize = node.type.dtype.itemsize
    width = MAX_VECTOR_BYTES // itemsize
    for n in (layout.alignment // itemsize, row_stride, base + col_lo, col_hi - col_lo):
        width = min(width, pow2_factor(n) if n else width)
    return Staging(node.name, node.index, False, itemsize, col_lo, col_hi - col_lo, row_stride,
                   base + col_lo, max(width, 1), 0, 0)


def _stage_output(kernel, seg: SegmentPlan, k: int, store, contiguous: bool) -> Staging | None:
    node = kernel.node(store.output)
    if node.type.shape != seg.segment.shape or any(store.offsets) or not contiguous:
        return None
    itemsize = node.type.dtype.itemsize
    cols = node.type.shape[-1]
    width = min(MAX_VECTOR_BYTES // itemsize, pow2_factor(cols))
    return Staging(node.name, store.output_index, True, itemsize, 0, cols, cols, 0, width, 0, 0)


def _with_smem(staged: list[Staging], tile_rows: int) -> tuple[Staging, ...]:
    placed, offset = [], 0
    for s in staged:
        pitch = -(-s.cols * s.itemsize // 16) * 16 + 16  # 16 spare bytes keep a warp's rows off one bank
        placed.append(Staging(**{**s.__dict__, "smem_offset": offset, "pitch": pitch}))
        offset += tile_rows * pitch
    return tuple(placed)


def _column_groups(seg: SegmentPlan) -> int:
    chunks = -(-seg.lanes // seg.chunk)
    groups = 1
    while groups < STAGED_WARPS and chunks > groups * CHUNKS_PER_THREAD:
        groups *= 2
    return groups


def _staging(kernel: ir.Kernel, seg: SegmentPlan, layouts: dict[str, Layout],
             contiguous_outputs: tuple[bool, ...]) -> tuple[Staging, ...]:
    if not seg.whole_rows or seg.tiled:
        return ()
    staged = []
    for node in kernel.inputs:
        sites = [s for s in seg.segment.sites if s.node == node.name]
        if sites:
            found = _stage_input(kernel, seg, node, sites, layouts[node.name])
            staged += [found] if found else []
    for k, store in enumerate(seg.segment.stores):
        found = _stage_output(kernel, seg, k, store, contiguous_outputs[store.output_index])
        staged += [found] if found else []
    staged = list(_with_smem(staged, seg.tile_rows))
    while staged and sum(seg.tile_rows * s.pitch for s in staged) > SMEM_BYTES_PER_BLOCK:
        staged.remove(max(staged, key=lambda s: s.pitch))  # the widest rows go direct
        staged = list(_with_smem(staged, seg.tile_rows))
    return tuple(staged)


def _chunks_self_contained(seg: SegmentPlan, staged: tuple[Staging, ...]) -> bool:
    """Whether each chunk's code reads its staged rows only inside its own columns, and a warp covers
    whole rows a chunk per thread, so that the rows can be staged in registers (see Register rows)."""
    chunks = seg.lanes // seg.chunk
    if seg.lanes % seg.chunk or chunks < 2 or WARP % chunks:
        return False
    if any(s.cols != seg.lanes for s in staged):
        return False
    inputs = {s.tensor: s for s in staged if not s.output}
    for site in (site for site in seg.segment.sites if site.node in inputs):
        lo, hi = site.box[-1]
        shift = site.index_map[-1][1] - inputs[site.node].col_lo
        for first in range(0, seg.lanes, seg.chunk):
            a, b = max(lo, first), min(hi, first + seg.chunk)
            if a < b and not (first <= a + shift and b + shift <= first + seg.chunk):
                return False
    return True


def _arithmetic_chunks(kernel: ir.Kernel, seg: SegmentPlan) -> int:
    """How many of a row's chunks compute (an elementwise op, a cast or a sum reaches their columns);
    the others only move their inputs' values."""
    computing = [s.box[-1] for s in seg.segment.sites
                 if isinstance(kernel.node(s.node), (ir.Elementwise, ir.Cast, ir.Reduce))]
    return sum(any(lo < first + seg.chunk and first < hi for lo, hi in computing)
               for first in range(0, seg.lanes, seg.chunk))


def _in_registers(seg: SegmentPlan, staged: tuple[Staging, ...],
                  min_threads: int) -> tuple[SegmentPlan, tuple[Staging, ...]]:
    """The segment with its staged rows in registers: a chunk per thread, each staging a chunk's bytes
    at ``smem_offset`` of the thread's register buffer."""
    placed, offset = [], 0
    for s in staged:
        pitch = -(-seg.chunk * s.itemsize // 16) * 16
        placed.append(replace(s, smem_offset=offset, pitch=pitch))
        offset += pitch
    k = seg.lanes // seg.chunk
    repeats = 1
    while repeats < REGISTER_REPEATS and seg.groups * k // (2 * repeats) >= min_threads:
        repeats *= 2
    return replace(seg, column_groups=k, in_registers=True, repeats=repeats), tuple(placed)


def _staged_width(site: Site, width: int, staging: Staging) -> int:
    """Reads from shared memory need only align within the staged row."""
    shift = site.index_map[-1][1] - staging.col_lo
    return min(width, pow2_factor(shift)) if shift else width


def plan(projection: Projection, layouts: tuple[Layout, ...], output_alignments: tuple[int, ...],
         max_row_bytes: int = MAX_ROW_BYTES, min_threads: int = MIN_THREADS,
         output_strides: tuple[tuple[int, ...], ...] | None = None, register_rows: bool = True,
         max_rows: int | None = None, team_scale: int = 1, all_reloads: bool = False) -> VectorPlan:
    """``output_strides``: where outputs are allocated in another order than row-major (their
    innermost dim stays innermost), the strides the kernel stores at. ``register_rows``: stage rows
    in registers where the chunks allow it (else always in shared memory). ``max_rows``: rows per
    tiled thread, at most (``rows_per_thread``). ``team_scale``: threads sharing a row, that many times
    the planned count (``wider_teams``). ``all_reloads``: steps side by side take one chunk of one row a
    lane, loading the other steps' chunks again, wherever they go side by side (``lane_steps``)."""
    kernel = projection.kernel
    shell = VectorPlan(projection, tuple(layouts), tuple(output_alignments), (), (),
                       tuple(map(tuple, output_strides)) if output_strides else None)
    contiguous_outputs = tuple(shell.output_contiguous(k) for k in range(len(kernel.outputs)))
    by_input = {i.name: layout for i, layout in zip(kernel.inputs, layouts)}
    views = tuple((n.name, view_layout(n, kernel.node(n.operand), by_input[n.operand]))
                  for n in kernel.nodes if isinstance(n, ir.View))
    by_input.update(views)
    output_layouts = tuple(shell.output_layout(k) for k in range(len(kernel.outputs)))
    segment_plans = []
    for segment in projection.segments:
        lanes, chunk, sharing = choose_lanes(kernel, segment, max_row_bytes, min_threads, team_scale)
        outputs = [kernel.node(s.output) for s in segment.stores]
        widths = [width_of(kernel.node(s.node), s.frontier, chunk, by_input.get(s.node)) for s in segment.sites]
        store_widths = tuple(width_of(node, store.frontier, chunk, shell.output_layout(store.output_index))
                             for node, store in zip(outputs, segment.stores))
        threads, steps = sharing or (1, ())
        seg = SegmentPlan(segment, lanes, chunk, tuple(widths), store_widths, threads_per_row=threads, steps=steps)
        if seg.tiled:
            seg = tiled_rows(kernel, seg, min_threads, by_input, max_rows, output_layouts, all_reloads)
        if seg.whole_rows and not seg.tiled:
            seg = replace(seg, column_groups=_column_groups(seg))
        staged = _staging(kernel, seg, by_input, contiguous_outputs)
        # a warp runs its chunks' code one after another: only one of them may compute
        if (staged and register_rows and _chunks_self_contained(seg, staged)
                and _arithmetic_chunks(kernel, seg) <= 1):
            seg, staged = _in_registers(seg, staged, min_threads)
        if staged:
            for site in segment.sites:
                staging = next((s for s in staged if s.tensor == site.node and not s.output), None)
                if staging is not None:
                    free = width_of(kernel.node(site.node), site.frontier, chunk)
                    widths[site.id] = _staged_width(site, free, staging)
            seg = replace(seg, widths=tuple(widths), staged=staged)
        segment_plans.append(seg)
    return replace(shell, segments=tuple(segment_plans), views=views)
