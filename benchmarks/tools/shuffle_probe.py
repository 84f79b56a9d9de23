"""Would a thread per 16-byte chunk, with the rotated half taken from a neighbour lane, pay on
LitGPT's full-rotary RoPE forward?

    python benchmarks/tools/shuffle_probe.py --cases Llama-2-7b-b2-rope-bfloat16-fwd --rows 2 4 8

padvec's kernel for these rows gives a thread both halves of a row (two 8-lane steps) for 4 heads,
which share cos and sin: 12 hoisted 16-byte loads, 73-80 registers, 3 blocks of 256 per SM. Here a
team of ``head_size / 8`` lanes takes a row, one chunk per lane, for ``rows`` heads sharing the lane's
chunk of cos and sin: ``rows + 2`` loads per thread. The rotated half of x is the chunk of the lane
half a team away: exchanged with ``__shfl_xor_sync`` ("shfl"), or loaded again from the L1/L2
("load", Triton's way). The probe swaps padvec's kernel for the variant (its own grid), checks the
output against eager's (NaN-filled first) and prints registers, blocks per SM and CUDA-graph replay
times with the L2 flushed, beside padvec as built, torch.compile and the copy.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools

from thunder_padvec import codegen
from thunder_padvec.bench.cases import cases

from loop_probe import Probe, _registers  # the case harness and ptxas's registers (this folder)

KERNEL = """
extern "C" __global__ void __launch_bounds__({block}, {min_blocks}) padvec_kernel(const padvec_args args) {{
  const int lane = threadIdx.x % {team};
  const padvec_idx group = (padvec_idx)blockIdx.x * ({block} / {team}) + threadIdx.x / {team};
  const padvec_idx c3 = lane * 8;
  const padvec_idx c2 = group % {T};
  const padvec_idx rest = group / {T};
  const padvec_idx c1 = rest % {planes};
  const padvec_idx c0 = rest / {planes};
  const bool low = lane < {team} / 2;
  alignas(16) padvec_bf16 cs[8], sn[8];
  padvec_load_keep<8>(cs, args.in1 + (c2 * {hs} + c3));
  padvec_load_keep<8>(sn, args.in2 + (c2 * {hs} + c3));
  alignas(16) padvec_bf16 x[{rows}][8];
  alignas(16) padvec_bf16 y[{rows}][8];
  #pragma unroll
  for (int k = 0; k < {rows}; ++k) {{
    const padvec_idx base = ((c0 * {nh} + c1 * {rows} + k) * {T} + c2) * {hs};
    {xload}<8>(x[k], args.in0 + base + c3);
#if {shuffle}
  }}
  #pragma unroll
  for (int k = 0; k < {rows}; ++k) {{
    const unsigned int* w = reinterpret_cast<const unsigned int*>(x[k]);
    unsigned int* v = reinterpret_cast<unsigned int*>(y[k]);
    #pragma unroll
    for (int i = 0; i < 4; ++i) v[i] = __shfl_xor_sync(0xffffffffu, w[i], {team} / 2);
  }}
#else
    padvec_load_keep<8>(y[k], args.in0 + base + (low ? c3 + {half} : c3 - {half}));
  }}
#endif
  #pragma unroll
  for (int k = 0; k < {rows}; ++k) {{
    const padvec_idx base = ((c0 * {nh} + c1 * {rows} + k) * {T} + c2) * {hs};
    alignas(16) padvec_bf16 out[8];
    #pragma unroll
    for (int j = 0; j < 8; j += 2) {{
      float a[2];
      #pragma unroll
      for (int i = 0; i < 2; ++i) {{
        const float u = padvec_to_float(x[k][j + i]), v = padvec_to_float(y[k][j + i]);
        // x * cos + rotated * sin, each product rounded to bf16 and the sum too, as the trace does
        const float p = padvec_to_float(padvec_bf16_from_float(u * padvec_to_float(cs[j + i])));
        const float q = padvec_to_float(padvec_bf16_from_float((low ? -v : v) * padvec_to_float(sn[j + i])));
        a[i] = p + q;
      }}
      padvec_pack_bf16x2(&out[j], a[0], a[1]);
    }}
    padvec_store<8>(args.out0 + base + c3, out);
  }}
}}
"""


def _variant(body: str, case, rows: int, shuffle: bool, block: int, min_blocks: int,
             keep_x: bool = True) -> tuple[str, int]:
    c = case.config
    team = c.head_size // 8
    assert 32 % team == 0 or team % 32 == 0, "teams must not straddle warps"
    start = body.index("template <int G> PADVEC_FN void padvec_segment0")
    kernel = KERNEL.format(T=c.seq, planes=c.n_head // rows, hs=c.head_size, half=c.head_size // 2, nh=c.n_head,
                           rows=rows, team=team, block=block, min_blocks=min_blocks, shuffle=int(shuffle),
                           xload="padvec_load_keep" if keep_x else "padvec_load")
    groups = c.batch * (c.n_head // rows) * c.seq
    assert (groups * team) % block == 0
    return body[:start] + kernel, groups * team // block


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", nargs="+", required=True)
    parser.add_argument("--rows", nargs="+", type=int, default=[2, 4])
    parser.add_argument("--blocks", nargs="+", type=int, default=[256])
    parser.add_argument("--min-blocks", nargs="+", type=int, default=[0])
    parser.add_argument("--plain-x", action="store_true", help="also x loaded without the evict_last policy")
    parser.add_argument("--loads", action="store_true", help="also the variant that loads the rotated half again")
    args = parser.parse_args()
    by_id = {case.id: case for case in cases()}
    for case_id in args.cases:
        probe = Probe(by_id[case_id], 22)
        spec = probe.spec
        built, params = spec.module, spec.params
        probe.timed_as_built()
        for shuffle in (True, False) if args.loads else (True,):
            for rows in args.rows:
                for block, min_blocks, keep_x in itertools.product(args.blocks, args.min_blocks,
                                                                   (True, False) if args.plain_x else (True,)):
                    variant, grid = _variant(probe.body, probe.case, rows, shuffle, block, min_blocks, keep_x)
                    source = codegen.device_source(variant)
                    module = probe.load(source)
                    spec.params = dataclasses.replace(params, grid=grid, block=block)
                    probe.timed(f"{'shfl' if shuffle else 'load'} r{rows} b{block} m{min_blocks}"
                                f"{'' if keep_x else ' x plain'}",
                                f"registers {_registers(source)}, blocks/SM {module.resources(block)[2]}, grid {grid}")
        spec.module, spec.params = built, params
        probe.timed("padvec again")
        probe.peers()

if __name__ == "__main__":
    main()
