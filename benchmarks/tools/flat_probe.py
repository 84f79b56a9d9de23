"""Would Triton's layout of the RoPE forward, or 12-byte lanes that exchange halves, pay on Phi-3-mini?

    python benchmarks/tools/flat_probe.py --cases Phi-3-mini-b1-rope-bfloat16-fwd --flat 1 2 --lanes12 1 2 4

When this probe was written, padvec's kernel for Phi-3-mini's rows of 96 gave a team of 6 threads a
row, both halves of it (two steps) for 4 heads sharing cos and sin: 80 registers, 3 blocks of 256 per
SM (teams of 6 lanes a half do not divide a warp, so its steps could not go side by side). What it
found made padvec take the first layout below itself (``vectorize.plan.lane_steps``, lanes that
reload); the probe stays to compare padvec with it. Two hand-written kernels take padvec's place here
(own grid), each checked against eager's output (NaN-filled first) and timed beside padvec as built,
torch.compile and the copy (CUDA-graph replay, L2 flushed):

- ``flat K``: Inductor's way. A thread per 16-byte chunk of the output (``K`` of them, a grid's stride
  apart): it loads its chunk of x, the chunk half a row away, and its chunk of cos and sin; 32-bit
  index arithmetic, no sharing between heads.
- ``lanes12 R``: 16 lanes a row, 6 elements (12 bytes, three 4-byte accesses) a lane, so that a half
  is 8 lanes and the other half's elements come from the lane 8 away (``__shfl_xor_sync``); ``R``
  heads a thread sharing the lane's cos and sin.
"""

from __future__ import annotations

import argparse
import dataclasses

from thunder_padvec import codegen
from thunder_padvec.bench.cases import cases

from loop_probe import Probe, _registers  # the case harness and ptxas's registers (this folder)

# x * cos + rotated * sin, each product rounded to bf16 and the sum too, as the trace does
COMBINE = """
PADVEC_FN float padvec_probe_rope(float u, float v, float c, float s, bool low) {
  const float p = padvec_to_float(padvec_bf16_from_float(u * c));
  const float q = padvec_to_float(padvec_bf16_from_float((low ? -v : v) * s));
  return p + q;
}
"""

FLAT = """
extern "C" __global__ void __launch_bounds__({block}) padvec_kernel(const padvec_args args) {{
  const unsigned int first = blockIdx.x * {block}u + threadIdx.x;
  alignas(16) padvec_bf16 x[{K}][8], y[{K}][8], cs[{K}][8], sn[{K}][8];
  unsigned int at[{K}];
  bool low[{K}];
  #pragma unroll
  for (int k = 0; k < {K}; ++k) {{
    const unsigned int i = first + k * {stride}u;
    const unsigned int row = i / {chunks}u;
    const unsigned int c = (i - row * {chunks}u) * 8u;
    const unsigned int t = row % {T}u;
    low[k] = c < {half}u;
    at[k] = row * {hs}u + c;
    {xload}<8>(x[k], args.in0 + at[k]);
    {xload}<8>(y[k], args.in0 + (low[k] ? at[k] + {half}u : at[k] - {half}u));
    {cload}<8>(cs[k], args.in1 + (t * {hs}u + c));
    {cload}<8>(sn[k], args.in2 + (t * {hs}u + c));
  }}
  #pragma unroll
  for (int k = 0; k < {K}; ++k) {{
    alignas(16) padvec_bf16 out[8];
    #pragma unroll
    for (int j = 0; j < 8; j += 2) {{
      padvec_pack_bf16x2(&out[j],
          padvec_probe_rope(padvec_to_float(x[k][j]), padvec_to_float(y[k][j]), padvec_to_float(cs[k][j]),
                            padvec_to_float(sn[k][j]), low[k]),
          padvec_probe_rope(padvec_to_float(x[k][j + 1]), padvec_to_float(y[k][j + 1]),
                            padvec_to_float(cs[k][j + 1]), padvec_to_float(sn[k][j + 1]), low[k]));
    }}
    padvec_store<8>(args.out0 + at[k], out);
  }}
}}
"""

LANES12 = """
extern "C" __global__ void __launch_bounds__({block}) padvec_kernel(const padvec_args args) {{
  const unsigned int lane = threadIdx.x % 16u;
  const unsigned int group = blockIdx.x * ({block}u / 16u) + threadIdx.x / 16u;
  const unsigned int t = group % {T}u;
  const unsigned int heads = group / {T}u;
  const unsigned int c = lane * 6u;
  const bool low = lane < 8u;
  alignas(16) padvec_bf16 cs[6], sn[6];
  #pragma unroll
  for (int i = 0; i < 6; i += 2) {{
    padvec_load_keep<2>(&cs[i], args.in1 + (t * {hs}u + c + i));
    padvec_load_keep<2>(&sn[i], args.in2 + (t * {hs}u + c + i));
  }}
  alignas(16) padvec_bf16 x[{R}][6], y[{R}][6];
  #pragma unroll
  for (int k = 0; k < {R}; ++k) {{
    const unsigned int at = ((heads * {R}u + k) * {T}u + t) * {hs}u + c;
    #pragma unroll
    for (int i = 0; i < 6; i += 2) {xload}<2>(&x[k][i], args.in0 + at + i);
  }}
  #pragma unroll
  for (int k = 0; k < {R}; ++k) {{
    const unsigned int* w = reinterpret_cast<const unsigned int*>(x[k]);
    unsigned int* v = reinterpret_cast<unsigned int*>(y[k]);
    #pragma unroll
    for (int i = 0; i < 3; ++i) v[i] = __shfl_xor_sync(0xffffffffu, w[i], 8);
  }}
  #pragma unroll
  for (int k = 0; k < {R}; ++k) {{
    const unsigned int at = ((heads * {R}u + k) * {T}u + t) * {hs}u + c;
    alignas(16) padvec_bf16 out[6];
    #pragma unroll
    for (int j = 0; j < 6; j += 2) {{
      padvec_pack_bf16x2(&out[j],
          padvec_probe_rope(padvec_to_float(x[k][j]), padvec_to_float(y[k][j]), padvec_to_float(cs[j]),
                            padvec_to_float(sn[j]), low),
          padvec_probe_rope(padvec_to_float(x[k][j + 1]), padvec_to_float(y[k][j + 1]), padvec_to_float(cs[j + 1]),
                            padvec_to_float(sn[j + 1]), low));
      padvec_store<2>(args.out0 + at + j, &out[j]);
    }}
  }}
}}
"""


def _head(body: str) -> str:
    return body[:body.index("template <int G> PADVEC_FN void padvec_segment0")] + COMBINE


def flat(body: str, config, K: int, block: int, keep_x: bool, keep_cs: bool) -> tuple[str, int]:
    chunks = config.head_size // 8
    total = config.batch * config.n_head * config.seq * chunks
    assert total % (K * block) == 0
    kernel = FLAT.format(block=block, K=K, stride=total // K, chunks=chunks, T=config.seq, hs=config.head_size,
                         half=config.head_size // 2,
                         xload="padvec_load_keep" if keep_x else "padvec_load",
                         cload="padvec_load_keep" if keep_cs else "padvec_load")
    return _head(body) + kernel, total // (K * block)


def lanes12(body: str, config, R: int, block: int, keep_x: bool) -> tuple[str, int]:
    assert config.head_size == 96 and config.n_head % R == 0
    groups = config.batch * config.n_head // R * config.seq
    assert (groups * 16) % block == 0
    kernel = LANES12.format(block=block, R=R, T=config.seq, hs=config.head_size,
                            xload="padvec_load_keep" if keep_x else "padvec_load")
    return _head(body) + kernel, groups * 16 // block


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", nargs="+", required=True)
    parser.add_argument("--flat", nargs="*", type=int, default=[1, 2], help="chunks a thread")
    parser.add_argument("--lanes12", nargs="*", type=int, default=[1, 2, 4], help="heads a thread")
    parser.add_argument("--blocks", nargs="+", type=int, default=[128, 256])
    args = parser.parse_args()
    by_id = {case.id: case for case in cases()}
    for case_id in args.cases:
        probe = Probe(by_id[case_id], 30)
        spec = probe.spec
        built, params = spec.module, spec.params
        config = probe.case.config
        probe.timed_as_built()
        variants = []
        for block in args.blocks:
            for K in args.flat:
                for keep_x, keep_cs in ((False, False), (False, True), (True, True)):
                    label = f"flat k{K} b{block} x{'kept' if keep_x else 'plain'} cs{'kept' if keep_cs else 'plain'}"
                    variants.append((label, block, flat(probe.body, config, K, block, keep_x, keep_cs)))
            for R in args.lanes12:
                for keep_x in (True, False):
                    label = f"lanes12 r{R} b{block} x{'kept' if keep_x else 'plain'}"
                    variants.append((label, block, lanes12(probe.body, config, R, block, keep_x)))
        for label, block, (variant, grid) in variants:
            source = codegen.device_source(variant)
            module = probe.load(source)
            spec.params = dataclasses.replace(params, grid=grid, block=block)
            probe.timed(label, f"registers {_registers(source)}, blocks/SM {module.resources(block)[2]}, grid {grid}")
        spec.module, spec.params = built, params
        probe.timed("padvec again")
        probe.peers()


if __name__ == "__main__":
    main()
