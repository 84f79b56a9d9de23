"""padvec inside Thunder's distributed transforms: two processes (gloo and CPU emulation here; NCCL on two
GPUs where a machine has them) train the attention block of ``test_training`` and must match one process
training on the whole batch."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from thunder_padvec.examples import AttentionBlock

WORKER = Path(__file__).parent / "distributed_worker.py"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_ranks(kind: str, device: str, world: int = 2) -> list[dict]:
    port = _free_port()
    procs = []
    for rank in range(world):
        env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1",
               "MASTER_PORT": str(port), "PADVEC_DIST": kind, "PADVEC_DIST_DEVICE": device,
               "NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
        procs.append(subprocess.Popen([sys.executable, str(WORKER)], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    return sorted(results, key=lambda r: r["rank"])


def _single_process(device: str, world: int = 2):
    """Per-rank losses and first-step gradients of one process training on the whole batch."""
    sys.path.insert(0, str(WORKER.parent))
    from distributed_worker import STEPS, batch

    torch.manual_seed(0)
    model = AttentionBlock().to(device)
    x, target, cos, sin = batch(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    losses, grads = [[] for _ in range(world)], {}
    for step in range(STEPS):
        optimizer.zero_grad()
        shares = [slice(r * len(x) // world, (r + 1) * len(x) // world) for r in range(world)]
        per_rank = [F.mse_loss(model(x[s], cos, sin), target[s]) for s in shares]
        (sum(per_rank) / world).backward()  # ddp averages the ranks' gradients
        if step == 0:
            grads = {n: p.grad.double().sum().item() for n, p in model.named_parameters()}
        optimizer.step()
        for r, loss in enumerate(per_rank):
            losses[r].append(loss.item())
    return losses, grads


def _check(kind: str, device: str):
    ranks = _run_ranks(kind, device)
    losses, grads = _single_process(device)
    for r in ranks:
        torch.testing.assert_close(r["losses"], losses[r["rank"]], rtol=1e-4, atol=1e-6)
        assert r["traces"] == ["backward", "forward"]  # padvec kernels in both passes
        if kind == "ddp":
            assert r["grads"].keys() == grads.keys()
            for name, value in grads.items():
                assert abs(r["grads"][name] - value) <= 1e-4 * (1 + abs(value)), name
    return ranks


@pytest.mark.parametrize("kind", ["ddp", "fsdp"])
def test_two_cpu_ranks_match_one_process(kind):
    ranks = _check(kind, "cpu")
    assert all(r["devices"] == ["cpu"] for r in ranks)


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
@pytest.mark.parametrize("kind", ["ddp", "fsdp"])
def test_two_gpu_ranks_match_one_process(kind):
    ranks = _check(kind, "cuda")
    assert [r["devices"] for r in ranks] == [["cuda:0"], ["cuda:1"]]  # each rank's kernels on its own GPU
