"""Measured choices between builds of one plan: launch variants that compute the same values.

Some hints pay on one kernel and cost on another for reasons no rule here models. Loading inputs
with an L2 evict_last policy (``LaunchParams.keep_hints``) made LitGPT's RoPE forward 3-5% faster on
the H200, but the Phi-3-mini qkv forward 2-3% slower and some backward kernels up to 8% slower
(``benchmarks/NOTES.md``); plane order (blocks that share cos and sin run together) likewise. So the
first call of a new specialization on a GPU builds each variant (``variants``), runs them on the
call's own tensors (the outputs are written with the same values each time), in turn, the L2
flushed before each run, and keeps the fastest of those that beat the default by more than
``MARGIN`` and ran faster than it in most rounds (``WIN_SHARE``); the default otherwise, and whenever
it cannot time (a CUDA graph being captured, no memory for the flush). A decision is kept on disk
beside the kernels (its key: the variants' sources, the GPU's name and this package's version), so
that other processes load the chosen kernel alone, without timing or compiling the others.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import torch

from ..schedule import TUNING, LaunchParams
from . import cache

# a variant replaces the default only where it is faster by more than this fraction: 31 rounds order
# variants 0.6-1.0% apart the same way in every trial on the H200 (``benchmarks/NOTES.md``)
MARGIN = 0.005
ROUNDS = 31  # timed runs of each variant, interleaved (7 let noise of 2-3% pick the slower one)
# ... and only where it ran faster than the default in at least this share of the rounds. A round runs the
# variants back to back, so a slow moment of the GPU moves them together: the sign of their difference in
# a round is steadier than either median. Two variants alike win 21 or more of 31 rounds one time in 28.
WIN_SHARE = 2 / 3
FLUSH_L2S = 4  # the flush writes this many times the device's L2

timings = 0  # how many choices were timed in this process (tests count them)


@dataclass(frozen=True)
class Rounds:
    """What ``measure`` timed: each variant's µs in every round, the default first; the k-th sample of
    every variant comes from the same round."""

    samples: tuple[tuple[str, tuple[float, ...]], ...]

    @property
    def count(self) -> int:
        return len(self.samples[0][1])

    def medians(self) -> tuple[tuple[str, float], ...]:
        return tuple((name, statistics.median(us)) for name, us in self.samples)

    def wins(self) -> tuple[int, ...]:
        """For each variant, the rounds in which it ran faster than the default (0 for the default)."""
        default = self.samples[0][1]
        return tuple(sum(t < d for t, d in zip(us, default)) for _, us in self.samples)


@dataclass(frozen=True)
class Choice:
    """What was measured for a specialization: median µs per variant and the rounds each won against the
    default (empty: read from disk), the pick."""

    chosen: str
    microseconds: tuple[tuple[str, float], ...] = ()
    wins: tuple[int, ...] = ()
    rounds: int = 0

    @classmethod
    def measured(cls, chosen: str, rounds: Rounds) -> Choice:
        return cls(chosen, rounds.medians(), rounds.wins(), rounds.count)

    def __str__(self) -> str:
        if not self.microseconds:
            return f"{self.chosen} (a decision kept on disk)"
        parts = [f"{name} {us:.1f} µs" + (f" (faster in {won} of {self.rounds} rounds)" if k else "")
                 for k, ((name, us), won) in enumerate(zip(self.microseconds, self.wins))]
        return " / ".join(parts) + f": {self.chosen}"


def variants(params: LaunchParams) -> list[tuple[str, LaunchParams]]:
    """The default launch first, then the variants measured against it (the last two, where asked for, with
    the L2 prefetches: ``prefetched``): the evict_last hints switched;
    the hints on inputs read again only (``LaunchParams.keep_once`` off: cos and sin kept, x not, which
    made Llama-3-8B's RoPE and qkv forwards at batch 2 1.4% and 2.2% faster on the H200, and others up
    to 4% slower); and the default's hints in plane order (``LaunchParams.plane_order``: where threads
    take rows along a group of heads, consecutive blocks take the same positions of each group, so that
    they share cos and sin), which made Llama-3-8B's grouped-query qkv forward 1-2% faster and
    Mistral-7B's 1% slower (``benchmarks/NOTES.md``); and the default's hints with the rows that lie apart
    along the tokens (qkv's heads) taken a token of every head in turn (``LaunchParams.tokens_first``: on an
    H100 the grouped-query qkv forwards about as fast as in plane order, and 0.8-1.5% faster with the plan
    whose lanes reload, ``fusion._reloaded_option``; the backwards of whole-line rows up to 1.5% slower). A
    variant whose source equals an earlier one's is not built (plane order where the threads take one row
    each, tokens first where no rows lie apart along the tokens)."""
    name = "keep" if params.keep_hints else "plain"
    other = "plain" if params.keep_hints else "keep"
    found = [(name, params), (other, replace(params, keep_hints=not params.keep_hints))]
    if params.keep_once:
        found.append(("keep reused", replace(params, keep_hints=True, keep_once=False)))
    if not params.plane_order:
        found.append((f"{name} in plane order", replace(params, plane_order=True)))
    first = tokens_first(name, params)
    fetching = [found[0], *first] if TUNING.prefetch_variant else []
    return found + first + [option for n, p in fetching for option in prefetched(n, p)]


def prefetched(name: str, params: LaunchParams) -> list[tuple[str, LaunchParams]]:
    """``params`` with a tiled segment's hoisted loads each asked of the L2 first (``LaunchParams.prefetch``),
    named after ``name``; none where they are so already. Timed by the first call, for the default launch and
    its tokens-first variant, where ``TUNING.prefetch_variant`` is on (a variant that changes nothing in the
    source, where no segment hoists its loads, is not built). On the H200 the grouped-query qkv backward of
    Mistral-7B b1 ran 0.5% faster with the prefetches, those of Llama-3-8B b1 and Mistral-7B b2 0.9-1.4%
    faster with the prefetches and tokens first; on an H100 even or 0.8% slower (``benchmarks/NOTES.md``)."""
    if params.prefetch:
        return []
    return [(f"{name}, L2 prefetches", replace(params, prefetch=True))]


def tokens_first(name: str, params: LaunchParams) -> list[tuple[str, LaunchParams]]:
    """``params`` with the rows that lie apart along the tokens taken a token of every head in turn, named
    after ``name``, the variant of it that the first call times too (``TUNING.tokens_first_variant``); none
    where ``params`` take them so already. Offered for the default launch and for the plan whose lanes
    reload (``fusion._reloaded_option``)."""
    if params.tokens_first or not TUNING.tokens_first_variant:
        return []
    return [(f"{name}, tokens first", replace(params, tokens_first=True))]


def may_time(device: torch.device) -> bool:
    """Timing needs a GPU stream that runs now: not one a CUDA graph is capturing."""
    return device.type == "cuda" and not torch.cuda.is_current_stream_capturing()


def decision_key(sources: Sequence[str], device: torch.device) -> str:
    """The variants' sources, the GPU's name and the rule that decides (a decision taken under another
    margin or share is taken again)."""
    rule = f"rounds {ROUNDS}, margin {MARGIN}, share {WIN_SHARE:.4f}"
    return cache.digest("tune", rule, torch.cuda.get_device_name(device), *sources)


def pick(rounds: Rounds, margin: float = MARGIN, share: float = WIN_SHARE) -> str:
    """The fastest variant (by median) of those whose median beats the first's (the default's) by more
    than ``margin`` and that ran faster than the default in at least ``share`` of the rounds; else the
    default."""
    medians, wins = rounds.medians(), rounds.wins()
    default, default_time = medians[0]
    taken = [(time, name) for (name, time), won in zip(medians[1:], wins[1:])
             if time < (1 - margin) * default_time and won >= share * rounds.count]
    return min(taken)[1] if taken else default


def measure(runs: Sequence[tuple[str, Callable[[], object]]], device: torch.device,
            rounds: int | None = None) -> Rounds | None:
    """µs of each run on the current stream in each round, the L2 flushed before each run; in a round
    every run goes once, in an order rotated from round to round. None where the flush buffer does not
    fit in memory."""
    global timings
    rounds = rounds or ROUNDS
    from ..timing import l2_flush

    l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or (64 << 20)
    try:
        flush = l2_flush(FLUSH_L2S * l2, device)
    except torch.OutOfMemoryError:
        return None
    times: dict[str, list] = {name: [] for name, _ in runs}
    for run in (r for _, r in runs):  # once each, untimed: loads the modules, warms the clocks
        run()
    for k in range(rounds):
        for name, run in runs[k % len(runs):] + runs[:k % len(runs)]:
            flush()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            run()
            end.record()
            times[name].append((start, end))
    torch.cuda.current_stream(device).synchronize()
    timings += 1
    return Rounds(tuple((name, tuple(1000 * s.elapsed_time(e) for s, e in pairs)) for name, pairs in times.items()))


def remembered(key: str, names: Sequence[str]) -> str | None:
    """The variant a process chose before for this key, if it is one of ``names``."""
    value = cache.read_note(key)
    return value if value in names else None


__all__ = ["MARGIN", "WIN_SHARE", "Choice", "Rounds", "decision_key", "may_time", "measure", "pick", "remembered",
           "prefetched", "tokens_first", "variants"]
