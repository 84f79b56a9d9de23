#!/usr/bin/env bash
# One GPU-machine call: install the carried wheels, run the GPU tests, the demo and the seed benchmark,
# and profile the seed RoPE kernel with ncu. Everything it prints is also written under $OUT.
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 THUNDER_PADVEC_CACHE_DIR=/tmp/padvec-cache
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
python3 -m pytest -m gpu -q -p no:cacheprovider 2>&1 | tee $OUT/gpu_tests.log | tail -25
python3 -m thunder_padvec demo 2>&1 | tee $OUT/demo.log | tail -12
python3 benchmarks/tools/explore.py 2>&1 | tee $OUT/explore.log
if [ "${PADVEC_NCU:-0}" = 1 ]; then
  timeout 240 ncu --clock-control none -k padvec_kernel -c 1 -s 2 \
    --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread \
    python3 benchmarks/tools/profile_seed_rope.py 2>&1 | tee $OUT/ncu.log | grep -E "padvec|duration|dram|warps|registers" | head -20
fi
