"""The GPU scripts of ``benchmarks/tools`` checked where there is no GPU, so that a call of the device's
time is not spent on a typo: the shell scripts parse, and every suite case and knob their explore and
probe commands name exists."""

from __future__ import annotations

import importlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parent.parent / "benchmarks" / "tools"
CASE = re.compile(r"^[A-Za-z0-9.]+(?:-[A-Za-z0-9.]+)*-b\d+-(?:rope|qkv_split_rope|gptj_rope)"
                  r"-(?:bfloat16|float16|float32)-fwd(?:\+bwd)?$")


def _tool(name: str):
    """The module ``name`` of benchmarks/tools (the tools import each other by name from that folder)."""
    sys.path.insert(0, str(TOOLS))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(TOOLS))


def _commands(script: Path) -> list[list[str]]:
    """The script's lines, continuations joined, split into words."""
    text = script.read_text().replace("\\\n", " ")
    return [line.split() for line in text.splitlines() if not line.lstrip().startswith("#")]


@pytest.mark.parametrize("name", ["gpu_all.sh", "gpu_ncu.sh"])
def test_the_gpu_scripts_parse(name):
    if shutil.which("bash") is None:
        pytest.skip("no bash")
    result = subprocess.run(["bash", "-n", str(TOOLS / name)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_every_case_and_knob_the_gpu_script_names_exists():
    explore = _tool("explore")
    from thunder_padvec.bench.cases import cases

    known = {c.id for c in cases()}
    named, variants = set(), set()
    for words in _commands(TOOLS / "gpu_all.sh"):
        if not any(w.endswith(("explore.py", "tune_probe.py", "flat_probe.py", "bulk_probe.py", "layout_probe.py"))
               for w in words):
            continue
        named |= {w for w in words if CASE.match(w)}
        if "--variants" in words:
            for w in words[words.index("--variants") + 1:]:
                if w.startswith(("-", ">", "2>")) or w == "|":
                    break
                variants.add(w.split(":", 1)[1])
    assert named and variants  # the patterns still find them
    assert named <= known, named - known
    for settings in variants:  # an unknown knob exits explore: SystemExit
        explore._restore(explore._apply(settings))


def _bench_conftest(monkeypatch):
    """benchmarks/conftest.py loaded afresh with neither ``PADVEC_TUNING`` nor ``PADVEC_COTANGENTS`` set (the
    cotangents' layout it sets is restored after the test)."""
    import importlib.util

    from thunder_padvec.bench import measure

    for name in ("PADVEC_TUNING", "PADVEC_COTANGENTS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(measure, "COTANGENTS", measure.COTANGENTS)
    spec = importlib.util.spec_from_file_location("bench_conftest", TOOLS.parent / "conftest.py")
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)
    return conftest


def test_a_benchmark_run_takes_its_tuning_from_the_environment(monkeypatch):
    """``PADVEC_TUNING`` (benchmarks/conftest.py) sets ``schedule.TUNING``'s fields and names them in the run
    JSON's machine info; an unknown name stops the run; every setting gpu_all.sh passes exists."""
    import dataclasses

    from thunder_padvec.schedule import TUNING

    conftest = _bench_conftest(monkeypatch)
    for field in dataclasses.fields(TUNING):  # every field, restored after the test (gpu_all.sh's settings too)
        monkeypatch.setattr(TUNING, field.name, getattr(TUNING, field.name))
    monkeypatch.setenv("PADVEC_TUNING", "eager_orders=0,block=128")
    conftest._tuning_from_environment()
    assert TUNING.eager_orders is False and TUNING.block == 128
    info = {}
    conftest.pytest_benchmark_update_machine_info(None, info)
    assert info == {"padvec_tuning": "eager_orders=0,block=128"}
    monkeypatch.setenv("PADVEC_TUNING", "eager_order=0")
    with pytest.raises(SystemExit, match="eager_order"):
        conftest._tuning_from_environment()
    settings = re.findall(r"PADVEC_TUNING=(\S+)", (TOOLS / "gpu_all.sh").read_text())
    assert settings
    for setting in settings:
        monkeypatch.setenv("PADVEC_TUNING", setting)
        conftest._tuning_from_environment()


def test_a_benchmark_run_takes_its_cotangents_layout_from_the_environment(monkeypatch):
    """``PADVEC_COTANGENTS`` (benchmarks/conftest.py): "outputs" lays the fwd+bwd rows' cotangents out as each
    executor's outputs are and says so in the run JSON's machine info; unset, they stay row-major; any
    other value stops the run."""
    from thunder_padvec.bench import measure

    conftest = _bench_conftest(monkeypatch)
    assert measure.COTANGENTS == "row-major"
    monkeypatch.setenv("PADVEC_COTANGENTS", "outputs")
    conftest._cotangents_from_environment()
    assert measure.COTANGENTS == "outputs"
    info = {}
    conftest.pytest_benchmark_update_machine_info(None, info)
    assert info == {"padvec_cotangents": "outputs"}
    monkeypatch.setenv("PADVEC_COTANGENTS", "output")
    with pytest.raises(SystemExit, match="'output'"):
        conftest._cotangents_from_environment()
    assert "PADVEC_COTANGENTS=outputs" in (TOOLS / "gpu_all.sh").read_text()


def test_the_bulk_probe_kernels_give_eagers_outputs():
    """The bulk probe's hand-written grouped-query kernels, run on the CPU through the host prelude (the bulk
    copies as each thread's stores at the copies' addresses, every element checked to be written once)."""
    bulk_probe = _tool("bulk_probe")
    results = bulk_probe.emulate(32, batch=1)
    assert len(results) == 2 * len(bulk_probe.VARIANTS) and all(results)


@pytest.mark.parametrize("groups", [2, 4])
def test_the_layout_probe_program_moves_the_qkv_forwards_bytes(groups, emulated, generator):
    """The layout probe's program (the qkv form without RoPE): padvec claims it (a kernel), its outputs equal
    eager's bit for bit, and it reads and writes what the forward does (cos and sin aside)."""
    import thunder_padvec
    import thunder
    import torch

    layout_probe = _tool("layout_probe")
    from thunder_padvec import configs
    from thunder_padvec.bench.cases import minimal_io_bytes
    from thunder_padvec.bench.measure import kernels
    from thunder_padvec.examples import qkv_split_rope

    cfg = configs.RopeConfig("probe", 1, 4, groups, 32, 32, 16)
    qkv = torch.randn(1, 16, (cfg.n_head + 2 * groups) * 32, generator=generator).bfloat16()
    cos, sin = (torch.randn(16, 32, generator=generator).bfloat16() for _ in range(2))
    program = layout_probe.layout_only(cfg)
    jitted = thunder.jit(program, executors=[thunder_padvec.padvec])
    got, want = jitted(qkv, cos, sin), program(qkv, cos, sin)
    assert all(torch.equal(g, w) for g, w in zip(got, want))
    assert len(kernels(jitted)) == 1
    forward = qkv_split_rope(qkv, cos, sin, cfg.n_head, groups, 32, 32)
    assert [t.shape for t in want] == [t.shape for t in forward]
    written = 3 * cfg.n_head * 16 * 32 * 2
    assert minimal_io_bytes((qkv,), want) == qkv.nbytes + written


def test_kernel_resources_counts_sass_instructions_by_segment(emulated, generator):
    """``kernel_resources.py --sass``: the SASS of a kernel (NVRTC's cubin read by nvdisasm) counted by opcode;
    each segment alone is the kernel with the other segments' calls taken out. On a grouped-query qkv
    backward: three segments (q, k and v), each alone smaller than the kernel, the k piece (RoPE's backward
    of each of a group's heads, then their sum) the largest and v's (the sum alone) the smallest, and every
    piece loads and stores."""
    import functools

    import thunder_padvec
    import thunder
    import torch

    from thunder_padvec import codegen
    from thunder_padvec.examples import qkv_split_rope
    from thunder_padvec.explain import explain

    kernel_resources = _tool("kernel_resources")
    tiny = kernel_resources.sass('extern "C" __global__ void k(float* a) { a[threadIdx.x] *= 2.f; }', "sm_90")
    assert {"LDG", "STG", "FADD", "EXIT"} <= set(tiny) and "NOP" not in tiny, tiny  # 2x as x + x

    fn = functools.partial(qkv_split_rope, n_head=8, n_query_groups=2, head_size=64, rope_n_elem=64)
    qkv = torch.randn(1, 16, 12 * 64, generator=generator).to(torch.bfloat16).requires_grad_(True)
    cos, sin = (torch.randn(16, 64, generator=generator).to(torch.bfloat16) for _ in range(2))
    jitted = thunder.jit(fn, executors=[thunder_padvec.padvec])
    torch.autograd.backward(jitted(qkv, cos, sin), [torch.randn(1, 8, 16, 64, generator=generator).to(torch.bfloat16)
                                                    for _ in range(3)])
    backward = next(r for r in explain(jitted) if r.name == "padvec1")
    source = codegen.device_source(codegen.render(backward.plan, backward.launch))
    alone = kernel_resources.segment_sources(source)
    assert sorted(alone) == [0, 1, 2]
    whole = sum(kernel_resources.sass(source, "sm_90").values())
    counts = {i: kernel_resources.sass(s, "sm_90") for i, s in alone.items()}
    totals = {i: sum(c.values()) for i, c in counts.items()}
    assert all(n < whole for n in totals.values()), (totals, whole)
    assert totals[1] > totals[0] > totals[2], totals
    assert all(c["LDG"] and c["STG"] for c in counts.values()), counts


@pytest.mark.parametrize("groups", [1, 2])
def test_the_sumfirst_probe_program_equals_the_written_one(groups, emulated, generator):
    """The sum-first probe's program (RoPE on k before its expand) gives the written program's outputs and
    gradient in float64, and padvec's gradient of it agrees with eager's of the written program."""
    import torch
    import thunder

    import thunder_padvec
    from thunder_padvec.examples import qkv_split_rope

    sumfirst_probe = _tool("sumfirst_probe")
    kw = dict(n_head=4, n_query_groups=groups, head_size=16, rope_n_elem=16)
    qkv = torch.randn(2, 8, (4 + 2 * groups) * 16, generator=generator, dtype=torch.float64, requires_grad=True)
    cos, sin = (torch.randn(8, 16, generator=generator, dtype=torch.float64) for _ in range(2))
    cotangents = [torch.randn(2, 4, 8, 16, generator=generator, dtype=torch.float64) for _ in range(3)]
    written = qkv_split_rope(qkv, cos, sin, **kw)
    reordered = sumfirst_probe.rope_then_expand(qkv, cos, sin, **kw)
    for a, b in zip(written, reordered):
        torch.testing.assert_close(a, b)
    expected = torch.autograd.grad(written, qkv, cotangents)[0]
    torch.testing.assert_close(torch.autograd.grad(reordered, qkv, cotangents)[0], expected)
    x = qkv.detach().float().requires_grad_(True)
    jitted = thunder.jit(lambda q, c, s: sumfirst_probe.rope_then_expand(q, c, s, **kw),
                         executors=[thunder_padvec.padvec])
    got = torch.autograd.grad(jitted(x, cos.float(), sin.float()), x, [c.float() for c in cotangents])[0]
    torch.testing.assert_close(got.double(), expected, rtol=1e-5, atol=1e-5)
    assert any(r.plan is not None for r in thunder_padvec.explain(jitted))  # padvec ran it
