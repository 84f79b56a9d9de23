
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

// The call's tensors, as (first byte, end, per-element write counts or 0, element size) each, for the
// checks of the next launches on this thread; more than the table holds: no checks.
extern "C" void padvec_set_ranges(const unsigned long long* ranges, int n) {
  padvec_find_stack();
  padvec_nranges = 0;
  if (n > 63) return;
  for (int i = 0; i < n; ++i) {
    const unsigned long long* r = ranges + 4 * i;
    padvec_ranges[padvec_nranges++] = {reinterpret_cast<const char*>(r[0]), reinterpret_cast<const char*>(r[1]),
                                       reinterpret_cast<unsigned char*>(r[2]), static_cast<std::size_t>(r[3])};
  }
  const char* smem = reinterpret_cast<const char*>(padvec_host_smem);
  padvec_ranges[padvec_nranges++] = {smem, smem + sizeof(padvec_host_smem), nullptr, 1};
}

// Accesses outside the tensors since the last call, and the count reset.
extern "C" long padvec_violations() {
  const long n = padvec_nviolations;
  padvec_nviolations = 0;
  return n;
}
