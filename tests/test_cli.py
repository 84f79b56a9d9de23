"""The command line: explain prints a built-in example's decisions; bench says plainly when there is no GPU."""

import pytest
import torch

from thunder_padvec.__main__ import main


@pytest.mark.parametrize("example, config, expect", [
    ("seed", "seed-b256", "staged in registers"),
    ("litgpt", "Llama-2-7b-b1", "rows shared by 8 threads"),
    ("qkv", "Llama-3-8B-b1", "rows shared by 8 threads"),
    ("gptj", "GPT-J-6B-b1", "segment 1: [1x16x8x96x2]"),  # the pairs unmerged, rotated and passed cut apart
])
def test_explain_prints_the_plan_and_source(capsys, example, config, expect):
    assert main(["explain", example, "--config", config, "--cpu", "--source"]) == 0
    out = capsys.readouterr().out
    assert "padvec0" in out and expect in out
    assert "extern \"C\" __global__" in out  # the kernel's source
    assert "launch: grid" in out


def test_explain_rejects_an_unknown_configuration(capsys):
    assert main(["explain", "litgpt", "--config", "no-such-model", "--cpu"]) == 2
    assert "Llama-2-7b-b1" in capsys.readouterr().out  # lists the known ones


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message shown without a GPU")
def test_bench_without_a_gpu_says_so(capsys):
    assert main(["bench"]) == 2
    assert "GPU" in capsys.readouterr().out
