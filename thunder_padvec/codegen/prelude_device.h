// thunder_padvec device prelude (NVRTC): no CUDA headers are needed.
#define PADVEC_FN __device__ __forceinline__
