"""Turns runs of the RoPE suite into the results files.

    python -m thunder_padvec.bench.report run.json [more.json ...] [--out benchmarks/results]

takes pytest-benchmark JSON files (``pytest benchmarks/ --benchmark-only --benchmark-json=run.json``; where
several measured a case, the last one's rows of it, which the table says) and

writes ``<date>-<gpu>.json`` (a list of records), ``<date>-<gpu>.md`` (the table) and
``<date>-<gpu>.png`` (achieved bandwidth by case and executor, the copy roofline marked);

    python -m thunder_padvec.bench.report --compare earlier.json later.json

prints two results files side by side (another GPU, or a change before and after).
"""

from __future__ import annotations

import argparse
import json
import re
from collections import defaultdict
from pathlib import Path

KEYS = ["config", "form", "pass", "dtype", "executor", "median_ms", "io_bytes", "gbps", "roofline_fraction",
        "speedup_vs_compile", "peak_memory_bytes", "pass_copy_ms", "pass_roofline_fraction", "kernels",
        "cotangents"]
NOTE = (
    "Device time: median of CUDA-graph replays of one call, L2 flushed before each. Fraction of copy: "
    "a device-to-device copy of the same minimal IO bytes (every input read once, every output that eager "
    "does not return as a view written once), timed in the same run, over the executor's time. In the "
    "qkv_split_rope form the v third of qkv counts as read although nothing needs it, so an executor that "
    "returns v as a view can pass 100%. Per-pass copies (fwd+bwd): the forward's bytes copied, then the "
    "backward's, in two launches (a forward and its backward are two kernels at least: autograd runs the "
    "backward later), and padvec's time as a fraction of theirs."
)
ORDER = ["copy", "padvec", "torch.compile", "liger", "nvfuser", "thunder", "eager"]


def host_records(run: dict) -> list[dict]:
    return [dict(b["extra_info"]) for b in run["benchmarks"] if (b.get("extra_info") or {}).get("kind") == "host"]


def block_records(run: dict) -> list[dict]:
    """The block benchmark's records (``benchmarks/test_block.py``), each with its ``speedup_vs_compile``;
    none for the copy, which moves only RoPE's bytes, not the block's work."""
    rows = []
    for bench in run["benchmarks"]:
        info = dict(bench.get("extra_info") or {})
        if info.get("form") == "block" and "median_ms" in info:
            info["pass"] = info.pop("pass_", "fwd+bwd")
            rows.append(info)
    return with_speedups(rows, without=("copy",))


def records(run: dict) -> list[dict]:
    rows = []
    for bench in run["benchmarks"]:
        info = dict(bench.get("extra_info") or {})
        if "median_ms" not in info or info.get("form") == "block":
            continue
        info["pass"] = info.pop("pass_", "fwd")
        rows.append({k: info.get(k) for k in KEYS if k != "cotangents" or info.get(k)})
    return with_speedups(rows)


def _pass(pass_: str, cotangents: str | None) -> str:
    """A case's pass as the tables show it: a fwd+bwd row whose cotangents were laid out otherwise than
    row-major says how (a case of its own, never merged with the row-major one)."""
    return f"{pass_}, cotangents as {cotangents}" if cotangents else pass_


def _bench_case(bench: dict) -> tuple | None:
    info = bench.get("extra_info") or {}
    if "median_ms" not in info:
        return None
    return info["config"], info["form"], _pass(info.get("pass_", "fwd"), info.get("cotangents")), info["dtype"]


def merged(runs: list[dict]) -> tuple[dict, dict[int, int]]:
    """``(run, replaced)``: the runs as one, where a case measured in several runs keeps the benchmarks
    of the last one (every executor of a case from one run, side by side), in the place of its first
    appearance; ``replaced``: how many cases each later run measured again, by its index."""
    owner = {}
    for i, run in enumerate(runs):
        for bench in run["benchmarks"]:
            case = _bench_case(bench)
            if case is not None:
                owner[case] = i
    slots, places, replaced = {}, [], defaultdict(set)  # places: lists of benchmarks, in order
    for i, run in enumerate(runs):
        for bench in run["benchmarks"]:
            case = _bench_case(bench)
            if case is None:
                places.append([bench])
                continue
            if case not in slots:
                slots[case] = len(places)
                places.append([])
            if owner[case] == i:
                places[slots[case]].append(bench)
            else:
                replaced[owner[case]].add(case)
    benchmarks = [bench for place in places for bench in place]
    return {**runs[0], "benchmarks": benchmarks}, {i: len(cases) for i, cases in sorted(replaced.items())}


def with_speedups(rows: list[dict], without: tuple[str, ...] = ()) -> list[dict]:
    """Sets each record's ``speedup_vs_compile``: torch.compile's time on the same case over its own (None
    for the executors ``without``)."""
    compile_ms = {_case(r): r["median_ms"] for r in rows if r["executor"] == "torch.compile"}
    for r in rows:
        base = compile_ms.get(_case(r)) if r["executor"] not in without else None
        r["speedup_vs_compile"] = base / r["median_ms"] if base else None
    return rows


def _case(r: dict) -> tuple:
    return r["config"], r["form"], _pass(r["pass"], r.get("cotangents")), r["dtype"]


def _by_case(rows: list[dict]) -> dict[tuple, dict[str, dict]]:
    """Records by case, then by executor, in the order the cases first appear."""
    found = defaultdict(dict)
    for r in rows:
        found[_case(r)][r["executor"]] = r
    return found


def markdown(rows: list[dict], title: str, notes: tuple[str, ...] = ()) -> str:
    by_case = _by_case(rows)
    executors = [e for e in ORDER if any(e in d for d in by_case.values())]
    head = ["config", "form", "pass", "dtype", "copy TB/s"] + [f"{e} (% of copy)" for e in executors[1:]]
    head.append("padvec vs torch.compile")
    passes = any(r.get("pass_copy_ms") for r in rows)
    if passes:
        head.append("per-pass copies µs (padvec %)")
    lines = [f"### {title}", "", NOTE, "", *(f"{note}\n" for note in notes),
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for case, found in by_case.items():
        copy = found.get("copy")
        cells = list(case) + [f"{copy['gbps'] / 1000:.2f}" if copy else "-"]
        for e in executors[1:]:
            r = found.get(e)
            cells.append(f"{r['median_ms'] * 1000:.1f} µs ({r['roofline_fraction']:.1%})" if r else "-")
        padvec = found.get("padvec")
        speedup = padvec and padvec["speedup_vs_compile"]
        cells.append(f"{speedup:.2f}x" if speedup else "-")
        if passes:
            split = copy and copy.get("pass_copy_ms")
            fraction = padvec and padvec.get("pass_roofline_fraction")
            cells.append(f"{split * 1000:.1f} ({fraction:.1%})" if split and fraction else
                         f"{split * 1000:.1f}" if split else "-")
        lines.append("| " + " | ".join(cells) + " |")
    summary = targets(rows)
    return "\n".join(lines) + "\n" + (f"\n{summary}\n" if summary else "")


def targets(rows: list[dict], least: float = 0.95) -> str:
    """padvec's rows against the suite's targets (issues 4 and 5): faster than torch.compile, and at least
    ``least`` of the copy (fwd+bwd: also of the per-pass copies), each counted over the rows that measured
    both sides; the rows behind torch.compile named. Empty where padvec has no rows."""
    padvec = [r for r in rows if r["executor"] == "padvec"]
    if not padvec:
        return ""
    timed = [r for r in padvec if r.get("speedup_vs_compile")]
    behind = [r for r in timed if r["speedup_vs_compile"] <= 1]
    split = [r for r in padvec if r["pass"] == "fwd+bwd" and r.get("pass_roofline_fraction")]
    parts = [f"padvec against the targets: ahead of torch.compile on {len(timed) - len(behind)} of {len(timed)} rows",
             f"at least {least:.0%} of the copy on {sum(r['roofline_fraction'] >= least for r in padvec)} of "
             f"{len(padvec)}"]
    if split:
        parts.append(f"fwd+bwd at least {least:.0%} of the per-pass copies on "
                     f"{sum(r['pass_roofline_fraction'] >= least for r in split)} of {len(split)}")
    text = "; ".join(parts) + "."
    if behind:
        named = (f"{r['config']} {r['form']} {r['pass']} {r['dtype']} ({r['speedup_vs_compile']:.3f}x)" for r in behind)
        text += " Behind torch.compile: " + ", ".join(named) + "."
    return text


def compare(before: list[dict], after: list[dict], labels: tuple[str, str] = ("before", "after")) -> str:
    """Two results files' records side by side, case by case (the cases both measured, in ``after``'s
    order): padvec's and torch.compile's times in each and their ratio (after over before: under 1 is
    faster; torch.compile's ratio shows how far the machine or the run moved), then each file's count
    against the targets (``targets``)."""
    old, new = _by_case(before), _by_case(after)
    head = ["config", "form", "pass", "dtype", "padvec A (% of copy)", "padvec B (% of copy)", "padvec B/A",
            "torch.compile B/A", "padvec vs torch.compile, A -> B"]
    lines = [f"### A: {labels[0]}; B: {labels[1]}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def shown(r):
        return f"{r['median_ms'] * 1000:.1f} µs ({r['roofline_fraction']:.1%})" if r else "-"

    def ratio(x, y):
        return f"{y['median_ms'] / x['median_ms']:.3f}" if x and y else "-"

    def speedup(r):
        return f"{r['speedup_vs_compile']:.2f}x" if r and r.get("speedup_vs_compile") else "-"

    for case in (c for c in new if c in old):
        p0, p1 = old[case].get("padvec"), new[case].get("padvec")
        c0, c1 = old[case].get("torch.compile"), new[case].get("torch.compile")
        cells = [*case, shown(p0), shown(p1), ratio(p0, p1), ratio(c0, c1), f"{speedup(p0)} -> {speedup(p1)}"]
        lines.append("| " + " | ".join(cells) + " |")
    summaries = [f"{name}: {targets(rows)}" for name, rows in (("A", before), ("B", after)) if targets(rows)]
    return "\n".join(lines) + "\n" + "".join(f"\n{line}\n" for line in summaries)


def plot(rows: list[dict], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = list(dict.fromkeys(_case(r) for r in rows))
    executors = [e for e in ORDER if e != "copy" and any(r["executor"] == e for r in rows)]
    fig, ax = plt.subplots(figsize=(max(10, len(cases) * 0.45), 5.5))
    width = 0.8 / max(len(executors), 1)
    for k, e in enumerate(executors):
        values = {(_case(r)): r["gbps"] for r in rows if r["executor"] == e}
        xs = [i + k * width for i in range(len(cases))]
        ax.bar(xs, [values.get(c, 0) / 1000 for c in cases], width, label=e)
    copy = {_case(r): r["gbps"] / 1000 for r in rows if r["executor"] == "copy"}
    for i, c in enumerate(cases):
        if c in copy:
            ax.hlines(copy[c], i - width / 2, i + 0.8 - width / 2, colors="black", linewidth=1.5)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(cases))])
    short = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
    ax.set_xticklabels(["/".join(c[:2]) + f"/{short.get(c[3], c[3])}" for c in cases], rotation=70, ha="right",
                       fontsize=7)
    ax.set_ylabel("achieved TB/s (minimal IO bytes / time)")
    ax.set_title(f"{title}: black lines are the device-to-device copy of the same bytes")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def _host_figure(h: dict) -> str:
    if "per_call_us" not in h:
        return f"{h['seconds']:.2f} s"
    text = f"{h['per_call_us']:.1f} µs per call"
    if "rounds" in h:
        text += f" (median of {h['rounds']} rounds; fastest round {h['min_us']:.1f} µs)"
    if "above_bare_us" in h:
        text += f", {h['above_bare_us']:.1f} µs above the bare launch in the same rounds"
    return text


BLOCK_NOTE = (
    "Forward and backward of a Llama-style block (RMSNorm, qkv projection, RoPE, causal attention, output "
    "projection, RMSNorm, SwiGLU MLP; `thunder_padvec.bench.block`), batch 1, bf16: the gradients of the "
    "input and of every weight. Device: median of CUDA-graph replays, L2 flushed before each. Call: CUDA "
    "events around one call with its host work, one call at a time. Fusions: Thunder's fusions in the "
    "forward / backward trace (padvec's in brackets). Copy: the RoPE prologue's minimal IO copied, forward "
    "then backward, RoPE's share of the block at the roofline."
)


def block_markdown(rows: list[dict]) -> str:
    lines = [BLOCK_NOTE, "", "| config | executor | device ms | call ms | device vs torch.compile | fusions fwd / bwd "
             "| peak GiB |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        f = r.get("fusions")
        fused = (f"{f['forward']} ({f['padvec forward']}) / {f['backward']} ({f['padvec backward']})" if f else "-")
        speedup = r.get("speedup_vs_compile")
        lines.append(f"| {r['config']} | {r['executor']} | {r['median_ms']:.3f} | {r['call_ms']:.3f} | "
                     + (f"{speedup:.3f}x" if speedup else "-") + f" | {fused} | {r['peak_memory_bytes'] / 2**30:.2f} |")
    return "\n".join(lines) + "\n"


def _kept(rows: list, path: Path) -> tuple[list, bool]:
    """``(rows, earlier)``: a section's rows, or where this run has none the day's earlier ones from
    ``path`` (``earlier``), which is written again."""
    earlier = not rows and path.exists()
    if earlier:
        rows = json.loads(path.read_text())
    if rows:
        path.write_text(json.dumps(rows, indent=1) + "\n")
    return rows, earlier


def write(rows: list[dict], host: list[dict], gpu: str, date: str, out: Path, notes: tuple[str, ...] = (),
          blocks: tuple[dict, ...] = ()) -> str:
    """Writes the results files of one run into ``out``; returns the markdown (``notes``: lines above
    the table). The host path and the block benchmark have files of their own; a run without them keeps
    and shows the day's earlier ones."""
    stem = f"{date}-{re.sub(r'[^A-Za-z0-9]+', '-', gpu).strip('-').lower()}"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.json").write_text(json.dumps(rows, indent=1) + "\n")
    title = f"RoPE suite, {gpu}, {date}"
    text = markdown(rows, title, notes) if rows else ""
    for heading, name, found, show in (
            ("Host path", f"{stem}-host.json", host, lambda h: "\n".join(f"- {x['what']}: {_host_figure(x)}"
                                                                        for x in h)),
            ("A Llama-style block, forward and backward", f"{stem}-block.json", list(blocks), block_markdown)):
        found, earlier = _kept(found, out / name)
        if found:
            text += f"\n### {heading}" + (f" (an earlier run, `{name}`)" if earlier else "") + "\n\n" + show(found)
            text += "" if text.endswith("\n") else "\n"
    (out / f"{stem}.md").write_text(text)
    if rows:
        plot(rows, out / f"{stem}.png", title)
    return text


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m thunder_padvec.bench.report")
    parser.add_argument("runs", nargs="+",
                        help="pytest-benchmark JSON files of one session; a case measured in several shows the last")
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("--compare", action="store_true",
                        help="two results files (<date>-<gpu>.json) or runs, the earlier first: print them side by "
                             "side")
    args = parser.parse_args(argv)
    if args.compare:
        if len(args.runs) != 2:
            parser.error("--compare takes two results files")
        before, after = (_results(Path(p), parser) for p in args.runs)
        labels = tuple(Path(p).stem for p in args.runs)
        if labels[0] == labels[1]:  # two runs of the same part: their folders tell them apart
            labels = tuple(f"{Path(p).parent.name}/{Path(p).stem}" for p in args.runs)
        print(compare(before, after, labels))
        return
    runs = [_read(Path(p), parser) for p in args.runs]
    for path, found in zip(args.runs, runs):
        if not _is_run(found):
            parser.error(f"{path} is not a pytest-benchmark run")
    run, replaced = merged(runs)
    notes = tuple(f"{n} case(s) measured again in a later run, `{Path(args.runs[i]).name}` "
                  f"({runs[i].get('datetime', '')[:16] or 'undated'}): its rows are shown."
                  for i, n in replaced.items())
    gpu = run.get("machine_info", {}).get("gpu") or _gpu_name(run)
    date = max((r.get("datetime", "")[:10] for r in runs), default="") or "undated"
    print(write(records(run), host_records(run), gpu, date, Path(args.out), notes, tuple(block_records(run))))


def _read(path: Path, parser: argparse.ArgumentParser):
    """A JSON file's contents; a file that can't be read or parsed stops with the parser's error."""
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        parser.error(f"{path}: {error}")


def _is_run(found) -> bool:
    """Whether ``found`` is a pytest-benchmark run: its benchmarks a list of records."""
    return isinstance(found, dict) and isinstance(found.get("benchmarks"), list) and all(
        isinstance(b, dict) for b in found["benchmarks"])


def _results(path: Path, parser: argparse.ArgumentParser) -> list[dict]:
    """A file for ``--compare``: a results file's records, or a run's (pytest-benchmark JSON) turned into
    them; anything else, or a file that can't be read, stops with the parser's error."""
    found = _read(path, parser)
    if _is_run(found):
        return records(found)
    if isinstance(found, list) and all(isinstance(r, dict) and {"config", "executor"} <= r.keys() for r in found):
        return found
    parser.error(f"{path} is neither a results file nor a pytest-benchmark run")


def _gpu_name(run: dict) -> str:
    for bench in run.get("benchmarks", []):
        name = (bench.get("extra_info") or {}).get("gpu")
        if name:
            return name
    return "gpu"


if __name__ == "__main__":
    main()
