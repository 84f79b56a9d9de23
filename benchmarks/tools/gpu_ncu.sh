#!/usr/bin/env bash
# ncu's view of padvec's RoPE kernels for the configurations named as arguments (the second launch of each);
# PADVEC_NCU_KERNELS='padvec_kernel|triton_' with --peer among the arguments adds torch.compile's kernels;
# PADVEC_NCU_CACHE=none with --dirty keeps the dirty L2 the suite's flush leaves (ncu flushes it otherwise);
# it replays the whole application per pass (a kernel replayed in place would find its own lines) and
# collects only PADVEC_NCU_METRICS if set.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 THUNDER_PADVEC_CACHE_DIR=/tmp/padvec-cache
metrics=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum
metrics=$metrics,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum
metrics=$metrics,l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_hit.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum
metrics=$metrics,lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum,l1tex__throughput.avg.pct_of_peak_sustained_elapsed
metrics=$metrics,lts__throughput.avg.pct_of_peak_sustained_elapsed,sm__inst_executed.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed
metrics=$metrics,lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__grid_size
replay=kernel
if [ "${PADVEC_NCU_CACHE:-all}" = none ]; then replay=application; fi
# Application replay runs the process once per pass. torch.compile's first run in a process compiles and
# autotunes (launching candidate kernels that the next pass may not launch, and ncu then fails to match
# them: "Failed to profile triton_..."); one run before ncu leaves its kernels and tuning on disk.
if [ $replay = application ] && [[ " $* " == *" --peer "* ]]; then
  export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor-cache
  timeout 300 python3 benchmarks/tools/profile_configs.py "$@" > /dev/null 2>&1
fi
metrics=${PADVEC_NCU_METRICS:-$metrics}
timeout 400 ncu --clock-control none --cache-control ${PADVEC_NCU_CACHE:-all} --replay-mode $replay -k "regex:${PADVEC_NCU_KERNELS:-padvec_kernel}" --launch-skip-before-match 0 --metrics $metrics \
  python3 benchmarks/tools/profile_configs.py "$@" 2>&1 | grep -vE "^==PROF==|Section" > $OUT/ncu${PADVEC_NCU_TAG}.log
grep -E "padvec_kernel|triton_|duration|bytes|pct|lts__t_sectors|inst_exec|grid_size|l1tex__t_(req|sec)" $OUT/ncu${PADVEC_NCU_TAG}.log | head -120
