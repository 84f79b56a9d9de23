// thunder_padvec prelude, shared by the GPU (NVRTC) and the host (emulation) builds.
// Self-contained: 16-bit float types and their round-to-nearest-even conversions, and
// vector loads and stores of 1 to 16 bytes. PADVEC_FN is defined by the target's prelude.
// On GPUs of compute capability 8.0 and newer the conversions are single instructions (the
// ones PyTorch's CUDA kernels use); elsewhere they are the integer code below, which rounds
// identically (NaNs come out as PyTorch's CPU kernels make them).

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define PADVEC_CVT_INSTRUCTIONS 1
#endif

struct padvec_bf16 { unsigned short bits; };
struct padvec_half { unsigned short bits; };

PADVEC_FN float padvec_float_from_bits(unsigned int u) {
  union { unsigned int u; float f; } pun;
  pun.u = u;
  return pun.f;
}

PADVEC_FN unsigned int padvec_bits_from_float(float f) {
  union { unsigned int u; float f; } pun;
  pun.f = f;
  return pun.u;
}

PADVEC_FN float padvec_to_float(float x) { return x; }
PADVEC_FN float padvec_to_float(double x) { return (float)x; }
PADVEC_FN float padvec_to_float(bool x) { return x ? 1.0f : 0.0f; }
PADVEC_FN float padvec_to_float(padvec_bf16 x) { return padvec_float_from_bits((unsigned int)x.bits << 16); }

PADVEC_FN float padvec_to_float(padvec_half x) {
#ifdef PADVEC_CVT_INSTRUCTIONS
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x.bits));
  return f;
#endif
  const unsigned int sign = (unsigned int)(x.bits & 0x8000u) << 16;
  const unsigned int exponent = (x.bits >> 10) & 0x1fu;
  const unsigned int mantissa = x.bits & 0x3ffu;
  if (exponent == 0x1fu) return padvec_float_from_bits(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0) return padvec_float_from_bits(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  const float magnitude = (float)mantissa * 5.9604644775390625e-08f;  // subnormal: mantissa * 2^-24
  return sign ? -magnitude : magnitude;
}

PADVEC_FN padvec_bf16 padvec_bf16_from_float(float f) {
  padvec_bf16 r;
#ifdef PADVEC_CVT_INSTRUCTIONS
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r.bits) : "f"(f));
  return r;
#endif
  unsigned int u = padvec_bits_from_float(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    r.bits = 0x7fc0;  // the quiet NaN PyTorch produces
    return r;
  }
  u += 0x7fffu + ((u >> 16) & 1u);
  r.bits = (unsigned short)(u >> 16);
  return r;
}

PADVEC_FN padvec_half padvec_half_from_float(float f) {
#ifdef PADVEC_CVT_INSTRUCTIONS
  padvec_half converted;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(converted.bits) : "f"(f));
  return converted;
#endif
  const unsigned int u = padvec_bits_from_float(f);
  const unsigned int sign = (u >> 16) & 0x8000u;
  const unsigned int a = u & 0x7fffffffu;
  unsigned int h;
  if (a > 0x7f800000u) {
    h = 0x7e00u;  // NaN
  } else if (a >= 0x477ff000u) {
    h = 0x7c00u;  // rounds to infinity
  } else if (a >= 0x38800000u) {  // a normal half
    h = ((a + 0xfffu + ((a >> 13) & 1u)) >> 13) - (112u << 10);
  } else if (a < 0x33000000u) {
    h = 0;  // below half the smallest subnormal
  } else {  // a subnormal half: round(mantissa * 2^(exponent - 126))
    const unsigned int shift = 126u - (a >> 23);
    const unsigned int mantissa = (a & 0x7fffffu) | 0x800000u;
    const unsigned int halfway = 1u << (shift - 1);
    const unsigned int rest = mantissa & ((1u << shift) - 1u);
    h = mantissa >> shift;
    if (rest > halfway || (rest == halfway && (h & 1u))) h += 1;
  }
  padvec_half r;
  r.bits = (unsigned short)(sign | h);
  return r;
}

// -x of a 16-bit float: its sign bit flipped (exactly what rounding -float(x) back gives, NaN aside)
template <typename T> PADVEC_FN T padvec_flip_sign(T x) {
  x.bits = (unsigned short)(x.bits ^ 0x8000u);
  return x;
}

// Writes a 32-bit word into two consecutive 16-bit lanes (4-byte aligned): as one word (WORD), so
// that the compiler can keep the pair in one register instead of splitting it and joining it again
// for a store, or lane by lane.
template <bool WORD, typename T> PADVEC_FN void padvec_store_pair(T* dst, unsigned int pair) {
  if (WORD) {
    struct alignas(4) word { unsigned int v; };
    *reinterpret_cast<word*>(dst) = word{pair};
  } else {
    dst[0].bits = (unsigned short)(pair & 0xffffu);
    dst[1].bits = (unsigned short)(pair >> 16);
  }
}

// Widens two consecutive bf16 lanes (4-byte aligned), read as one word: the high lane is the word's
// high half as it stands, one instruction.
PADVEC_FN void padvec_widen_bf16x2(float* dst, const padvec_bf16* src) {
  struct alignas(4) word { unsigned int v; };
  const unsigned int pair = reinterpret_cast<const word*>(src)->v;
  dst[0] = padvec_float_from_bits(pair << 16);
  dst[1] = padvec_float_from_bits(pair & 0xffff0000u);
}

// Rounds two floats into two consecutive 16-bit lanes (4-byte aligned): one 32-bit word where WORD,
// else lane by lane (see LaunchParams.word_pairs).
template <bool WORD = true> PADVEC_FN void padvec_pack_bf16x2(padvec_bf16* dst, float lo, float hi) {
#ifdef PADVEC_CVT_INSTRUCTIONS
  unsigned int pair;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(pair) : "f"(hi), "f"(lo));
  padvec_store_pair<WORD>(dst, pair);
#else
  dst[0] = padvec_bf16_from_float(lo);
  dst[1] = padvec_bf16_from_float(hi);
#endif
}

template <bool WORD = true> PADVEC_FN void padvec_pack_halfx2(padvec_half* dst, float lo, float hi) {
#ifdef PADVEC_CVT_INSTRUCTIONS
  unsigned int pair;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(pair) : "f"(hi), "f"(lo));
  padvec_store_pair<WORD>(dst, pair);
#else
  dst[0] = padvec_half_from_float(lo);
  dst[1] = padvec_half_from_float(hi);
#endif
}

PADVEC_FN float padvec_nan_max(float a, float b) { return (a != a) ? a : ((b != b) ? b : (a > b ? a : b)); }
PADVEC_FN float padvec_nan_min(float a, float b) { return (a != a) ? a : ((b != b) ? b : (a < b ? a : b)); }
PADVEC_FN double padvec_nan_max(double a, double b) { return (a != a) ? a : ((b != b) ? b : (a > b ? a : b)); }
PADVEC_FN double padvec_nan_min(double a, double b) { return (a != a) ? a : ((b != b) ? b : (a < b ? a : b)); }

// PyTorch's remainder of floats: fmod's, moved by b where its sign is not b's (a Python modulo).
PADVEC_FN float padvec_remainder(float a, float b) {
  float m = fmodf(a, b);
  return (m != 0.0f && ((b < 0.0f) != (m < 0.0f))) ? m + b : m;
}
PADVEC_FN double padvec_remainder(double a, double b) {
  double m = fmod(a, b);
  return (m != 0.0 && ((b < 0.0) != (m < 0.0))) ? m + b : m;
}
// PyTorch's lerp: from the nearer end, one fused multiply-add (as its CPU kernels and nvcc's contraction give).
PADVEC_FN float padvec_lerp(float a, float b, float w) {
  const bool small = fabsf(w) < 0.5f;
  return fmaf(small ? w : w - 1.0f, b - a, small ? a : b);
}
PADVEC_FN double padvec_lerp(double a, double b, double w) {
  const bool small = fabs(w) < 0.5;
  return fma(small ? w : w - 1.0, b - a, small ? a : b);
}

template <int BYTES> struct padvec_chunk;
template <> struct alignas(1) padvec_chunk<1> { unsigned char v; };
template <> struct alignas(2) padvec_chunk<2> { unsigned short v; };
template <> struct alignas(4) padvec_chunk<4> { unsigned int v; };
template <> struct alignas(8) padvec_chunk<8> { unsigned int v[2]; };
template <> struct alignas(16) padvec_chunk<16> { unsigned int v[4]; };

#ifndef PADVEC_CHECK
#define PADVEC_CHECK(p, bytes)  // the host prelude checks accesses against the call's tensors
#define PADVEC_CHECK_STORE(p, bytes)
#endif

// Copies W consecutive elements as one access of W * sizeof(T) bytes; both sides must be aligned to it.
template <int W, typename T> PADVEC_FN void padvec_load(T* dst, const T* src) {
  typedef padvec_chunk<W * sizeof(T)> chunk;
  PADVEC_CHECK(src, W * sizeof(T));
  *reinterpret_cast<chunk*>(dst) = *reinterpret_cast<const chunk*>(src);
}

template <int W, typename T> PADVEC_FN void padvec_store(T* dst, const T* src) {
  typedef padvec_chunk<W * sizeof(T)> chunk;
  PADVEC_CHECK_STORE(dst, W * sizeof(T));
  *reinterpret_cast<chunk*>(dst) = *reinterpret_cast<const chunk*>(src);
}

// The same copies from and to global memory with the access marked streaming (ld/st.global.cs:
// the line is evicted first), for tensors a kernel reads or writes once: the L2 then keeps what is
// reused (cos and sin) and the lines other kernels left there. A plain copy on the host.
template <int W, typename T> PADVEC_FN void padvec_load_once(T* dst, const T* src) {
#if defined(__CUDA_ARCH__)
  constexpr int bytes = W * sizeof(T);
  typedef padvec_chunk<bytes> chunk;
  chunk c;
  if constexpr (bytes == 16) {
    asm("ld.global.cs.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(c.v[0]), "=r"(c.v[1]), "=r"(c.v[2]), "=r"(c.v[3]) : "l"(src));
  } else if constexpr (bytes == 8) {
    asm("ld.global.cs.v2.u32 {%0, %1}, [%2];" : "=r"(c.v[0]), "=r"(c.v[1]) : "l"(src));
  } else if constexpr (bytes == 4) {
    asm("ld.global.cs.u32 %0, [%1];" : "=r"(c.v) : "l"(src));
  } else {
    c = *reinterpret_cast<const chunk*>(src);
  }
  *reinterpret_cast<chunk*>(dst) = c;
#else
  padvec_load<W>(dst, src);
#endif
}

// The copy from global memory with an L2 evict_last cache policy: the L2 keeps the line in
// preference to others (see codegen.render._load_op for which loads use it). A plain copy on the
// host and before sm_80.
template <int W, typename T> PADVEC_FN void padvec_load_keep(T* dst, const T* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr int bytes = W * sizeof(T);
  typedef padvec_chunk<bytes> chunk;
  chunk c;
  unsigned long long policy;
  asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  if constexpr (bytes == 16) {
    asm("ld.global.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
        : "=r"(c.v[0]), "=r"(c.v[1]), "=r"(c.v[2]), "=r"(c.v[3]) : "l"(src), "l"(policy));
  } else if constexpr (bytes == 8) {
    asm("ld.global.L2::cache_hint.v2.u32 {%0, %1}, [%2], %3;" : "=r"(c.v[0]), "=r"(c.v[1]) : "l"(src), "l"(policy));
  } else if constexpr (bytes == 4) {
    asm("ld.global.L2::cache_hint.u32 %0, [%1], %2;" : "=r"(c.v) : "l"(src), "l"(policy));
  } else {
    c = *reinterpret_cast<const chunk*>(src);
  }
  *reinterpret_cast<chunk*>(dst) = c;
#else
  padvec_load<W>(dst, src);
#endif
}

// The line at p asked of the L2 (prefetch.global.L2, with the evict_last policy where KEEP), no register
// written: where ptxas issues some of a thread's loads late, their lines are on their way by then. A
// no-op on the host and before sm_80.
template <bool KEEP, typename T> PADVEC_FN void padvec_prefetch(const T* p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (KEEP) {
    asm volatile("prefetch.global.L2::evict_last [%0];" :: "l"(p));
  } else {
    asm volatile("prefetch.global.L2 [%0];" :: "l"(p));
  }
#else
  (void)p;
#endif
}

template <int W, typename T> PADVEC_FN void padvec_store_once(T* dst, const T* src) {
#if defined(__CUDA_ARCH__)
  constexpr int bytes = W * sizeof(T);
  typedef padvec_chunk<bytes> chunk;
  const chunk c = *reinterpret_cast<const chunk*>(src);
  if constexpr (bytes == 16) {
    asm volatile("st.global.cs.v4.u32 [%0], {%1, %2, %3, %4};"
                 :: "l"(dst), "r"(c.v[0]), "r"(c.v[1]), "r"(c.v[2]), "r"(c.v[3]) : "memory");
  } else if constexpr (bytes == 8) {
    asm volatile("st.global.cs.v2.u32 [%0], {%1, %2};" :: "l"(dst), "r"(c.v[0]), "r"(c.v[1]) : "memory");
  } else if constexpr (bytes == 4) {
    asm volatile("st.global.cs.u32 [%0], %1;" :: "l"(dst), "r"(c.v) : "memory");
  } else {
    *reinterpret_cast<chunk*>(dst) = c;
  }
#else
  padvec_store<W>(dst, src);
#endif
}

template <int W, typename T> PADVEC_FN void padvec_fill_zero(T* dst) {
  for (int i = 0; i < W; ++i) dst[i] = T{};
}

#ifdef __CUDA_ARCH__
// dst = the W elements that lane ``lane`` of this thread's team of ``team`` lanes holds in src
// (every lane of the warp calls it; a vector of whole 32-bit words)
template <int W, typename T> PADVEC_FN void padvec_exchange(T* dst, const T* src, int lane, int team) {
  constexpr int words = W * (int)sizeof(T) / 4;
  const unsigned int* from = reinterpret_cast<const unsigned int*>(src);
  unsigned int* to = reinterpret_cast<unsigned int*>(dst);
#pragma unroll
  for (int i = 0; i < words; ++i) to[i] = __shfl_sync(0xffffffffu, from[i], lane, team);
}
#endif
