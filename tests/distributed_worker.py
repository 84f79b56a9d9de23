"""One rank of the distributed tests (``test_distributed.py`` starts two): Thunder's ``ddp`` or ``fsdp``
around the attention block of ``thunder_padvec.examples``, padvec first, on the CPU (gloo, emulation) or one GPU
per rank (NCCL). Prints one JSON line: the rank's losses, the gradients after the first step (ddp), and
the devices padvec's kernels ran on."""

import json
import os

import thunder_padvec  # noqa: F401  (before thunder)
import thunder
import torch
import torch.distributed as dist
import torch.nn.functional as F
from thunder_padvec.examples import AttentionBlock
from thunder_padvec.explain import fusions

STEPS = 3


def batch(device):
    g = torch.Generator().manual_seed(1)
    x, target = torch.randn(4, 8, 64, generator=g), torch.randn(4, 8, 64, generator=g)
    cos, sin = torch.randn(8, 16, generator=g), torch.randn(8, 16, generator=g)
    return [t.to(device) for t in (x, target, cos, sin)]


def main() -> None:
    rank, world, kind = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), os.environ["PADVEC_DIST"]
    cuda = os.environ.get("PADVEC_DIST_DEVICE") == "cuda"
    device = torch.device("cuda", rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    else:
        thunder_padvec.set_emulation(True)
    dist.init_process_group("nccl" if cuda else "gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = AttentionBlock().to(device)
    x, target, cos, sin = batch(device)
    share = slice(rank * len(x) // world, (rank + 1) * len(x) // world)
    jitted = thunder.jit(model, executors=[thunder_padvec.padvec])
    jitted = thunder.distributed.ddp(jitted) if kind == "ddp" else thunder.distributed.fsdp(jitted, device=device)
    optimizer = torch.optim.SGD(jitted.parameters(), lr=0.1)
    losses, grads = [], {}
    for step in range(STEPS):
        optimizer.zero_grad()
        loss = F.mse_loss(jitted(x[share], cos, sin), target[share])
        loss.backward()
        if step == 0 and kind == "ddp":
            grads = {n: p.grad.double().sum().item() for n, p in jitted.named_parameters()}
        optimizer.step()
        losses.append(loss.item())
    traces = [thunder.last_traces(jitted)[-1], thunder.last_backward_traces(jitted)[-1]]
    devices = sorted({str(f.last.device) for t in traces for f, _ in fusions(t) if hasattr(f.last, "device")})
    print(json.dumps(dict(rank=rank, losses=losses, grads=grads, devices=devices,
                          traces=sorted({r.trace for r in thunder_padvec.explain(jitted)}))))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
