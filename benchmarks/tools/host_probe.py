"""Where a padvec fusion call's host time goes: each piece of the call path timed on its own."""
import ctypes
import statistics
import time

import thunder_padvec
import thunder
import torch
from thunder_padvec import fusion as fusion_mod
from thunder_padvec.examples import rope_inputs, rope_one_entry
from thunder_padvec.explain import fusions

x, cos, sin = rope_inputs(1, 2, 16, 32, 8, dtype=torch.bfloat16, device="cuda")
j = thunder.jit(rope_one_entry, executors=[thunder_padvec.padvec])
j(x, cos, sin, 8)
(f, _), = fusions(thunder.last_traces(j)[-1])
spec, args = f.last, (x, cos, sin)
outs = f(*args)
pointers = [t.data_ptr() for t in (*args, *outs)]
stream = torch.cuda.current_stream().cuda_stream
from cuda.bindings import driver

libcuda = ctypes.CDLL("libcuda.so.1")
launch = libcuda.cuLaunchKernel
launch.argtypes = ([ctypes.c_void_p] + [ctypes.c_uint] * 6
                   + [ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p])
function = int(spec.module._function)


def per(label, fn, n=500, rounds=9):
    """Median and fastest of ``rounds`` loops of ``n`` calls (the host side of the machine is noisy)."""
    times = []
    for _ in range(rounds):
        fn()
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(n):
            fn()
        times.append((time.perf_counter() - t) / n * 1e6)
        torch.cuda.synchronize()
    print(f"{label:40s} median {statistics.median(times):7.2f} us, fastest {min(times):7.2f} us")


per("fusion call", lambda: f(*args))
per("fusion call", lambda: f(*args))  # again, after the rest of the process warmed up
fast = fusion_mod._FAST_EMPTY
fusion_mod._FAST_EMPTY = None
per("fusion call, torch.empty_strided", lambda: f(*args))
per("outputs allocated, torch.empty_strided", lambda: f._allocate(x.device))
fusion_mod._FAST_EMPTY = fast
per("fusion call", lambda: f(*args))
per("outputs allocated", lambda: f._allocate(x.device))
per("torch.empty on cuda", lambda: torch.empty((1, 2, 16, 32), dtype=torch.bfloat16, device=x.device))
per("pointers and key", lambda: (x.device, *[a.stride() for a in args], *[p & 15 for p in pointers]))
per("current raw stream", lambda: fusion_mod._current_stream(x.device))
per("spec.run (outputs given)", lambda: spec.run(args, outs, pointers))
per("module.launch", lambda: spec.module.launch(spec.params.grid, spec.params.block, spec.pack.params_address, stream))
per("cuda-python cuLaunchKernel", lambda: driver.cuLaunchKernel(
    spec.module._function, spec.params.grid, 1, 1, spec.params.block, 1, 1, 0, stream, spec.pack.params_address, 0))
per("ctypes cuLaunchKernel", lambda: launch(function, spec.params.grid, 1, 1, spec.params.block, 1, 1, 0, stream,
                                            spec.pack.params_address, None))
per("torch add (for scale)", lambda: torch.add(x, x))
