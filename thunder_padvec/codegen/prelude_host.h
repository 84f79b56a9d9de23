// thunder_padvec host prelude: runs a generated kernel on the CPU, one thread after another.
#include <cmath>
#include <cstdint>

using std::isfinite;
using std::isnan;
using std::signbit;

#define PADVEC_FN static inline
#define __global__
#define __device__
#define __forceinline__
#define __restrict__ __restrict
#define __launch_bounds__(...)
#define __shared__
#define __syncthreads()
#define __syncwarp()

struct padvec_dim3 { unsigned int x, y, z; };
static thread_local padvec_dim3 threadIdx, blockIdx, blockDim, gridDim;
