"""Command line: ``python -m thunder_padvec {demo,bench,explain,doctor,cache}``."""

from __future__ import annotations

import argparse
import sys

import thunder_padvec  # noqa: F401  (applies the compat shim before Thunder is imported)


def _demo(args: argparse.Namespace) -> int:
    import thunder
    import torch

    from . import examples, explain, padvec, set_emulation

    on_gpu = torch.cuda.is_available() and not args.cpu
    device = "cuda" if on_gpu else "cpu"
    if not on_gpu:
        set_emulation(True)
    shape = dict(examples.SEED_SHAPE) if on_gpu else dict(batch=2, heads=4, seq=64, head_size=32, rope_n_elem=8)
    dtype = getattr(torch, args.dtype)
    print(f"seed RoPE {shape} {args.dtype} on {device}" + ("" if on_gpu else " (no GPU: CPU emulation)"))

    x, cos, sin = examples.rope_inputs(**shape, dtype=dtype, device=device)
    n = shape["rope_n_elem"]
    jitted = thunder.jit(examples.rope_one_entry, executors=[padvec])
    out = jitted(x, cos, sin, n)
    expected = examples.rope_one_entry(x, cos, sin, n)
    exact = torch.equal(out, expected)
    diff = (out.float() - expected.float()).abs().max().item()
    print(f"matches eager: {'bit for bit' if exact else f'max abs difference {diff:g}'}")

    reports = explain(jitted)
    print(f"padvec fusions: {len(reports)}")
    for report in reports:
        print(report)
    if on_gpu:
        _timing_row(jitted, x, cos, sin, n, out)
    return 0 if exact or diff <= 1e-2 else 1


def _timing_row(jitted, x, cos, sin, n, out) -> None:
    from . import examples, timing

    io_bytes = x.nbytes + cos.nbytes + sin.nbytes + out.nbytes
    eager_ms = timing.median_ms(lambda: examples.rope_one_entry(x, cos, sin, n))
    padvec_ms = timing.median_ms(lambda: jitted(x, cos, sin, n))
    copy_ms = timing.copy_roofline_ms(io_bytes)
    print(f"{'':10s} {'ms':>8s} {'GB/s':>8s} {'of copy':>8s}")
    for name, ms in (("eager", eager_ms), ("padvec", padvec_ms), ("copy", copy_ms)):
        print(f"{name:10s} {ms:8.4f} {timing.gbps(io_bytes, ms):8.0f} {copy_ms / ms:8.1%}")


def _bench(args: argparse.Namespace) -> int:
    import datetime
    from pathlib import Path

    import torch

    try:
        from tqdm import tqdm
    except ImportError:  # a bare environment (the GPU machine's): a line per run instead of a bar
        tqdm = _LineProgress

    from .bench import report
    from .bench.cases import EXECUTORS, Unavailable, cases
    from .bench.measure import Built, measure

    if not torch.cuda.is_available():
        print("bench times a CUDA GPU and none is visible here; `demo` and `explain` run without one")
        return 2
    chosen = [c for c in cases() if (not args.config or any(k in c.config.id for k in args.config))
              and (not args.form or c.form in args.form) and (not args.dtype or c.dtype in args.dtype)]
    executors = [e for e in EXECUTORS if not args.executor or e in args.executor or e == "copy"]
    rows, skipped = [], []
    with tqdm(total=len(chosen) * len(executors), unit="run", dynamic_ncols=True) as bar:
        for case in chosen:
            built = Built(case)
            for name in executors:
                bar.set_description(f"{case.config.id} {case.form} {case.dtype} {name}")
                try:
                    record, _ = measure(built, name)
                    record["pass"] = record.pop("pass_")
                    rows.append({k: record.get(k) for k in report.KEYS})
                except Unavailable as reason:
                    skipped.append(f"{name}: {reason}")
                bar.update()
            del built
    date = datetime.date.today().isoformat()
    print(report.write(report.with_speedups(rows), [], torch.cuda.get_device_name(), date, Path(args.out)))
    for line in sorted(set(skipped)):
        print("skipped", line)
    return 0


class _LineProgress:
    def __init__(self, total: int, **_):
        self.total, self.done, self.what = total, 0, ""

    def __enter__(self):
        return self

    def __exit__(self, *_):
        return False

    def set_description(self, what: str) -> None:
        self.what = what

    def update(self) -> None:
        self.done += 1
        print(f"[{self.done}/{self.total}] {self.what}", flush=True)


EXAMPLES = ("seed", "litgpt", "qkv", "gptj")


def _explain(args: argparse.Namespace) -> int:
    import torch

    from . import emulation

    on_gpu = torch.cuda.is_available() and not args.cpu
    with emulation(not on_gpu):
        return _explain_example(args, on_gpu)


def _explain_example(args: argparse.Namespace, on_gpu: bool) -> int:
    import functools

    import thunder
    import torch

    from . import configs, examples, explain, padvec

    device = "cuda" if on_gpu else "cpu"
    cfg = next((c for c in configs.ALL if c.id == args.config), None)
    if cfg is None:
        print(f"unknown configuration {args.config}; one of: {', '.join(c.id for c in configs.ALL)}")
        return 2
    # on the CPU the example runs at a small batch and sequence unless --full-size: the launch-size floor
    # (threads taking several heads) and the grid follow the sizes, the rest of the plan does not
    batch, seq = (cfg.batch, cfg.seq) if on_gpu or args.full_size else (1, 8)
    dtype = getattr(torch, args.dtype)
    n = cfg.rope_n_elem
    _, cos, sin = examples.rope_inputs(1, 1, seq, cfg.head_size, n, dtype, device)
    if args.example == "gptj":  # each pair's angle twice, interleaved
        cos, sin = (t[:, : n // 2].repeat_interleave(2, -1) for t in (cos, sin))
    if args.example == "qkv":
        width = (cfg.n_head + 2 * cfg.n_query_groups) * cfg.head_size
        x = torch.randn(batch, seq, width, device=device).to(dtype)
        fn = functools.partial(examples.qkv_split_rope, n_head=cfg.n_head, n_query_groups=cfg.n_query_groups,
                               head_size=cfg.head_size, rope_n_elem=n)
    else:
        x = torch.randn(batch, cfg.n_head, seq, cfg.head_size, device=device).to(dtype)
        program = {"seed": examples.rope_one_entry, "gptj": examples.gptj_rope}.get(args.example, examples.litgpt_rope)
        fn = functools.partial(program, rope_n_elem=n)
    jitted = thunder.jit(fn, executors=[padvec])
    jitted(x, cos, sin)
    print(f"{args.example} RoPE, {cfg.id}, x {list(x.shape)} {args.dtype} on {device}"
          + ("" if on_gpu else " (CPU emulation)"))
    print("\nexecution trace:\n" + str(thunder.last_traces(jitted)[-1]))
    for report in explain(jitted):
        print(report)
        if args.source:
            print(report.kernel_source)
    return 0


def _doctor(args: argparse.Namespace) -> int:
    from . import doctor

    findings = doctor.run()
    print(doctor.report(findings))
    return 1 if any(f.status == "failed" for f in findings) else 0


def _cache(args: argparse.Namespace) -> int:
    from .runtime import cache

    usage = cache.clear_disk() if args.clear else cache.disk_usage()
    verb = "removed" if args.clear else "holds"
    if usage.cache_folder is None:
        print("kernel cache: off (THUNDER_PADVEC_CACHE_DIR=off)")
    else:
        kinds = ", ".join(f"{kind}: {n}" for kind, n in sorted(usage.binaries.items()))
        binaries = f"{sum(usage.binaries.values())} kernel binaries" + (f" ({kinds})" if kinds else "")
        partial = f", {usage.partial} unfinished writes" if usage.partial else ""
        print(f"kernel cache {usage.cache_folder}: {verb} {binaries}, {usage.notes} measured decisions{partial}, "
              f"{_size(usage.cache_bytes)}")
    print(f"dumped sources {usage.dump_folder}: {verb} {usage.dumps} files, {_size(usage.dump_bytes)}")
    if usage.failed:
        print(f"{usage.failed} files or folders could not be {'removed' if args.clear else 'read'}")
    return 1 if usage.failed else 0


def _size(nbytes: int) -> str:
    for unit in ("bytes", "KiB", "MiB"):
        if nbytes < 1024 or unit == "MiB":
            return f"{nbytes} {unit}" if unit == "bytes" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m thunder_padvec", description=thunder_padvec.__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="the seed's RoPE through thunder.jit with padvec, checked against eager")
    demo.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    demo.add_argument("--cpu", action="store_true", help="use CPU emulation even where a GPU is present")
    demo.set_defaults(run=_demo)
    bench = sub.add_parser("bench", help="the RoPE suite on this GPU: table, results files and plot")
    bench.add_argument("--config", action="append", help="configurations whose id contains this (repeatable)")
    bench.add_argument("--form", action="append", choices=["rope", "qkv_split_rope", "gptj_rope"])
    bench.add_argument("--dtype", action="append", choices=["bfloat16", "float16", "float32"])
    bench.add_argument("--executor", action="append", help="executors to time (the copy roofline always runs)")
    bench.add_argument("--out", default="benchmarks/results", help="folder of the results files")
    bench.set_defaults(run=_bench)
    explain = sub.add_parser("explain", help="what padvec decides for a built-in example: regions, plan, source")
    explain.add_argument("example", choices=EXAMPLES, nargs="?", default="seed")
    explain.add_argument("--config", default="seed-b256", help="a configuration id (see thunder_padvec.configs)")
    explain.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    explain.add_argument("--source", action="store_true", help="print the generated kernel too")
    explain.add_argument("--cpu", action="store_true", help="use CPU emulation even where a GPU is present")
    explain.add_argument("--full-size", action="store_true",
                         help="in emulation, run at the configuration's own batch and sequence (slow)")
    explain.set_defaults(run=_explain)
    doctor = sub.add_parser("doctor", help="what this machine gives padvec: NVRTC, the host compiler, the GPU, "
                                           "the disk cache, each checked")
    doctor.set_defaults(run=_doctor)
    cache = sub.add_parser("cache", help="what the kernel cache and the dumped sources hold; --clear removes "
                                         "them (only this package's files)")
    cache.add_argument("--clear", action="store_true", help="remove the cached kernels, decisions and sources")
    cache.set_defaults(run=_cache)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
