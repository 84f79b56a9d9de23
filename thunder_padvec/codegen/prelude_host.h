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

// Every access is checked against the call's tensors and the shared memory (set by padvec_set_ranges before a
// launch): one that misses them all, and the thread's registers, is counted (padvec_violations), as a read or
// write past a tensor's end, or anywhere else, would be on the GPU; the stores into an output are counted per
// element (``writes``), so that one written twice (a race on the GPU, where threads run at once) or never shows.
// Registers are the running thread's stack, whose bounds the thread asks for once: a tensor may lie just past a
// thread's stack (a thread's heap is mapped anywhere), so nearness to the stack alone says nothing.
#include <cstddef>
#include <pthread.h>
struct padvec_range { const char* lo; const char* hi; unsigned char* writes; std::size_t itemsize; };
static thread_local padvec_range padvec_ranges[64];
static thread_local int padvec_nranges = 0;
static thread_local long padvec_nviolations = 0;
static thread_local const char* padvec_stack_lo = nullptr;
static thread_local const char* padvec_stack_hi = nullptr;
static inline void padvec_find_stack() {
  if (padvec_stack_hi) return;
  void* lo = nullptr;
  std::size_t size = 0;
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) == 0) {
    if (pthread_attr_getstack(&attr, &lo, &size) != 0) lo = nullptr;
    pthread_attr_destroy(&attr);
  }
  const char frame = 0;
  const char* base = static_cast<const char*>(lo);
  const bool known = base && size && &frame >= base && &frame < base + size;
  padvec_stack_lo = known ? base : &frame - (1 << 20);  // unknown: near this frame
  padvec_stack_hi = known ? base + size : &frame + (1 << 20);
}
static inline void padvec_check(const void* p, std::size_t bytes, bool store) {
  const char* a = static_cast<const char*>(p);
  for (int i = 0; i < padvec_nranges; ++i) {
    const padvec_range& r = padvec_ranges[i];
    if (a >= r.lo && a + bytes <= r.hi) {
      if (store && r.writes)
        for (std::size_t e = (a - r.lo) / r.itemsize; e < (a + bytes - r.lo) / r.itemsize; ++e)
          if (r.writes[e] < 255) ++r.writes[e];
      return;
    }
  }
  if (a >= padvec_stack_lo && a < padvec_stack_hi) return;  // a register array
  if (padvec_nranges > 0) ++padvec_nviolations;  // (no ranges: the checks are off)
}
#define PADVEC_CHECK(p, bytes) padvec_check(p, bytes, false)
#define PADVEC_CHECK_STORE(p, bytes) padvec_check(p, bytes, true)

struct padvec_dim3 { unsigned int x, y, z; };
static thread_local padvec_dim3 threadIdx, blockIdx, blockDim, gridDim;
