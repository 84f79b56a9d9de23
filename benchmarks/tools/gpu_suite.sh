#!/usr/bin/env bash
# One GPU-machine call for the RoPE suite: GPU tests, then the suite (pytest-benchmark JSON under $OUT).
# Extra pytest arguments (a -k filter, say) pass through.
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 THUNDER_PADVEC_CACHE_DIR=/tmp/padvec-cache
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -m pytest -m gpu -q -p no:cacheprovider 2>&1 | tee $OUT/gpu_tests.log | tail -3
# In parts, so that a part cut short by the time limit costs only its own results.
for part in "not qkv and not test_host" "qkv" "test_host"; do
  name=$(echo "$part" | tr -c 'a-z' '_')
  python3 -m pytest benchmarks -q -p no:cacheprovider --benchmark-only --benchmark-json=$OUT/run_$name.json \
    -k "$part" "$@" 2>&1 | tee -a $OUT/suite.log | grep -E "passed|failed|[0-9] error" | tail -3
done
# The results files are made from the runs back home (benchmarks/report.py); the table shows here.
python3 benchmarks/report.py $OUT/run_*.json --out /tmp/report 2>&1 | tail -45
