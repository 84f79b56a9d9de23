
// thunder_padvec host launcher: the blocks of a launch in order; in each, every thread runs a
// phase before any thread starts the next, as the barriers between phases guarantee on the GPU.
alignas(16) static thread_local unsigned char padvec_host_smem[PADVEC_SMEM_BYTES];

extern "C" void padvec_launch(const padvec_args* args, unsigned int grid, unsigned int block) {
  gridDim = {grid, 1, 1};
  blockDim = {block, 1, 1};
  for (unsigned int b = 0; b < grid; ++b) {
    for (int phase = 0; phase < 3; ++phase) {
      for (unsigned int t = 0; t < block; ++t) {
        blockIdx = {b, 0, 0};
        threadIdx = {t, 0, 0};
        padvec_run(phase, *args, padvec_host_smem);
      }
    }
  }
}

// The call's tensors, as [lo, hi) byte ranges, for the checks of the next launches on this thread.
extern "C" void padvec_set_ranges(const unsigned long long* ranges, int n) {
  padvec_nranges = n < 63 ? n : 63;
  for (int i = 0; i < padvec_nranges; ++i)
    padvec_ranges[i] = {reinterpret_cast<const char*>(ranges[2 * i]), reinterpret_cast<const char*>(ranges[2 * i + 1])};
  const char* smem = reinterpret_cast<const char*>(padvec_host_smem);
  padvec_ranges[padvec_nranges++] = {smem, smem + sizeof(padvec_host_smem)};
}

// Accesses outside the tensors since the last call, and the count reset.
extern "C" long padvec_violations() {
  const long n = padvec_nviolations;
  padvec_nviolations = 0;
  return n;
}
