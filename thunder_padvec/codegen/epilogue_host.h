
// thunder_padvec host launcher: the blocks and threads of a launch, in order.
extern "C" void padvec_launch(const padvec_args* args, unsigned int grid, unsigned int block) {
  gridDim = {grid, 1, 1};
  blockDim = {block, 1, 1};
  for (unsigned int b = 0; b < grid; ++b) {
    for (unsigned int t = 0; t < block; ++t) {
      blockIdx = {b, 0, 0};
      threadIdx = {t, 0, 0};
      padvec_kernel(*args);
    }
  }
}
