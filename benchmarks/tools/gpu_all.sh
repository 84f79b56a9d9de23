#!/usr/bin/env bash
# GPU-machine checks and measurements, by part (all parts, in this order, when none is named):
#   tests      pytest -m gpu but the random programs (tests/test_programs.py), about 250 s
#   programs   the random programs' GPU tests, about 300 s (budgets from PADVEC_GPU_PROGRAMS, default 80,
#              PADVEC_GPU_GRAD_PROGRAMS, default 40, PADVEC_GPU_PROLOGUES, default 20); both parts together
#              passed 540 s on 2026-12-05, so one call of the device tool runs one of them and the next the other
#   fresh      the GPU tests added or changed last (named in FRESH below), first, so that a call cut short still
#              reports them, about 40 s
#   verify     both in one call: tests (330 s at most), then the random programs at half their budgets (40, 20
#              and 10 examples, 200 s at most): one machine start fewer, where device time is short
#   notebooks  the notebooks executed on the GPU, written back under $OUT/notebooks (needs .whl/nb, below)
#   fwd, bwd   the RoPE suite's forward and forward+backward cases, each form on its own (run JSONs under $OUT);
#              fwd_rope, fwd_qkv, bwd_rope, bwd_qkv: one form alone (each part takes up to 330 s, and on a
#              machine with a slow host bwd_qkv alone takes 270 s: then run bwd_rope and bwd_qkv in two calls; on
#              an H100 of 2026-12-06 bwd_qkv passed 320 s). Give the device call 40 s more than the parts' limits:
#              a part stopped by its own limit still writes its run JSON, a call cut short by the device does not
#   bwd_short  the qkv form's fwd+bwd rows short of 95% of the per-pass copies on the H200 (2026-12-06): Llama-3-8B,
#              Mistral-7B and Phi-3-mini, both batches, run_bwd_short.json (about 120 s; 270 s on the H200)
#   bwd_mha    the qkv form's fwd+bwd rows of the models with a key head per query head (Llama-2-7b, Gemma-7b, phi-2,
#              pythia-160m), both batches, run_bwd_mha.json
#   fwd_qkv_rowmajor the qkv form's forward rows with every output row-major (PADVEC_TUNING=eager_orders=0,
#              read by benchmarks/conftest.py; the default since 2026-12-06 is the order PyTorch gives them),
#              run_fwd_qkv_rowmajor.json
#   seed       the suite's seed rows alone, both passes
#   gptj       the suite's GPT-J-6B rows alone (interleaved rotary), both passes
#   gathers    tools/explore.py on the GPT-J-6B rows, narrow loads moved from registers (vectorize.gathers) against
#              loaded from memory (GATHERS=0), the log under $OUT/gathers.log
#   tune       tools/tune_probe.py, five fresh first calls each, on the RoPE forwards whose pick sat at the
#              edge of the tuner's margin (Llama-3-8B b1 and b2, Gemma-7b b1), the log under $OUT/tune-probe.log
#   host       the host-path benchmark
#   compile    tools/compile_probe.py: a first call's launch variants compiled one after the other and side by
#              side (the machine's CPUs), the log under $OUT/compile-probe.log
#   block      the Llama-style block benchmark (benchmarks/test_block.py), both cases; block2, block3: the
#              Llama-2-7b or the Llama-3-8B case alone (each compiles torch.compile's and Thunder's executors
#              afresh; a part runs within 560 s)
#   leads      tools/explore.py on the rows torch.compile led on the H100 (2026-12-05: the multi-head qkv forwards,
#              the batch-2 LitGPT RoPE forwards) and GPT-J's fwd+bwd, with one or two rows a thread
#              (MAX_ROWS_PER_THREAD) and without steps side by side (LANE_STEPS=0), the log under $OUT/leads.log
#   leads2     tools/explore.py on the forwards behind torch.compile on the H100 (rows2.log of 2026-12-05): at most
#              two rows a thread, and wider teams (team_scale=2) with one, two or four, the log under $OUT/leads2.log
#   apart      tools/explore.py on LitGPT's RoPE forwards, heads apart taking two rows a thread (the default since
#              2026-12-05) against four (APART_ROWS=4), the log under $OUT/apart.log (about 100 s)
#   bwdrows    tools/explore.py on the RoPE backwards that planned four rows a thread and take one (Llama-2 b1 and b2,
#              Llama-3 b1, Gemma b1, Phi-3-mini b1), against at most two (MAX_ROWS_PER_THREAD=2: 61-64 registers,
#              4 blocks per SM, where one row has 39 and 6), the log under $OUT/bwdrows.log (about 200 s)
#   pairs      tools/explore.py on GPT-J-6B's rows, the rows cut along the pairs' dim into the rotated and the passed
#              features (the default since 2026-12-05) against whole rows (PAIR_PIECES=0), the log under $OUT/pairs.log
#   rows2      tools/explore.py on every bf16 forward row but GPT-J's, as planned against at most two rows a thread
#              (MAX_ROWS_PER_THREAD=2; the H100 of 2026-12-05 ran the batch-2 RoPE forwards 0.8-1.7% faster so),
#              the log under $OUT/rows2.log (about 450 s)
#   hprobe     tools/host_probe.py: the fusion call's host time by piece, the log under $OUT/host-probe.log
#   flat       tools/flat_probe.py on the RoPE forwards that trail torch.compile on the H100 (2026-12-06): Inductor's
#              layout written by hand (a thread per 16-byte chunk) against padvec as built, the log under
#              $OUT/flat-probe.log (on the H200 of 2026-12-06 it was no faster on three of these rows)
#   bulk       tools/bulk_probe.py on the grouped-query qkv forwards (Llama-3-8B and Mistral-7B, b1 and b2): k, v and q
#              staged in shared memory and copied out by bulk copies (cp.async.bulk) against stored from the
#              registers, hand-written, beside padvec as built, the log under $OUT/bulk-probe.log
#   sumfirst   tools/sumfirst_probe.py on the grouped-query qkv fwd+bwd rows (Llama-3-8B, Mistral-7B, b1 and b2): the
#              program as written against RoPE on k before its expand (Thunder's backward then sums a group's heads
#              before RoPE's backward), under padvec and torch.compile, the log under $OUT/sumfirst-probe.log
#   reloads    tools/explore.py on the rows behind torch.compile on the H100 (2026-12-06), as planned against one chunk of
#              one row a lane with the other half's chunk loaded again (ALL_RELOADS=1: the flat probe's layout,
#              which beat padvec's there with x kept), the log under $OUT/reloads.log
#   combos     tools/explore.py on the qkv forwards short of 95% of the copy on the H200 (2026-12-06) and Llama-2 b1's,
#              the tuner off, each pair of evict_last hints (keep: every input; reused: cos and sin only, KEEP_ONCE=0)
#              and block order (row order, plane order), beside the tuner's pick, the log under $OUT/combos.log
#   combos_bwd the same on the backward kernels (padvec1) of the grouped-query qkv fwd+bwd rows, $OUT/combos_bwd.log
#   prefetch   tools/explore.py on the backward kernels (padvec1) of the grouped-query qkv fwd+bwd rows (Llama-3-8B b1,
#              Mistral-7B b1 and b2): as built against each hoisted load's line asked of the L2 first (prefetch=1,
#              fitted with schedule.PREFETCH_SLACK more registers: the build keeps 3 blocks per SM), twice in turn, the
#              log under $OUT/prefetch.log
#   prefetch_tf the same rows with the first call's timing off (tune_hints=0), the four builds of the two knobs that
#              the H200 of 2026-12-07 could not tell apart: as built, tokens first (tokens_first=1), the prefetches, and
#              both, twice in turn, the log under $OUT/prefetch_tf.log (about 250 s on the H200)
#   prefetch_var the grouped-query qkv fwd+bwd rows (Llama-3-8B and Mistral-7B, b1 and b2), the first call's timing on,
#              as built against the L2 prefetches as launch variants of their own (prefetch_variant=1: the default and
#              tokens first, each also with the prefetches), the backward only, twice in turn, $OUT/prefetch_var.log
#   layout     tools/layout_probe.py on qkv forwards: the program against its layout ops alone (no RoPE, the same
#              strided reads and writes), under padvec, torch.compile and eager, the log under $OUT/layout.log
#   blocks     tools/explore.py on the qkv forwards of Llama-3-8B b1 (grouped) and Llama-2-7b b1 (all heads), blocks of
#              256 threads (16 rows) against 512 and 1024 (STAGED_WARPS=16, 32), the log under $OUT/blocks.log
#   inductor   torch.compile's generated code (TORCH_LOGS=output_code) for Llama-2-7b b1's qkv forward, under
#              $OUT/inductor.log
#   orders     tools/explore.py on the qkv forwards of the configurations with a key and value head per query head
#              (rows of whole cache lines, and Phi-3-mini's of 192 bytes, which stay row-major): outputs in the
#              memory order PyTorch gives them (the default: q and k with heads inner to tokens, as qkv holds
#              them) against row-major (eager_orders=0), the log under $OUT/orders.log
#   tokens     tools/explore.py on the grouped-query qkv forwards (Llama-3-8B, Mistral-7B, b1 and b2) and their
#              fwd+bwd at b1: q, k and v heads inner to tokens, in qkv's order (source_orders, the default since
#              2026-12-06) against the same laid out as eager does (row-major, a plane per head: source_orders=0),
#              the log under $OUT/tokens.log
#   bwd_qkv_outputs the qkv form's fwd+bwd rows with each executor's cotangents laid out as its forward's outputs
#              are (PADVEC_COTANGENTS=outputs: as an attention's backward returns them in training; the suite
#              draws them row-major otherwise), run_bwd_qkv_outputs.json; the table shows them as rows of their own
#   fwd_qkv_eager the qkv form's forward rows with the grouped form's q, k and v as eager lays them out
#              (source_orders off), run_fwd_qkv_eager.json
#   tiles_bwd  tools/explore.py on the backward kernels (padvec1) of the qkv form's fwd+bwd at batch 1 (Phi-3-mini,
#              Llama-3-8B, Mistral-7B, Llama-2-7b): every segment's rows in tiles of 1, 8, 32 and 128 tokens across
#              every head (codegen.render.ALL_TOKEN_TILES) against the default, the log under $OUT/tiles_bwd.log
#   tiles_fwd  the same on qkv forwards (Llama-3-8B, Mistral-7B, Phi-3-mini b1) and phi-2 b2's RoPE forward,
#              tiles of 1, 8 and 32 tokens, the log under $OUT/tiles_fwd.log
#   tiles_rule tools/explore.py on the rows whose kernels take tiles of 4 tokens by the rule (the qkv form of
#              Phi-3-mini and phi-2, rows ending inside a line: codegen.render._rows_apart_along_tokens), the
#              default against no tiles (TOKEN_TILES=0), the log under $OUT/tiles_rule.log
#   ncu_bwd    tools/gpu_ncu.sh on the qkv form's fwd+bwd at batch 1 of Llama-3-8B and Mistral-7B (grouped queries),
#              Phi-3-mini and Llama-2-7b (a query head per key head), clean L2: time, DRAM bytes and throughput, issue
#              slots busy, instructions and the warps' stall reasons per issued instruction for each kernel
#              (forward, then backward, twice a case; the tuner off: the default launch variants), the log under
#              $OUT/ncu-bwd.log (about 150 s)
#   ncu_small  tools/gpu_ncu.sh on the RoPE forwards short of 95% of the copy (phi-2 and pythia-160m, b1 and b2),
#              padvec's kernel and torch.compile's side by side, clean L2: time, DRAM bytes and throughput, warps
#              active, SM cycles active against the kernel's elapsed cycles (its ramp and tail), grid and registers (the
#              tuner off), the log under $OUT/ncu-small.log (about 60 s)
#   hunt       tools/hunt.py: random programs (forward, and gradients), partial rotations and RoPE prologues
#              drawn anew (not the suite's fixed examples), 110 + 90 + 50 + 110 s, the log under $OUT/hunt.log
#   hunt_after the same with torch.compile's executor after padvec (--after torchcompile), $OUT/hunt_after.log
# A part runs within its own time limit, so that one call of the device tool (10 minutes) can hold several.
# Wheels: `bash ../shared/device/fetch_wheels.sh liger-kernel`, then for the notebooks the Jupyter stack for the GPU
# machine's Python 3.12 into .whl/nb (about 17 MB), less what that machine has (packaging, typing_extensions,
# python-dateutil): pip download --only-binary=:all: --python-version 3.12 --implementation cp --platform
# manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 -d .whl/nb nbclient
# nbformat ipykernel && rm .whl/nb/{packaging,typing_extensions,python_dateutil}-*.whl
# Carry ".whl". Results files: python benchmarks/report.py $files/run_*.json back home.
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 THUNDER_PADVEC_CACHE_DIR=/tmp/padvec-cache
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
# the machine's pieces checked (python -m thunder_padvec doctor), printed only where one failed
python3 -m thunder_padvec doctor > $OUT/doctor.log 2>&1 || cat $OUT/doctor.log

suite() {  # suite <name> <-k expression> [seconds]
  timeout -s INT ${3:-330} python3 -m pytest benchmarks -q -p no:cacheprovider --benchmark-only \
    --benchmark-json=$OUT/run_$1.json -k "$2" 2>&1 | tee -a $OUT/suite.log | tail -1
}

declare -A SELECT=([fwd_rope]="not qkv and not bwd and not test_host and not test_block" [fwd_qkv]="qkv and not bwd"
                   [bwd_rope]="not qkv and bwd and not test_host" [bwd_qkv]="qkv and bwd"
                   [bwd_short]="qkv and bwd and (Llama-3 or Mistral or Phi-3)"
                   [bwd_mha]="qkv and bwd and (Llama-2 or Gemma or phi-2 or pythia)" [seed]="seed" [gptj]="gptj"
                   [host]="test_host" [block]="test_block" [block2]="test_block and Llama-2"
                   [block3]="test_block and Llama-3")

# the GPU tests added or changed last: qkv's rows taken tokens first, a launch variant, and rows taken in tiles of
# tokens (tests/test_training.py), the first call timing its launch variants (tests/test_gpu.py), the gradients of
# the qkv form with q and k in eager's order (qkv-mha, tests/test_training.py), random chains of layout ops on
# strided inputs (tests/test_views.py), the grouped backward with the L2 prefetches (l2_first, tests/test_training.py);
# a session that adds or changes a GPU test without running it names it here
FRESH="every_pointwise or multimodal or registers_and_blocks or tokens_first or tiles_of_tokens or launch_variants or mha or random_chains or l2_first"

for part in ${@:-tests programs notebooks fwd bwd host}; do
  case $part in
    fresh) timeout -s INT 200 python3 -m pytest -m gpu -q -p no:cacheprovider -rs tests -k "$FRESH" 2>&1 \
             | tee $OUT/gpu_fresh.log | tail -4 ;;
    tests) timeout -s INT 540 python3 -m pytest -m gpu -q -p no:cacheprovider -rs --durations=12 \
             --ignore=tests/test_programs.py 2>&1 | tee $OUT/gpu_tests.log | tail -6 ;;
    programs) timeout -s INT 540 python3 -m pytest -m gpu -q -p no:cacheprovider -rs --durations=4 tests/test_programs.py \
             2>&1 | tee $OUT/gpu_programs.log | tail -6 ;;
    verify) timeout -s INT 330 python3 -m pytest -m gpu -q -p no:cacheprovider -rs --durations=12 \
             --ignore=tests/test_programs.py 2>&1 | tee $OUT/gpu_tests.log | tail -6
           PADVEC_GPU_PROGRAMS=40 PADVEC_GPU_GRAD_PROGRAMS=20 PADVEC_GPU_PROLOGUES=10 timeout -s INT 200 \
             python3 -m pytest -m gpu -q -p no:cacheprovider -rs --durations=4 tests/test_programs.py 2>&1 \
             | tee $OUT/gpu_programs.log | tail -6 ;;
    hunt) timeout -s INT 420 python3 benchmarks/tools/hunt.py --programs 110 --gradients 90 --pieces 50 --prologues 110 2>&1 \
            | grep -v Warning | tee $OUT/hunt.log | tail -20 ;;
    hunt_after) timeout -s INT 420 python3 benchmarks/tools/hunt.py --programs 110 --gradients 90 --pieces 50 --prologues 110 \
            --after torchcompile 2>&1 | grep -v Warning | tee $OUT/hunt_after.log | tail -20 ;;
    fwd_qkv_rowmajor) PADVEC_TUNING=eager_orders=0,source_orders=0 suite fwd_qkv_rowmajor "${SELECT[fwd_qkv]}" 250 ;;
    fwd_qkv_eager) PADVEC_TUNING=source_orders=0 suite fwd_qkv_eager "${SELECT[fwd_qkv]}" 250 ;;
    bwd_qkv_outputs) PADVEC_COTANGENTS=outputs suite bwd_qkv_outputs "${SELECT[bwd_qkv]}" ;;
    fwd|bwd) suite ${part}_rope "${SELECT[${part}_rope]}"; suite ${part}_qkv "${SELECT[${part}_qkv]}" ;;
    fwd_rope|fwd_qkv|bwd_rope|bwd_qkv|bwd_short|bwd_mha|seed|gptj|host) suite $part "${SELECT[$part]}" ;;
    tune) timeout -s INT 300 python3 benchmarks/tools/tune_probe.py Llama-3-8B-b1-rope-bfloat16-fwd \
            Gemma-7b-b1-rope-bfloat16-fwd Llama-3-8B-b2-rope-bfloat16-fwd --trials 5 2>&1 | grep -v Warning \
            | tee $OUT/tune-probe.log | tail -6 ;;
    compile) timeout -s INT 120 python3 benchmarks/tools/compile_probe.py 2>&1 | grep -v Warning \
            | tee $OUT/compile-probe.log | tail -9 ;;
    block|block2|block3) suite $part "${SELECT[$part]}" 560 ;;
    gathers) (cd benchmarks/tools && timeout -s INT 300 python3 explore.py --cases GPT-J-6B-b1-gptj_rope-bfloat16-fwd \
              GPT-J-6B-b1-gptj_rope-bfloat16-fwd+bwd GPT-J-6B-b2-gptj_rope-bfloat16-fwd+bwd \
              --variants base: loads:GATHERS=0 2>&1 | grep -v Warning | tee $OUT/gathers.log | tail -16) ;;
    leads) (cd benchmarks/tools && timeout -s INT 400 python3 explore.py --cases Llama-2-7b-b1-qkv_split_rope-bfloat16-fwd \
              Gemma-7b-b2-qkv_split_rope-bfloat16-fwd Llama-2-7b-b2-rope-bfloat16-fwd Mistral-7B-b2-rope-bfloat16-fwd \
              GPT-J-6B-b1-gptj_rope-bfloat16-fwd+bwd --variants base: r1:MAX_ROWS_PER_THREAD=1 \
              r2:MAX_ROWS_PER_THREAD=2 nosteps:LANE_STEPS=0 2>&1 | grep -v Warning | tee $OUT/leads.log | tail -40) ;;
    leads2) (cd benchmarks/tools && timeout -s INT 400 python3 explore.py --cases Llama-2-7b-b2-rope-bfloat16-fwd \
              Mistral-7B-b1-rope-bfloat16-fwd Mistral-7B-b2-rope-bfloat16-fwd Gemma-7b-b1-rope-bfloat16-fwd \
              Llama-2-7b-b2-qkv_split_rope-bfloat16-fwd Gemma-7b-b1-qkv_split_rope-bfloat16-fwd --variants base: \
              r2:MAX_ROWS_PER_THREAD=2 r1w:MAX_ROWS_PER_THREAD=1,team_scale=2 r2w:MAX_ROWS_PER_THREAD=2,team_scale=2 \
              r4w:team_scale=2 2>&1 | grep -v Warning | tee $OUT/leads2.log | tail -3) ;;
    apart) (cd benchmarks/tools && timeout -s INT 150 python3 explore.py --cases Llama-2-7b-b2-rope-bfloat16-fwd \
              Mistral-7B-b2-rope-bfloat16-fwd Gemma-7b-b2-rope-bfloat16-fwd Llama-3-8B-b1-rope-bfloat16-fwd \
              Llama-2-7b-b1-rope-bfloat16-fwd Gemma-7b-b1-rope-bfloat16-fwd --variants base: four:APART_ROWS=4 2>&1 \
              | grep -v Warning | tee $OUT/apart.log | tail -3) ;;
    bwdrows) (cd benchmarks/tools && timeout -s INT 300 python3 explore.py --cases Llama-2-7b-b1-rope-bfloat16-fwd+bwd \
              Llama-2-7b-b2-rope-bfloat16-fwd+bwd Llama-3-8B-b1-rope-bfloat16-fwd+bwd Gemma-7b-b1-rope-bfloat16-fwd+bwd \
              Phi-3-mini-b1-rope-bfloat16-fwd+bwd --variants base: r2:MAX_ROWS_PER_THREAD=2 2>&1 | grep -v Warning \
              | tee $OUT/bwdrows.log | tail -3) ;;
    pairs) (cd benchmarks/tools && timeout -s INT 300 python3 explore.py --cases GPT-J-6B-b1-gptj_rope-bfloat16-fwd \
              GPT-J-6B-b2-gptj_rope-bfloat16-fwd GPT-J-6B-b1-gptj_rope-bfloat16-fwd+bwd GPT-J-6B-b2-gptj_rope-bfloat16-fwd+bwd \
              --variants base: whole:PAIR_PIECES=0 2>&1 | grep -v Warning | tee $OUT/pairs.log | tail -3) ;;
    rows2) (cd benchmarks/tools && timeout -s INT 540 python3 explore.py --cases $(python3 -c "
from thunder_padvec.bench.cases import cases
print(*[c.id for c in cases() if c.id.endswith('bfloat16-fwd') and 'GPT-J' not in c.id])") \
              --variants base: r2:MAX_ROWS_PER_THREAD=2 2>&1 | grep -v Warning | tee $OUT/rows2.log | tail -3) ;;
    hprobe) timeout -s INT 120 python3 benchmarks/tools/host_probe.py 2>&1 | grep -v Warning | tee $OUT/host-probe.log ;;
    flat) (cd benchmarks/tools && timeout -s INT 400 python3 flat_probe.py --cases Llama-2-7b-b1-rope-bfloat16-fwd \
              Llama-2-7b-b2-rope-bfloat16-fwd Mistral-7B-b1-rope-bfloat16-fwd Mistral-7B-b2-rope-bfloat16-fwd \
              Gemma-7b-b1-rope-bfloat16-fwd --flat 1 --lanes12 --blocks 128 256 2>&1 | grep -v Warning \
              | tee $OUT/flat-probe.log | tail -3) ;;
    bulk) (cd benchmarks/tools && timeout -s INT 300 python3 bulk_probe.py --cases \
              Llama-3-8B-b1-qkv_split_rope-bfloat16-fwd Mistral-7B-b1-qkv_split_rope-bfloat16-fwd \
              Llama-3-8B-b2-qkv_split_rope-bfloat16-fwd Mistral-7B-b2-qkv_split_rope-bfloat16-fwd 2>&1 \
              | grep -v Warning | tee $OUT/bulk-probe.log | tail -3) ;;
    sumfirst) (cd benchmarks/tools && timeout -s INT 330 python3 sumfirst_probe.py 2>&1) | grep -v Warning \
              | tee $OUT/sumfirst-probe.log ;;
    reloads) (cd benchmarks/tools && timeout -s INT 560 python3 explore.py --cases Llama-2-7b-b1-rope-bfloat16-fwd \
              Llama-2-7b-b2-rope-bfloat16-fwd Mistral-7B-b1-rope-bfloat16-fwd Mistral-7B-b2-rope-bfloat16-fwd \
              Gemma-7b-b1-rope-bfloat16-fwd phi-2-b1-rope-bfloat16-fwd seed-b256-rope-bfloat16-fwd \
              Llama-2-7b-b1-qkv_split_rope-bfloat16-fwd Gemma-7b-b1-qkv_split_rope-bfloat16-fwd \
              Llama-2-7b-b2-qkv_split_rope-bfloat16-fwd Gemma-7b-b2-qkv_split_rope-bfloat16-fwd \
              Gemma-7b-b1-rope-bfloat16-fwd+bwd --variants base: flat:ALL_RELOADS=1 2>&1 | grep -v Warning \
              | tee $OUT/reloads.log | tail -3) ;;
    combos) (cd benchmarks/tools && timeout -s INT 450 python3 explore.py --cases Llama-3-8B-b1-qkv_split_rope-bfloat16-fwd \
              Llama-3-8B-b2-qkv_split_rope-bfloat16-fwd Mistral-7B-b1-qkv_split_rope-bfloat16-fwd \
              phi-2-b1-qkv_split_rope-bfloat16-fwd Llama-2-7b-b1-qkv_split_rope-bfloat16-fwd --variants base: \
              keep:tune_hints=0 reused:tune_hints=0,KEEP_ONCE=0 keep_plane:tune_hints=0,plane_order=1 \
              reused_plane:tune_hints=0,KEEP_ONCE=0,plane_order=1 2>&1 | grep -v Warning | tee $OUT/combos.log | tail -3) ;;
    combos_bwd) (cd benchmarks/tools && timeout -s INT 300 python3 explore.py --cases Llama-3-8B-b1-qkv_split_rope-bfloat16-fwd+bwd \
              Mistral-7B-b1-qkv_split_rope-bfloat16-fwd+bwd --fusions padvec1 --variants base: \
              keep:tune_hints=0 reused:tune_hints=0,KEEP_ONCE=0 keep_plane:tune_hints=0,plane_order=1 \
              reused_plane:tune_hints=0,KEEP_ONCE=0,plane_order=1 2>&1 | grep -v Warning | tee $OUT/combos_bwd.log | tail -3) ;;
    prefetch) (cd benchmarks/tools && timeout -s INT 420 python3 explore.py --cases Llama-3-8B-b1-qkv_split_rope-bfloat16-fwd+bwd \
              Mistral-7B-b1-qkv_split_rope-bfloat16-fwd+bwd Mistral-7B-b2-qkv_split_rope-bfloat16-fwd+bwd --fusions padvec1 \
              --variants base: pf:prefetch=1 base2: pf2:prefetch=1 2>&1 \
              | grep -v Warning | tee $OUT/prefetch.log | tail -3) ;;
    prefetch_tf) (cd benchmarks/tools && timeout -s INT 420 python3 explore.py --cases \
              Llama-3-8B-b1-qkv_split_rope-bfloat16-fwd+bwd Mistral-7B-b1-qkv_split_rope-bfloat16-fwd+bwd \
              Mistral-7B-b2-qkv_split_rope-bfloat16-fwd+bwd --fusions padvec1 --variants base:tune_hints=0 \
              tf:tune_hints=0,tokens_first=1 pf:tune_hints=0,prefetch=1 pftf:tune_hints=0,tokens_first=1,prefetch=1 \
              base2:tune_hints=0 tf2:tune_hints=0,tokens_first=1 pf2:tune_hints=0,prefetch=1 \
              pftf2:tune_hints=0,tokens_first=1,prefetch=1 2>&1 | grep -v Warning | tee $OUT/prefetch_tf.log | tail -3) ;;
    prefetch_var) (cd benchmarks/tools && timeout -s INT 300 python3 explore.py --cases \
              Llama-3-8B-b1-qkv_split_rope-bfloat16-fwd+bwd Llama-3-8B-b2-qkv_split_rope-bfloat16-fwd+bwd \
              Mistral-7B-b1-qkv_split_rope-bfloat16-fwd+bwd Mistral-7B-b2-qkv_split_rope-bfloat16-fwd+bwd --fusions padvec1 \
              --variants base: pv:prefetch_variant=1 base2: pv2:prefetch_variant=1 2>&1 | grep -v Warning \
              | tee $OUT/prefetch_var.log | tail -3) ;;
    layout) timeout -s INT 300 python3 benchmarks/tools/layout_probe.py Llama-3-8B-b1-qkv_split_rope-bfloat16-fwd \
              Mistral-7B-b1-qkv_split_rope-bfloat16-fwd Llama-2-7b-b1-qkv_split_rope-bfloat16-fwd \
              phi-2-b1-qkv_split_rope-bfloat16-fwd 2>&1 | grep -v Warning | tee $OUT/layout.log | tail -3 ;;
    blocks) (cd benchmarks/tools && timeout -s INT 300 python3 explore.py --cases Llama-3-8B-b1-qkv_split_rope-bfloat16-fwd \
              Llama-2-7b-b1-qkv_split_rope-bfloat16-fwd --variants base: w16:STAGED_WARPS=16 w32:STAGED_WARPS=32 2>&1 \
              | grep -v Warning | tee $OUT/blocks.log | tail -3) ;;
    inductor) (cd benchmarks/tools && TORCH_LOGS=output_code timeout -s INT 200 python3 explore.py \
              --cases Llama-2-7b-b1-qkv_split_rope-bfloat16-fwd --variants base: > $OUT/inductor.log 2>&1; tail -3 $OUT/inductor.log) ;;
    orders) (cd benchmarks/tools && timeout -s INT 260 python3 explore.py --cases Llama-2-7b-b1-qkv_split_rope-bfloat16-fwd \
              Llama-2-7b-b2-qkv_split_rope-bfloat16-fwd Gemma-7b-b1-qkv_split_rope-bfloat16-fwd \
              Gemma-7b-b2-qkv_split_rope-bfloat16-fwd pythia-160m-b1-qkv_split_rope-bfloat16-fwd \
              pythia-160m-b2-qkv_split_rope-bfloat16-fwd Phi-3-mini-b1-qkv_split_rope-bfloat16-fwd \
              --variants base: rowmajor:eager_orders=0 2>&1 | grep -v Warning | tee $OUT/orders.log | tail -3) ;;
    tokens) (cd benchmarks/tools && timeout -s INT 330 python3 explore.py --cases Llama-3-8B-b1-qkv_split_rope-bfloat16-fwd \
              Mistral-7B-b1-qkv_split_rope-bfloat16-fwd Llama-3-8B-b2-qkv_split_rope-bfloat16-fwd \
              Mistral-7B-b2-qkv_split_rope-bfloat16-fwd Mistral-7B-b1-qkv_split_rope-bfloat16-fwd+bwd \
              Llama-3-8B-b1-qkv_split_rope-bfloat16-fwd+bwd --variants base: eager:source_orders=0 2>&1 | grep -v Warning \
              | tee $OUT/tokens.log | tail -3) ;;
    tiles_bwd) (cd benchmarks/tools && timeout -s INT 300 python3 explore.py --cases Phi-3-mini-b1-qkv_split_rope-bfloat16-fwd+bwd \
              Llama-3-8B-b1-qkv_split_rope-bfloat16-fwd+bwd Mistral-7B-b1-qkv_split_rope-bfloat16-fwd+bwd \
              Llama-2-7b-b1-qkv_split_rope-bfloat16-fwd+bwd --fusions padvec1 --variants base: t1:ALL_TOKEN_TILES=1,TOKEN_TILES=1 \
              t8:ALL_TOKEN_TILES=1,TOKEN_TILES=8 t32:ALL_TOKEN_TILES=1,TOKEN_TILES=32 t128:ALL_TOKEN_TILES=1,TOKEN_TILES=128 2>&1 | grep -v Warning | tee $OUT/tiles_bwd.log | tail -3) ;;
    tiles_fwd) (cd benchmarks/tools && timeout -s INT 240 python3 explore.py --cases Llama-3-8B-b1-qkv_split_rope-bfloat16-fwd \
              Mistral-7B-b1-qkv_split_rope-bfloat16-fwd Phi-3-mini-b1-qkv_split_rope-bfloat16-fwd \
              phi-2-b2-rope-bfloat16-fwd --variants base: t1:ALL_TOKEN_TILES=1,TOKEN_TILES=1 \
              t8:ALL_TOKEN_TILES=1,TOKEN_TILES=8 t32:ALL_TOKEN_TILES=1,TOKEN_TILES=32 2>&1 | grep -v Warning | tee $OUT/tiles_fwd.log | tail -3) ;;
    tiles_rule) (cd benchmarks/tools && timeout -s INT 280 python3 explore.py --cases Phi-3-mini-b1-qkv_split_rope-bfloat16-fwd \
              Phi-3-mini-b2-qkv_split_rope-bfloat16-fwd Phi-3-mini-b1-qkv_split_rope-bfloat16-fwd+bwd \
              Phi-3-mini-b2-qkv_split_rope-bfloat16-fwd+bwd phi-2-b1-qkv_split_rope-bfloat16-fwd \
              phi-2-b2-qkv_split_rope-bfloat16-fwd phi-2-b1-qkv_split_rope-bfloat16-fwd+bwd \
              phi-2-b2-qkv_split_rope-bfloat16-fwd+bwd --variants base: untiled:TOKEN_TILES=0 2>&1 | grep -v Warning \
              | tee $OUT/tiles_rule.log | tail -3) ;;
    ncu_bwd) stalls=$(printf 'smsp__average_warps_issue_stalled_%s_per_issue_active.ratio,' long_scoreboard \
              short_scoreboard lg_throttle mio_throttle drain wait not_selected math_pipe_throttle no_instruction)
              THUNDER_PADVEC_TUNE=0 PADVEC_NCU_TAG=-bwd \
              PADVEC_NCU_METRICS=${stalls}gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,\
dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__inst_executed.sum,\
sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__grid_size \
              bash benchmarks/tools/gpu_ncu.sh Llama-3-8B-b1-qkv_split_rope-bfloat16-fwd+bwd \
              Mistral-7B-b1-qkv_split_rope-bfloat16-fwd+bwd Phi-3-mini-b1-qkv_split_rope-bfloat16-fwd+bwd \
              Llama-2-7b-b1-qkv_split_rope-bfloat16-fwd+bwd | tail -3 ;;
    ncu_small) THUNDER_PADVEC_TUNE=0 PADVEC_NCU_TAG=-small PADVEC_NCU_KERNELS='padvec_kernel|triton_' \
              PADVEC_NCU_METRICS=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,\
dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,\
sm__cycles_active.avg,gpc__cycles_elapsed.max,launch__registers_per_thread,launch__grid_size,launch__block_size \
              bash benchmarks/tools/gpu_ncu.sh phi-2-b1 phi-2-b2 pythia-160m-b1 pythia-160m-b2 --peer | tail -3 ;;
    notebooks)
      ls .whl/nb/*.whl > /dev/null 2>&1 || { echo "no .whl/nb: notebooks skipped"; continue; }
      python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/nb-site .whl/nb/*.whl
      mkdir -p $OUT/notebooks
      PYTHONPATH=/tmp/nb-site:$PYTHONPATH timeout 240 python3 -c "
import sys, nbformat
from nbclient import NotebookClient
for path in sys.argv[1:]:
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=200, kernel_name='python3', resources={'metadata': {'path': 'notebooks'}}).execute()
    nbformat.write(nb, '$OUT/' + path)
    print('executed', path)
" notebooks/*.ipynb 2>&1 | tail -3 ;;
  esac
done
