#!/usr/bin/env bash
# ncu's view of the seed RoPE kernel shapes and a copy: time, DRAM, L1 and L2 traffic, instructions.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 THUNDER_PADVEC_CACHE_DIR=/tmp/padvec-cache
metrics=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum
metrics=$metrics,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum
metrics=$metrics,l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_hit.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum
metrics=$metrics,lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum,l1tex__throughput.avg.pct_of_peak_sustained_elapsed
metrics=$metrics,lts__throughput.avg.pct_of_peak_sustained_elapsed,sm__inst_executed.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed
metrics=$metrics,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,sm__warps_active.avg.pct_of_peak_sustained_active
timeout 300 ncu --clock-control none -k padvec_kernel -s 1 -c 3 --metrics $metrics \
  python3 benchmarks/tools/profile_variants.py 2>&1 | grep -vE "^==PROF==|Section" | tee $OUT/ncu_variants.log | grep -E "padvec_kernel|duration|throughput|lts__t_sectors|inst_exec|bank" | head -80
python3 -m pytest -m gpu -q -p no:cacheprovider 2>&1 | tee $OUT/gpu_tests.log | tail -4
python3 benchmarks/tools/explore.py 2>&1 | tee $OUT/explore.log
