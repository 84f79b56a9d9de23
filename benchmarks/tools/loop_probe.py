"""Would fewer registers per thread pay on LitGPT's full-rotary RoPE forward?

    python benchmarks/tools/loop_probe.py --cases Llama-2-7b-b2-rope-bfloat16-fwd Phi-3-mini-b1-rope-bfloat16-fwd

padvec's kernel for these rows hoists every load of a thread's 4 heads in front of their steps (73-80
registers, 3 blocks of 256 per SM; ptxas hoists them itself whatever the source's order). This probe
swaps the kernel of padvec's own specialization for a hand-written variant of the same launch (same
grid, block, dispatcher and teams): cos and sin loaded once, then a loop over the thread's heads that
ptxas does not unroll (``#pragma unroll U``), each iteration loading its head's two halves of x,
computing both steps with the trace's rounding steps and storing. Prints, per case, padvec as built,
each unroll factor (registers, blocks per SM, time), torch.compile and the copy, CUDA-graph replay with
the L2 flushed; every variant's output is compared with eager's first.
"""

from __future__ import annotations

import argparse

import thunder_padvec
import thunder
import torch

from thunder_padvec import codegen
from thunder_padvec.bench.cases import build, cases, executor
from thunder_padvec.explain import explain, fusions
from thunder_padvec.runtime import launch, nvrtc
from thunder_padvec.timing import copy_roofline_ms, gbps, graph_median_ms

from kernel_resources import ptxas  # registers from ptxas (this folder)

SEGMENT = """template <int G> PADVEC_FN void padvec_segment0(const padvec_args& args, const padvec_idx group,
    unsigned char* smem, const int tile_row, const int col) {{
  const padvec_idx c3 = col;
  padvec_idx rest = group;
  const padvec_idx c2 = rest % {T};
  rest /= {T};
  const padvec_idx c1 = rest % {planes};
  const padvec_idx c0 = rest / {planes};
  alignas(16) padvec_bf16 cos_lo[8], sin_lo[8], cos_hi[8], sin_hi[8];
  padvec_load_keep<8>(cos_lo, args.in1 + (c2 * {hs} + c3));
  padvec_load_keep<8>(sin_lo, args.in2 + (c2 * {hs} + c3));
  padvec_load_keep<8>(cos_hi, args.in1 + (c2 * {hs} + c3 + {half}));
  padvec_load_keep<8>(sin_hi, args.in2 + (c2 * {hs} + c3 + {half}));
  #pragma unroll {unroll}
  for (int k = 0; k < {rows}; ++k) {{
    const padvec_idx base = ((c0 * {nh} + c1 * {rows} + k) * {T} + c2) * {hs} + c3;
    alignas(16) padvec_bf16 x1[8], x2[8], lo[8], hi[8];
    padvec_load_keep<8>(x1, args.in0 + base);
    padvec_load_keep<8>(x2, args.in0 + base + {half});
    #pragma unroll
    for (int j = 0; j < 8; j += 2) {{
      float a[2], b[2];
      #pragma unroll
      for (int i = 0; i < 2; ++i) {{
        const float u = padvec_to_float(x1[j + i]), v = padvec_to_float(x2[j + i]);
        // x * cos + rotated * sin, each product rounded to bf16 and the sum too, as the trace does
        const float p = padvec_to_float(padvec_bf16_from_float(u * padvec_to_float(cos_lo[j + i])));
        const float q = padvec_to_float(padvec_bf16_from_float(-v * padvec_to_float(sin_lo[j + i])));
        const float r = padvec_to_float(padvec_bf16_from_float(v * padvec_to_float(cos_hi[j + i])));
        const float s = padvec_to_float(padvec_bf16_from_float(u * padvec_to_float(sin_hi[j + i])));
        a[i] = p + q;
        b[i] = r + s;
      }}
      padvec_pack_bf16x2(&lo[j], a[0], a[1]);
      padvec_pack_bf16x2(&hi[j], b[0], b[1]);
    }}
    padvec_store<8>(args.out0 + base, lo);
    padvec_store<8>(args.out0 + base + {half}, hi);
  }}
}}
"""


def _variant_body(body: str, case, rows: int, unroll: int) -> str:
    c = case.config
    start = body.index("template <int G> PADVEC_FN void padvec_segment0")
    end = body.index("PADVEC_FN void padvec_run")
    segment = SEGMENT.format(T=c.seq, planes=c.n_head // rows, hs=c.head_size, half=c.head_size // 2,
                             nh=c.n_head, rows=rows, unroll=unroll)
    return body[:start] + segment + "\n" + body[end:]


def _registers(source: str) -> str:
    try:
        return str(ptxas(source, "sm_90")[0])
    except RuntimeError as err:  # a probe's note, not its result: the timing goes on
        return f"unknown ({err})"


def equal_outputs(got, expected: tuple) -> bool:
    """Whether a call's output (a tensor or a tuple) equals ``expected``, output by output, bit for bit."""
    got = got if isinstance(got, tuple) else (got,)
    return len(got) == len(expected) and all(torch.equal(a, b) for a, b in zip(got, expected))


class Probe:
    """padvec built on one of the suite's cases, for swapping its kernel: ``spec`` (module and launch
    parameters to replace), ``report`` (its plan and launch), ``body`` (its rendered code), ``load(source)``
    (a kernel source compiled for this GPU and put in ``spec``), ``same()`` (every output equal to eager's,
    NaN-filled first), ``timed(label, note)`` (``same()``, then the CUDA-graph time beside the copy's),
    ``timed_as_built()`` and ``peers()`` (torch.compile and the copy, printed after the variants)."""

    def __init__(self, case, label_width: int) -> None:
        self.case, self.width = case, label_width
        self.fn, self.inputs, self.expected, self.io_bytes, _ = build(case)
        self.copy = copy_roofline_ms(self.io_bytes)
        self.jitted = thunder.jit(self.fn, executors=[thunder_padvec.padvec])
        self.jitted(*self.inputs)
        ((self.fusion, _),) = fusions(thunder.last_traces(self.jitted)[-1])
        self.spec, (self.report,) = self.fusion.last, explain(self.jitted)
        self.body = codegen.render(self.report.plan, self.report.launch)

    def load(self, source: str) -> launch.CudaModule:
        device = torch.cuda.current_device()
        major, minor = torch.cuda.get_device_capability(device)
        self.spec.module = launch.CudaModule(nvrtc.compile_cubin(source, f"sm_{major}{minor}"), device)
        return self.spec.module

    def timed_as_built(self) -> None:
        self.timed("padvec as built", f"registers {_registers(codegen.device_source(self.body))}, "
                                      f"blocks/SM {self.spec.module.resources(self.report.launch.block)[2]}")

    def _print(self, label: str, text: str) -> None:
        print(f"{self.case.id:36s} {label:{self.width}s} {text}", flush=True)

    def same(self) -> bool:
        """Whether every output equals eager's, filled with NaN before the launch (unwritten elements show)."""
        self.fusion._poison = True
        got = self.jitted(*self.inputs)
        self.fusion._poison = False
        return equal_outputs(got, self.expected)

    def timed(self, label: str, note: str = "") -> None:
        same = self.same()
        ms = graph_median_ms(lambda: self.jitted(*self.inputs))
        self._print(label, f"{ms * 1e3:7.1f} us {gbps(self.io_bytes, ms):6.0f} GB/s "
                           f"{self.copy / ms:6.1%} of copy  equal to eager: {same}  {note}")

    def peers(self) -> None:
        compiled = executor("torch.compile", self.case, self.fn)
        ms = graph_median_ms(lambda: compiled(*self.inputs))
        self._print("torch.compile", f"{ms * 1e3:7.1f} us {self.copy / ms:6.1%} of copy")
        self._print("copy", f"{self.copy * 1e3:7.1f} us")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", nargs="+", required=True)
    parser.add_argument("--unrolls", nargs="+", type=int, default=[1, 2])
    args = parser.parse_args()
    by_id = {case.id: case for case in cases()}
    for case_id in args.cases:
        probe = Probe(by_id[case_id], 18)
        spec, report = probe.spec, probe.report
        (seg,) = report.plan.segments
        rows = seg.rows_per_thread
        assert seg.tiled and seg.chunk == 8 and rows > 1 and len(seg.steps) == 2, report.launch
        built = spec.module
        probe.timed_as_built()
        for unroll in args.unrolls:
            source = codegen.device_source(_variant_body(probe.body, probe.case, rows, unroll))
            module = probe.load(source)
            probe.timed(f"loop, unroll {unroll}", f"registers {_registers(source)}, "
                                                  f"blocks/SM {module.resources(report.launch.block)[2]}")
        spec.module = built
        probe.timed("padvec again")
        probe.peers()

if __name__ == "__main__":
    main()
