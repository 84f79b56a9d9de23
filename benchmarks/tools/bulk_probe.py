"""Would Hopper's bulk stores pay on the grouped-query qkv forward?

    python benchmarks/tools/bulk_probe.py --cases Llama-3-8B-b1-qkv_split_rope-bfloat16-fwd
    THUNDER_PADVEC_EMULATE=1 python benchmarks/tools/bulk_probe.py --emulate  # the kernels' outputs, no GPU

The grouped-query forward writes twice what it reads: each thread stores q for its group's heads and
the roped k and v once per head of the group (12 stores of 16 bytes a thread for Llama-3's 4 heads a
group), and ncu found its warps waiting on those stores (drain, MIO throttle). Here a block's 256
threads take 16 tokens of one group, 16 threads a row of 128 (8 elements each, the other half's chunk
from the lane 8 away), as padvec's kernel does. The hand-written variants then differ only in how the
results reach global memory:

- ``regs``: every store from the registers, as padvec does;
- ``bulk kv``: the roped k and v written once to shared memory, then copied to each head's output by
  the copy engine (``cp.async.bulk``, 4 KB a copy: a head's 16 tokens are contiguous in the output);
- ``bulk all``: q's heads staged and copied the same way too.

Each in the default block order (a group's tiles one after another) and in plane order (consecutive
blocks take the same tokens of every group, sharing cos and sin). Every variant's outputs are checked
against eager's (NaN-filled first) and timed beside padvec as built, torch.compile and the copy (CUDA-graph
replay, L2 flushed). The hand-written kernels write q, k and v row-major, as eager lays them out, so padvec
builds them here with ``TUNING.source_orders`` off (by default it writes them heads inner to tokens, as
qkv holds them). ``--emulate`` runs the variants on the CPU through the host prelude at a short
sequence and checks their outputs there (the bulk copies become each thread's own stores at the
addresses the copies write).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import itertools

import thunder_padvec
import thunder

from thunder_padvec import codegen
from thunder_padvec.bench.cases import build, cases
from thunder_padvec.explain import explain, fusions

from explore import _apply, _restore  # the knobs (this folder)
# padvec's prelude and arguments, then the trace's rounding steps of RoPE (padvec_probe_rope); the harness
from flat_probe import _head
from loop_probe import Probe, _registers, equal_outputs


HELPERS = """
PADVEC_FN void probe_roped(padvec_bf16* out, const padvec_bf16* x, const padvec_bf16* y, const padvec_bf16* cs,
                           const padvec_bf16* sn, bool low) {
  #pragma unroll
  for (int e = 0; e < 8; e += 2)
    padvec_pack_bf16x2(&out[e],
        padvec_probe_rope(padvec_to_float(x[e]), padvec_to_float(y[e]), padvec_to_float(cs[e]),
                          padvec_to_float(sn[e]), low),
        padvec_probe_rope(padvec_to_float(x[e + 1]), padvec_to_float(y[e + 1]), padvec_to_float(cs[e + 1]),
                          padvec_to_float(sn[e + 1]), low));
}

// a row's other half: lane ^ 8 of the 16 that share it (read again from memory on the host)
PADVEC_FN void probe_partner(padvec_bf16* y, const padvec_bf16* x, const padvec_bf16* at, bool low) {
#ifdef __CUDA_ARCH__
  const unsigned int* from = reinterpret_cast<const unsigned int*>(x);
  unsigned int* to = reinterpret_cast<unsigned int*>(y);
  #pragma unroll
  for (int w = 0; w < 4; ++w) to[w] = __shfl_xor_sync(0xffffffffu, from[w], 8);
#else
  padvec_load<8>(y, low ? at + 64 : at - 64);
#endif
}
"""

KERNEL = """
PADVEC_FN void padvec_run(const int phase, const padvec_args& args, unsigned char*) {{
  if (phase != 1) return;
#ifdef __CUDA_ARCH__
  __shared__ alignas(128) unsigned char stage[{slots} * {tile_bytes}];
#endif
  const unsigned int tid = threadIdx.x;
  const unsigned int tile = {tile};
  const unsigned int bg = {bg};
  const unsigned int b = bg / {G}u, j = bg % {G}u;
  const unsigned int t = tile * {TOK}u + tid / 16u;
  const unsigned int lane = tid % 16u;
  const bool low = lane < 8u;
  const unsigned int c = lane * 8u;
  const padvec_bf16* row = args.in0 + ((b * {T}u + t) * {W}u + j * {QPK2}u * 128u + c);
  alignas(16) padvec_bf16 cs[8], sn[8], x[{QPK2}][8], y[{QPK1}][8], out[8];
  padvec_load_keep<8>(cs, args.in1 + (t * 128u + c));
  padvec_load_keep<8>(sn, args.in2 + (t * 128u + c));
  #pragma unroll
  for (int i = 0; i < {QPK2}; ++i) padvec_load<8>(x[i], row + i * 128u);
  #pragma unroll
  for (int i = 0; i < {QPK1}; ++i) probe_partner(y[i], x[i], row + i * 128u, low);
  // a head's 16 tokens are one contiguous tile of its output: thread tid holds elements [8 tid, 8 tid + 8)
  const unsigned int first_head = b * {NH}u + j * {QPK}u;
  const unsigned int tile_at = tile * {TOK}u * 128u;
{body}
}}

extern "C" __global__ void __launch_bounds__({block}) padvec_kernel(const padvec_args args) {{
  padvec_run(1, args, nullptr);
}}
"""


def _put(dsts: list[str], value: str, slot: int | None, tile_bytes: int) -> str:
    """Stores a thread's 8 elements of a head's tile to each of ``dsts``: from the registers, or once into
    a stage slot that bulk copies take to them (on the host: the thread's own stores at their addresses)."""
    stores = "".join(f"  padvec_store<8>({dst} + tid * 8u, {value});\n" for dst in dsts)
    if slot is None:
        return stores
    return ("#ifdef __CUDA_ARCH__\n"
            f"  padvec_store<8>(reinterpret_cast<padvec_bf16*>(stage + {slot} * {tile_bytes}) + tid * 8u, {value});\n"
            f"#else\n{stores}#endif\n")


def kernel(config, outs: dict[str, str], stage_kv: bool, stage_q: bool, plane: bool, tokens: int) -> tuple[str, int]:
    """``(source, grid)`` of a variant, ``tokens`` a block (16 threads each); ``outs``: the argument of each
    of q, k and v."""
    c = config
    assert c.head_size == 128 and c.rope_n_elem == 128 and c.seq % tokens == 0
    qpk, groups = c.n_head // c.n_query_groups, c.batch * c.n_query_groups
    tiles, tile_bytes = c.seq // tokens, tokens * 128 * 2

    def dst(name: str, head: str) -> str:
        return f"(args.{outs[name]} + ((first_head + {head}) * {c.seq}u * 128u + tile_at))"

    body, copies, slot = "", [], 0
    for i in range(qpk):
        body += f"  probe_roped(out, x[{i}], y[{i}], cs, sn, low);\n"
        body += _put([dst("q", str(i))], "out", slot if stage_q else None, tile_bytes)
        if stage_q:
            copies.append((slot, dst("q", str(i))))
            slot += 1
    body += f"  probe_roped(out, x[{qpk}], y[{qpk}], cs, sn, low);\n"
    for name, value in (("k", "out"), ("v", f"x[{qpk + 1}]")):
        dsts = [dst(name, str(i)) for i in range(qpk)]
        body += _put(dsts, value, slot if stage_kv else None, tile_bytes)
        if stage_kv:
            copies += [(slot, d) for d in dsts]
            slot += 1
    if copies:
        assert len(copies) <= 32
        body += ("#ifdef __CUDA_ARCH__\n"
                 "  asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\");\n"
                 "  __syncthreads();\n"
                 f"  if (tid < {len(copies)}u) {{\n"
                 "    const padvec_bf16* to = nullptr;\n"
                 "    unsigned int from = 0;\n")
        for k, (s, d) in enumerate(copies):
            body += (f"    if (tid == {k}u) {{ to = {d}; "
                     f"from = (unsigned int)__cvta_generic_to_shared(stage + {s} * {tile_bytes}); }}\n")
        body += ("    asm volatile(\"cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\"\n"
                 f"                 :: \"l\"(to), \"r\"(from), \"n\"({tile_bytes}) : \"memory\");\n"
                 "    asm volatile(\"cp.async.bulk.commit_group;\" ::: \"memory\");\n"
                 "    asm volatile(\"cp.async.bulk.wait_group.read 0;\" ::: \"memory\");\n"
                 "  }\n"
                 "#endif\n")
    order = (f"blockIdx.x / {groups}u", f"blockIdx.x % {groups}u") if plane else (
        f"blockIdx.x % {tiles}u", f"blockIdx.x / {tiles}u")
    source = HELPERS + KERNEL.format(slots=max(slot, 1), tile_bytes=tile_bytes, block=16 * tokens, tile=order[0],
                                     bg=order[1], G=c.n_query_groups, TOK=tokens, T=c.seq,
                                     W=(c.n_head + 2 * c.n_query_groups) * 128, QPK=qpk, QPK1=qpk + 1, QPK2=qpk + 2,
                                     NH=c.n_head, body=body)
    return source, groups * tiles


VARIANTS = [(f"{name} {'plane' if plane else 'rows'} t{tokens}", kv, q, plane, tokens)
            for tokens in (16, 32) for plane in (False, True)
            for name, kv, q in (("regs", False, False), ("bulk kv", True, False), ("bulk all", True, True))
            if tokens == 16 or plane]


def _outputs(check) -> dict[str, str]:
    """Which argument of padvec's kernel holds q, k and v: the first assignment under which the ``regs``
    variant's outputs equal eager's (``check(outs)``)."""
    for names in itertools.permutations(("out0", "out1", "out2")):
        outs = dict(zip("qkv", names))
        if check(outs):
            return outs
    raise AssertionError("no assignment of the outputs gives eager's")


@contextlib.contextmanager
def row_major_outputs():
    """padvec's outputs laid out row-major, as the hand-written kernels write them (the knob as
    ``explore.py`` sets it)."""
    old = _apply("source_orders=0")
    try:
        yield
    finally:
        _restore(old)


def emulate(seq: int, batch: int = 2) -> list[bool]:
    """The variants on the CPU (host prelude) at ``seq`` tokens, the grouped-query cases of ``batch``: each
    variant's outputs equal to eager's or not."""
    from thunder_padvec.runtime import host

    results = []

    with thunder_padvec.emulation(), row_major_outputs():
        for case in cases():
            c = case.config
            if case.form != "qkv_split_rope" or case.pass_ != "fwd" or c.n_query_groups == c.n_head or c.batch != batch:
                continue
            config = dataclasses.replace(c, seq=seq)
            case = dataclasses.replace(case, config=config)
            fn, inputs, expected, _, _ = build(case, device="cpu")
            jitted = thunder.jit(fn, executors=[thunder_padvec.padvec])
            jitted(*inputs)
            ((fusion, _),) = fusions(thunder.last_traces(jitted)[-1])
            spec, (report,) = fusion.last, explain(jitted)
            head = _head(codegen.render(report.plan, report.launch))

            def run(outs, kv, q, plane, tokens) -> bool:
                source, grid = kernel(config, outs, kv, q, plane, tokens)
                spec.module = host.HostModule(host.compile_shared_object(codegen.host_source(head + source)))
                spec.params = dataclasses.replace(spec.params, grid=grid, block=16 * tokens)
                fusion._poison = True
                same = equal_outputs(jitted(*inputs), expected)
                fusion._poison = False
                return same

            outs = _outputs(lambda outs: run(outs, False, False, False, 16))
            for label, *variant in VARIANTS:
                same = run(outs, *variant)
                results.append(same)
                print(f"{case.id} (T {seq}) {label:20s} {outs} equal to eager: {same}", flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", nargs="*", default=[])
    parser.add_argument("--emulate", action="store_true", help="check the variants' outputs on the CPU")
    parser.add_argument("--seq", type=int, default=64, help="the sequence under --emulate")
    args = parser.parse_args()
    if args.emulate:
        emulate(args.seq)
        return
    with row_major_outputs():
        _probe(args.cases)


def _probe(case_ids: list[str]) -> None:
    by_id = {case.id: case for case in cases()}
    for case_id in case_ids:
        probe = Probe(by_id[case_id], 20)
        spec = probe.spec
        built, params = spec.module, spec.params
        config = probe.case.config
        head = _head(probe.body)

        def load(outs, kv, q, plane, tokens) -> str:
            source, grid = kernel(config, outs, kv, q, plane, tokens)
            source = codegen.device_source(head + source)
            probe.load(source)
            spec.params = dataclasses.replace(params, grid=grid, block=16 * tokens)
            return source

        def regs(outs) -> bool:
            load(outs, False, False, False, 16)
            return probe.same()

        spec.module, spec.params = built, params
        probe.timed_as_built()
        outs = _outputs(regs)
        for label, *variant in VARIANTS:
            source = load(outs, *variant)
            probe.timed(label, f"registers {_registers(source)}, "
                               f"blocks/SM {spec.module.resources(spec.params.block)[2]}")
        spec.module, spec.params = built, params
        probe.timed("padvec again")
        probe.peers()


if __name__ == "__main__":
    main()
