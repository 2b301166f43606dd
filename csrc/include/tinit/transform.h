// Uniform word -> truncated normal (stream version 3), host and device code.
//
// Computed in T = float for fp32/bf16/fp16 tensors and T = double for fp64
// tensors. Both paths use IEEE basic operations only (+ - * / sqrt, fma_rn,
// compares, bit casts): no libm/libdevice call, and the float path no fp64,
// so every backend (CPU, CUDA, Triton) computes the same float bits and the
// CPU and CUDA the same double bits. Builds disable
// contraction (-ffp-contract=off, --fmad=false, enable_fp_fusion=False);
// fused steps are explicit fma_rn calls. The stream that feeds it is
// tinit::philox_block's; the specification, with its accuracy bounds, is
// docs/stream.md.
//
// x ~ N(mean, std^2) truncated to [a, b], by inversion, x = F^-1(u) with u
// the word's uniform, increasing in the word. The host
// (tinit.params.transform_constants) reduces every call in fp64 to one of four modes and the constants of
// TruncNormalParams:
//   kUniform:  x = edge + width (u + slope u (u - 1)), the inverse CDF of a
//     linear density on the window. Uniform schemes (slope 0), and windows so
//     narrow against std that the density is linear to below an ulp of x
//     (the window keeps every value it holds, with its probability).
//   kTwoSided: the window is mirrored so that its heavier side is the lower
//     tail (alpha' = -beta, beta' = -alpha, sign = -1, and the mirrored frame
//     takes the complement word ~w). s = Phi(alpha') + u D (lower side) or
//     Q(beta') + (1 - u) D (upper side, words above `split`), each one fma
//     of the word from small accurate terms, so neither tail loses digits;
//     q = s - 1/2 from its own constant. z = Phi^-1(s) by ndtri_table (no logarithm), and
//     x = mean + std z with std carried as an fp32 pair.
//   kTwoSidedPrecise: the same z as an fp32 pair and a compensated
//     mean + std z, then a power-of-two scale: windows where mean + std z
//     cancels (x near 0 far from the mean) and std outside [2^-100, 2^100].
//   kTail: the whole window beyond 8 std (mirrored lower tail, beta' <= -8): the excursion e >= 0 from the nearer bound,
//     Q(b0 + e) = Q(b0) (1 - v), b0 = -beta', solved by Newton's method, and
//     x = edge - std e, so the value keeps its digits next to the bound.
#pragma once

#include "tinit/fp_contract.h"
// (first: contraction off)

#include <cstdint>
#include <cstring>
#if !defined(__CUDACC__)
#include <cmath>
#endif

#include "tinit/ndtri_table.h"
#include "tinit/philox.h"

namespace tinit {

enum TransformMode : int {
  kUniform = 0,
  kTwoSided = 1,
  kTwoSidedPrecise = 2,
  kTail = 3,
};
constexpr int kModeCount = 4;
// Not a TransformMode (never packed; valid_mode refuses it): the CUDA
// kernels' variant of kTwoSided, float compute, for a record whose clamp
// cannot fire (TruncNormalParams::unclamped), the same values without the
// clamp. Every other backend runs kTwoSided for such a record. Outside the
// enum, which lists the packed modes of tinit.params.Mode.
constexpr int kTwoSidedUnclamped = kModeCount;
// Positions of the fields in the packed list of doubles: the order of
// TruncNormalParams below and of tinit.params.TruncNormalParams; the count
// follows from the list.
enum PackedField : int {
  kPackedMode,
  kPackedSign,
  kPackedSplit,
  kPackedACdf,
  kPackedBSf,
  kPackedAHalf,
  kPackedBHalf,
  kPackedStep,
  kPackedMean,
  kPackedSdHi,
  kPackedSdLo,
  kPackedScale,
  kPackedLo,
  kPackedHi,
  kPackedEdge,
  kPackedWidth,
  kPackedSlope,
  kPackedB0,
  kPackedRatio,
  kPackedL1,
  kPackedL2,
  kPackedL3,
  kPackedL4,
  kPackedL5,
  kPackedFieldCount,
};
constexpr int kParamCount = kPackedFieldCount;
constexpr int kNdtriSegments = TINIT_NDTRI_SEGMENTS;
constexpr int kNdtriRow = TINIT_NDTRI_ROW;
// Rows 0 .. kNdtriFastSegments - 1 cover s >= 2^-15 (|z| <= 4.0): the CPU
// keeps their coefficients in registers; the rest is read from memory.
constexpr int kNdtriFastSegments = 32;
static_assert(kNdtriSegments == 256, "ndtri_segment indexes 256 rows");

// The one check of a packed mode; every op refuses anything else.
TINIT_HD bool valid_mode(double mode) {
  return mode == kUniform || mode == kTwoSided || mode == kTwoSidedPrecise || mode == kTail;
}

// What the kernels need for memory safety, checked by every op before it
// writes: a known mode and, in the two-sided modes, s = s0 + step w inside
// [0, 1.75] for every word (ndtri_segment then stays in the table; valid
// constants keep s <= 1/2 + 2^-25). The upper side's s0 counts only when a
// word can take it (split < 2^32 - 1). NaN fails.
inline bool valid_params(const double* p) {
  const double mode = p[kPackedMode];
  if (!valid_mode(mode)) return false;
  if (mode != kTwoSided && mode != kTwoSidedPrecise) return true;
  const double split = p[kPackedSplit], a_cdf = p[kPackedACdf], b_sf = p[kPackedBSf], step = p[kPackedStep];
  const bool upper_ok = split == 4294967295.0 || (b_sf >= 0.0 && b_sf <= 0.75);
  return upper_ok && a_cdf >= 0.0 && a_cdf <= 0.75 && step >= 0.0 && step <= 0x1p-32;
}

// The per-tensor constants (fp64 on the host, in this order in the packed
// list of tinit.params.TruncNormalParams, the same field names), read as T.
template <typename T>
struct TruncNormalParams {
  int mode;              // TransformMode
  T sign;                // +1, or -1 when the window was mirrored
  uint32_t flip;         // ~0 when mirrored (derived from sign: the frame's word is w ^ flip)
  uint32_t split;        // two-sided: words <= split take the lower side
  T a_cdf;               // s of word 0, lower side: Phi(alpha') + step / 2
  T b_sf;                // s of word 0, upper side: Q(beta') + step / 2
  T a_half;              // a_cdf - 1/2 } q = s - 1/2 without cancellation
  T b_half;              // b_sf - 1/2  }
  T step;                // (Phi(beta') - Phi(alpha')) 2^-32: s grows by step a word
  T mean;                // divided by scale
  T sd_hi, sd_lo;        // sign std / scale as a T pair (sd_lo = 0 for double)
  T scale;               // power of two: 1 except in the precise and tail modes
  T lo, hi;              // [a, b] shrunk to values of the tensor's dtype
  T edge;                // uniform: a; tail: the nearer bound, divided by scale
  T width;               // uniform: b - a
  T slope;               // uniform: linear density term (0 for a flat one)
  T b0;                  // tail: -beta' > 0
  T ratio;               // tail: Q(a0) / Q(b0), a0 = -alpha'
  T l1, l2, l3, l4, l5;  // tail (float): l(e) ~ e (l1 + e (l2 + ...)), see tail_excursion
  uint32_t unclamped;    // derived: 1 when no value can leave [lo, hi] (clamp_cannot_fire)
  uint32_t one_bits;     // derived: 0x3f800000, the bits of 1.0f, read from here so that a GPU keeps
                         // them in a register: ndtri_variable's and-or is then one LOP3

  static TruncNormalParams from_packed(const double* p) {
    TruncNormalParams r;
    r.mode = static_cast<int>(p[kPackedMode]);
    r.sign = static_cast<T>(p[kPackedSign]);
    r.flip = p[kPackedSign] < 0 ? 0xffffffffu : 0u;
    r.split = static_cast<uint32_t>(p[kPackedSplit]);
    r.a_cdf = static_cast<T>(p[kPackedACdf]);
    r.b_sf = static_cast<T>(p[kPackedBSf]);
    r.a_half = static_cast<T>(p[kPackedAHalf]);
    r.b_half = static_cast<T>(p[kPackedBHalf]);
    r.step = static_cast<T>(p[kPackedStep]);
    r.mean = static_cast<T>(p[kPackedMean]);
    r.sd_hi = static_cast<T>(p[kPackedSdHi]);
    r.sd_lo = static_cast<T>(p[kPackedSdLo]);
    r.scale = static_cast<T>(p[kPackedScale]);
    r.lo = static_cast<T>(p[kPackedLo]);
    r.hi = static_cast<T>(p[kPackedHi]);
    r.edge = static_cast<T>(p[kPackedEdge]);
    r.width = static_cast<T>(p[kPackedWidth]);
    r.slope = static_cast<T>(p[kPackedSlope]);
    r.b0 = static_cast<T>(p[kPackedB0]);
    r.ratio = static_cast<T>(p[kPackedRatio]);
    r.l1 = static_cast<T>(p[kPackedL1]);
    r.l2 = static_cast<T>(p[kPackedL2]);
    r.l3 = static_cast<T>(p[kPackedL3]);
    r.l4 = static_cast<T>(p[kPackedL4]);
    r.l5 = static_cast<T>(p[kPackedL5]);
    r.unclamped = clamp_cannot_fire(r) ? 1u : 0u;
    r.one_bits = 0x3f800000u;
    return r;
  }

  // Whether the float two-sided transform (two_sided_value) of these constants
  // keeps every value inside [lo, hi] without the clamp, proved in double on
  // the fp32 constants the kernels read, with wide margins. s >= s_min, the
  // smaller s of word 0 of a side that a word can take (s = s0 + step w' is
  // one rounding of terms >= 0); Phi(-t) <= exp(-t^2/2) / 2 (t >= 0) bounds
  // |Phi^-1(s)| by t_max = sqrt(2 log(1 / (2 s_min))); ndtri_table is within
  // 1.87 2^-24 of max(|z|, 1) of it, far inside the 2^-10 added; the two
  // fmas round by 2^-24 of |mean| + |x - mean| each (2^-20 allowed). A
  // libm's log or sqrt may differ by an ulp: that can move the decision,
  // never a value (the clamp is a no-op whenever this holds). Float compute
  // and kTwoSided only; the CUDA kernels then run kTwoSidedUnclamped.
  static bool clamp_cannot_fire(const TruncNormalParams& r) {
    if (sizeof(T) != 4 || r.mode != kTwoSided) return false;
    const double upper = r.split == 0xffffffffu ? 1.0 : static_cast<double>(r.b_sf);
    const double s_min = static_cast<double>(r.a_cdf) < upper ? static_cast<double>(r.a_cdf) : upper;
    if (!(s_min >= 0x1p-120)) return false;
    const double l = s_min >= 0.5 ? 0.0 : ::log(0.5 / s_min);
    const double z = ::sqrt(2.0 * l) * (1.0 + 0x1p-10) + 0x1p-10;
    const double mean = static_cast<double>(r.mean),
                 sd = ::fabs(static_cast<double>(r.sd_hi)) + ::fabs(static_cast<double>(r.sd_lo));
    const double reach = sd * z;
    const double margin = reach + (::fabs(mean) + reach) * 0x1p-20 + 0x1p-140;
    return mean - margin > static_cast<double>(r.lo) && mean + margin < static_cast<double>(r.hi);
  }
};

// The mode a CUDA kernel runs a record with: its own, or kTwoSidedUnclamped.
template <typename T>
TINIT_HD int kernel_mode(const TruncNormalParams<T>& P) {
  return P.unclamped ? kTwoSidedUnclamped : P.mode;
}

TINIT_HD uint32_t float_as_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  return u;
#endif
}

TINIT_HD float bits_as_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, sizeof(x));
  return x;
#endif
}

// a * b and a + b, each rounded, never fused into an fma: on the host the
// fp_contract.h pragma holds, on the device the _rn intrinsics never fuse
// (whatever --fmad says). For the steps whose fusion changes values.
TINIT_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
TINIT_HD double mul_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
TINIT_HD float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
TINIT_HD double add_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}

// Correctly rounded a*b + c: one rounding on every backend.
TINIT_HD float fma_rn(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return __builtin_fmaf(a, b, c);
#endif
}
TINIT_HD double fma_rn(double a, double b, double c) {
#if defined(__CUDA_ARCH__)
  return __fma_rn(a, b, c);
#else
  return __builtin_fma(a, b, c);
#endif
}

// word * 2^-32 + 2^-33: in (0, 1) for double; for float, words >= 0xFFFFFF80
// round to 1.0 (float(word) keeps 24 bits), which is why the two-sided split
// (tinit.params._lower_side_split) sends them to the complement side. 1 - u is formed the
// same way from ~word.
template <typename T>
TINIT_HD T uniform_open(uint32_t w) {
  return fma_rn(static_cast<T>(w), static_cast<T>(2.3283064365386962890625e-10),
                static_cast<T>(1.16415321826934814453125e-10));
}

// Natural log for normal x > 0 (the tail mode's only log), Cephes logf
// polynomial on [sqrt(1/2), sqrt(2)); about 1 ulp.
TINIT_HD float log_pos(float x) {
  const uint32_t bits = float_as_bits(x);
  const float m0 = bits_as_float((bits & 0x007fffffu) | 0x3f000000u);  // [0.5, 1)
  const bool low = m0 < 0.70710678118654752f;
  const float e = static_cast<float>(static_cast<int>(bits >> 23) - (low ? 127 : 126));
  const float m = low ? (m0 + m0) - 1.0f : m0 - 1.0f;
  const float z = m * m;
  float y = 7.0376836292e-2f;
  y = fma_rn(y, m, -1.1514610310e-1f);
  y = fma_rn(y, m, 1.1676998740e-1f);
  y = fma_rn(y, m, -1.2420140846e-1f);
  y = fma_rn(y, m, 1.4249322787e-1f);
  y = fma_rn(y, m, -1.6668057665e-1f);
  y = fma_rn(y, m, 2.0000714765e-1f);
  y = fma_rn(y, m, -2.4999993993e-1f);
  y = fma_rn(y, m, 3.3333331174e-1f);
  y = y * m * z;
  y = fma_rn(e, -2.12194440e-4f, y);
  y = fma_rn(-0.5f, z, y);
  const float r = m + y;
  return fma_rn(e, 0.693359375f, r);
}

TINIT_HD uint64_t double_as_bits(double x) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint64_t>(__double_as_longlong(x));
#else
  uint64_t u;
  std::memcpy(&u, &x, sizeof(u));
  return u;
#endif
}

TINIT_HD double bits_as_double(uint64_t u) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(u));
#else
  double x;
  std::memcpy(&x, &u, sizeof(x));
  return x;
#endif
}

// Natural log for finite x > 0 (subnormal included) in double, IEEE basic
// operations only: fdlibm's __ieee754_log (Sun Microsystems, 1993), below
// 1 ulp. x = 2^k (1 + f), 1 + f in [sqrt(2)/2, sqrt(2)); with s = f / (2 + f),
// log(1 + f) = f - s (f - R(s^2)), R the minimax polynomial Lg1..Lg7;
// k ln2 is added as ln2_hi k (exact: ln2_hi has 32 bits) and ln2_lo k.
// Gives -inf for +0; the fills only pass normal x in (0, 1] (tail_value)
// and [~1e-25, 1/2 + 2^-25] (two_sided_value) or [1, ~2] (tail_correction).
TINIT_HD double log_pos(double x) {
  if (x == 0.0) return -1.0 / 0.0;
  int k = 0;
  uint64_t bits = double_as_bits(x);
  if ((bits >> 52) == 0) {  // subnormal: scale by 2^54
    k = -54;
    bits = double_as_bits(x * 18014398509481984.0);
  }
  uint32_t hx = static_cast<uint32_t>(bits >> 32);
  k += static_cast<int>(hx >> 20) - 1023;
  hx &= 0x000fffffu;
  const uint32_t i = (hx + 0x95f64u) & 0x100000u;  // 1 + f >= sqrt(2): halve it
  const double m = bits_as_double((static_cast<uint64_t>(hx | (i ^ 0x3ff00000u)) << 32) | (bits & 0xffffffffu));
  k += static_cast<int>(i >> 20);
  const double f = m - 1.0;
  const double dk = static_cast<double>(k);
  const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;
  const double s = f / (2.0 + f);
  const double z = s * s;
  const double w = z * z;
  const double t1 = w * (3.999999999940941908e-01 + w * (2.222219843214978396e-01 + w * 1.531383769920937332e-01));
  const double t2 =
      z * (6.666666666666735130e-01 +
           w * (2.857142874366239149e-01 + w * (1.818357216161805012e-01 + w * 1.479819860511658591e-01)));
  const double R = t2 + t1;
  if (hx >= 0x6147au && hx <= 0x6b851u) {  // |f| > 0.29 (fdlibm: (hx - 0x6147a) | (0x6b851 - hx) > 0)
    const double hfsq = 0.5 * f * f;
    return dk * ln2_hi - ((hfsq - (s * (hfsq + R) + dk * ln2_lo)) - f);
  }
  return dk * ln2_hi - ((s * (f - R) - dk * ln2_lo) - f);
}
TINIT_HD float sqrt_rn(float x) { return ::sqrtf(x); }
TINIT_HD double sqrt_rn(double x) { return ::sqrt(x); }

// c ? a : b through integer masks: compilers otherwise turn select-then-
// divide into two divisions and a select.
TINIT_HD float select_bits(bool c, float a, float b) {
  const uint32_t m = c ? 0xffffffffu : 0u;
  return bits_as_float((float_as_bits(a) & m) | (float_as_bits(b) & ~m));
}
TINIT_HD double select_bits(bool c, double a, double b) { return c ? a : b; }

// c0 + t (c1 + t (c2 + ...)), one fma per coefficient, highest first.
template <typename T>
TINIT_HD T horner(T, T c) {
  return c;
}
template <typename T, typename... Rest>
TINIT_HD T horner(T t, T c, Rest... rest) {
  return fma_rn(horner<T>(t, rest...), t, c);
}

// ------------------------------------------------------------ ndtri_table
// The coefficient rows (TINIT_NDTRI_COEFFICIENTS, fitted by the generator's
// segment_rows), in ndtri_segment order: the CPU's vector kernels read them.
alignas(16) static constexpr float kNdtriHost[kNdtriSegments * kNdtriRow] = TINIT_NDTRI_COEFFICIENTS;

// The same rows in reverse order, row 255 - t at position t: indexed by
// t = bits(s) >> 22 itself (ndtri_row), with no subtraction from 255. Device
// code reads its own copy in global memory (cached; lanes of a warp mostly
// share a few rows); constant memory would serialise lanes that read
// different rows.
struct NdtriByTop {
  float c[kNdtriSegments * kNdtriRow];
};
constexpr NdtriByTop ndtri_by_top() {
  NdtriByTop r{};
  for (int row = 0; row < kNdtriSegments; ++row) {
    for (int k = 0; k < kNdtriRow; ++k)
      r.c[(kNdtriSegments - 1 - row) * kNdtriRow + k] = kNdtriHost[row * kNdtriRow + k];
  }
  return r;
}
alignas(16) static constexpr NdtriByTop kNdtriByTopHost = ndtri_by_top();
#if defined(__CUDACC__)
alignas(16) static __device__ const NdtriByTop kNdtriByTopDevice = ndtri_by_top();
#endif

// The row of s in [0, 2): 255 - (bits >> 22), bits >> 22 = 2 E + the top
// mantissa bit (E the biased exponent). Rows 0..5 (s >= 1/4) hold the
// central polynomial (z = q P0(q^2)); then half binades of s,
// 2^(E-127) [1.5, 2) and [1, 1.5), for E = 124 down to 1. Every s in [0, 2)
// has a row, so no clamp is needed: valid_params keeps s in [0, 1.75].
TINIT_HD uint32_t ndtri_segment(float s) { return 255u - (float_as_bits(s) >> 22); }

// The coefficients of s's row ndtri_segment(s): row bits(s) >> 22 of the
// reversed copy. On the device the shift is opaque to ptxas, which would
// otherwise fold it into the multiply (a shift, a mask and a multiply-add);
// as written it is one shift and one multiply-add into the table's address.
TINIT_HD const float* ndtri_row(float s) {
#if defined(__CUDA_ARCH__)
  uint32_t top;
  asm("shr.b32 %0, %1, 22;" : "=r"(top) : "r"(float_as_bits(s)));
  return kNdtriByTopDevice.c + static_cast<uint64_t>(top) * kNdtriRow;
#else
  return kNdtriByTopHost.c + static_cast<uint64_t>(float_as_bits(s) >> 22) * kNdtriRow;
#endif
}

// The variable of the row's polynomial: q^2 for row 0, else r in [-1/4, 1/4)
// with s = 2^(E-127) (1.25 + r) or (1.75 + r) (exact, from the mantissa bits).
TINIT_HD float ndtri_variable(float s, float q, bool central, uint32_t one_bits) {
  const float r = bits_as_float((float_as_bits(s) & 0x003fffffu) | one_bits) - 1.25f;
  return central ? q * q : r;
}

// The row's polynomial P(t) = c0 + t (c1 + ... t c6) as the pair
// p_hi + p_lo (p_lo carries c0's second float and the last fma's rounding;
// c0 - p_hi is exact, as |t (c1 + ...)| < |c0| / 2 in every row).
TINIT_HD float ndtri_poly(const float* c, float t, float& p_lo) {
  const float acc = horner<float>(t, c[1], c[2], c[3], c[4], c[5], c[6]);
  const float p_hi = fma_rn(acc, t, c[0]);
  p_lo = fma_rn(acc, t, c[0] - p_hi) + c[7];
  return p_hi;
}
TINIT_HD float ndtri_poly(const float* c, float t) {
  return fma_rn(horner<float>(t, c[1], c[2], c[3], c[4], c[5], c[6]), t, c[0]);
}

// Phi^-1(s) <= 0 for s in [2^-125, 1/2], q = s - 1/2, to 1.87 2^-24 of
// max(|z|, 1), from one degree-6 polynomial per row: z = m P(t) with
// m = q on row 0 and 1 on the others. No log, no branch, no division.
TINIT_HD float ndtri_table(float s, float q, uint32_t one_bits) {
  const bool central = s >= 0.25f;
  const float* c = ndtri_row(s);
  const float p = ndtri_poly(c, ndtri_variable(s, q, central, one_bits));
  return central ? q * p : p;
}

// The same z as the pair z_hi + z_lo (precise mode).
TINIT_HD float ndtri_table_pair(float s, float q, float& z_lo, uint32_t one_bits) {
  const bool central = s >= 0.25f;
  const float* c = ndtri_row(s);
  float p_lo;
  const float p_hi = ndtri_poly(c, ndtri_variable(s, q, central, one_bits), p_lo);
  const float m = central ? q : 1.0f;
  const float z_hi = m * p_hi;
  z_lo = fma_rn(m, p_hi, -z_hi) + m * p_lo;
  return z_hi;
}

// -------------------------------------------------------- fp64 inverse CDF
// Phi^-1(s) for s in (0, 1/2], given q = s - 1/2 and log(s), in double.
// Wichura, "Algorithm AS 241: The percentage points of the normal
// distribution", Applied Statistics 37(3), 1988 (PPND16 coefficients). The
// central and tail rationals are both evaluated and selected per lane.
TINIT_HD double ndtri_lower_f64(double q, double log_s) {
  using A = double;
  const bool central = q >= A(-0.425);
  const A tc = fma_rn(-q, q, A(0.180625));
  const A num_c = horner<A>(tc, A(3.3871328727963666080e+0), A(1.3314166789178437745e+2), A(1.9715909503065514427e+3),
                            A(1.3731693765509461125e+4), A(4.5921953931549871457e+4), A(6.7265770927008700853e+4),
                            A(3.3430575583588128105e+4), A(2.5090809287301226727e+3));
  const A den_c = horner<A>(tc, A(1), A(4.2313330701600911252e+1), A(6.8718700749205790830e+2),
                            A(5.3941960214247511077e+3), A(2.1213794301586595867e+4), A(3.9307895800092710610e+4),
                            A(2.8729085735721942674e+4), A(5.2264952788528545610e+3));
  const A rt = sqrt_rn(-log_s);
  const bool far = rt > A(5);
  const A tt = far ? rt - A(5) : rt - A(1.6);
#define TINIT_C(near_coef, far_coef) (far ? A(far_coef) : A(near_coef))
  const A num_t = horner<A>(tt, TINIT_C(1.42343711074968357734e+0, 6.65790464350110377720e+0),
                            TINIT_C(4.63033784615654529590e+0, 5.46378491116411436990e+0),
                            TINIT_C(5.76949722146069140550e+0, 1.78482653991729133580e+0),
                            TINIT_C(3.64784832476320460504e+0, 2.96560571828504891230e-1),
                            TINIT_C(1.27045825245236838258e+0, 2.65321895265761230930e-2),
                            TINIT_C(2.41780725177450611770e-1, 1.24266094738807843860e-3),
                            TINIT_C(2.27238449892691845833e-2, 2.71155556874348757815e-5),
                            TINIT_C(7.74545014278341407640e-4, 2.01033439929228813265e-7));
  const A den_t = horner<A>(tt, A(1), TINIT_C(2.05319162663775882187e+0, 5.99832206555887937690e-1),
                            TINIT_C(1.67638483018380384940e+0, 1.36929880922735805310e-1),
                            TINIT_C(6.89767334985100004550e-1, 1.48753612908506148525e-2),
                            TINIT_C(1.48103976427480074590e-1, 7.86869131145613259100e-4),
                            TINIT_C(1.51986665636164571966e-2, 1.84631831751005468180e-5),
                            TINIT_C(5.47593808499534494600e-4, 1.42151175831644588870e-7),
                            TINIT_C(1.05075007164441684324e-9, 2.04426310338993978564e-15));
#undef TINIT_C
  const A ratio = select_bits(central, num_c, num_t) / select_bits(central, den_c, den_t);
  return central ? q * ratio : -ratio;
}

// ------------------------------------------------------------------ modes

// x is never NaN nor -0 (the host writes +0 for every zero constant, no
// step of the unscaled modes turns +0 operands into -0, and rescale writes
// an underflowed -0 as +0), so the compare form and the GPU's min/max
// instructions agree bit for bit.
template <typename T>
TINIT_HD T clamp_to(T x, const TruncNormalParams<T>& P) {
#if defined(__CUDA_ARCH__)
  return sizeof(T) == 4 ? fminf(fmaxf(x, P.lo), P.hi) : fmin(fmax(x, P.lo), P.hi);
#else
  const T c = x < P.lo ? P.lo : x;
  return c > P.hi ? P.hi : c;
#endif
}

// The scaled modes' last step: x scale, with a negative value that
// underflows to -0 written as +0 (so that every backend's clamp agrees).
template <typename T>
TINIT_HD T rescale(T x, T scale) {
  return add_rn(mul_rn(x, scale), T(0));
}

// kUniform: x = (edge + width g(u)) scale, g(u) = u + slope u (u - 1), the
// inverse of the CDF t + slope' (t^2 - t) / 2 of a linear density to first
// order (scale 2 only for windows wider than the fp32 maximum).
template <typename T>
TINIT_HD T uniform_value(uint32_t w, const TruncNormalParams<T>& P) {
  const T u = uniform_open<T>(w);
  const T g = fma_rn(P.slope * u, u - T(1), u);
  return clamp_to<T>(rescale<T>(fma_rn(P.width, g, P.edge), P.scale), P);
}

// The probability s <= 1/2 inverted for word w (flipped) in the two-sided
// modes, s = s0 + step w' (one rounding; w' = w on the lower side, ~w on the
// upper), q = s - 1/2 formed from its own constant, and the side: lower
// (z = Phi^-1(s) <= 0) or upper (z = -Phi^-1(s)).
template <typename T>
TINIT_HD T two_sided_s(uint32_t w, const TruncNormalParams<T>& P, bool& lower, T& q) {
  lower = w <= P.split;
#if defined(__CUDA_ARCH__)
  // lower ? w : ~w as a compare and a predicated NOT: left to itself, ptxas
  // picks a compare, a select of a mask and an XOR where split is in a
  // register (the grouped kernel's record) rather than the constant bank.
  uint32_t wl;
  asm("{\n\t.reg .pred up;\n\tsetp.hi.u32 up, %1, %2;\n\tmov.b32 %0, %1;\n\t@up not.b32 %0, %1;\n\t}"
      : "=r"(wl)
      : "r"(w), "r"(P.split));
  const T fw = static_cast<T>(wl);
#else
  const T fw = static_cast<T>(lower ? w : ~w);
#endif
  q = fma_rn(fw, P.step, lower ? P.a_half : P.b_half);
  return fma_rn(fw, P.step, lower ? P.a_cdf : P.b_sf);
}

// kTwoSided, float compute: x = mean + (sd_hi + sd_lo) z, one rounding of
// the product's main term. Clamp false: kTwoSidedUnclamped (P.unclamped).
template <bool Clamp = true>
TINIT_HD float two_sided_value(uint32_t w, const TruncNormalParams<float>& P) {
  bool lower;
  float q;
  const float s = two_sided_s(w ^ P.flip, P, lower, q);
  const float zl = ndtri_table(s, q, P.one_bits);
  const float z = lower ? zl : -zl;
  const float x = fma_rn(P.sd_hi, z, fma_rn(P.sd_lo, z, P.mean));
  return Clamp ? clamp_to<float>(x, P) : x;
}

// kTwoSidedPrecise, float compute: z = z_hi + z_lo, then
// (fma(sd_hi, z_hi, mean) + (sd_hi z_lo + sd_lo z_hi)) scale: the cancelling
// sum is rounded once, its small terms added after it.
TINIT_HD float two_sided_precise_value(uint32_t w, const TruncNormalParams<float>& P) {
  bool lower;
  float q;
  const float s = two_sided_s(w ^ P.flip, P, lower, q);
  float zl_lo;
  const float zl_hi = ndtri_table_pair(s, q, zl_lo, P.one_bits);
  const float z_hi = lower ? zl_hi : -zl_hi;
  const float z_lo = lower ? zl_lo : -zl_lo;
  const float main = fma_rn(P.sd_hi, z_hi, P.mean);
  const float small = fma_rn(P.sd_hi, z_lo, P.sd_lo * z_hi);
  return clamp_to<float>(rescale<float>(main + small, P.scale), P);
}

// Mills ratio R(y) = Q(y) / phi(y), double only: Laplace's continued
// fraction 1/(y + 1/(y + 2/(y + 3/(y + ...)))), evaluated from `terms` terms
// down. Against mpmath: 16 terms reach 1.5e-18 relative at y = 8 (the tail
// mode, y >= 8; checked by test_f64_tail_window_far_from_the_mean); for the
// two-sided refinement (y >= 2) 32 terms 1e-16 at y = 4, 48 2.5e-16 at y = 3,
// 64 3.7e-16 at y = 2.5, 128 7e-19 at y = 2.
TINIT_HD double mills_ratio(double y, int terms = 16) {
  double t = 0.0;
  for (int k = terms; k >= 1; --k) t = k / (y + t);
  return 1.0 / (y + t);
}

// The two-sided modes in double (fp64 tensors): z = AS 241, then, for
// z < -2, one Newton step on log Phi, z1 = z - (log Phi(z) - log s) R(-z),
// log Phi(z) = -z^2/2 - log sqrt(2 pi) + log R(-z), with z^2 as an exact pair.
// AS 241 is within ~4 ulp of z; the step leaves the error of log s (half an
// ulp of |log s| <= 38, divided by |z|) and keeps the correction dz apart,
// x = mean + sd z + sd dz, so a value where mean + sd z cancels (mean many
// std from a window near 0) keeps its digits.
TINIT_HD double two_sided_value(uint32_t w, const TruncNormalParams<double>& P) {
  bool lower;
  double q;
  const double s = two_sided_s(w ^ P.flip, P, lower, q);
  const double log_s = log_pos(s);
  const double zl = ndtri_lower_f64(q, log_s);
  double dzl = 0.0;
  if (zl < -2.0) {
    const double y = -zl;
    const double r = mills_ratio(y, y >= 4.0 ? 32 : y >= 3.0 ? 48 : y >= 2.5 ? 64 : 128);
    const double h = 0.5 * y * y;
    const double h_lo = 0.5 * fma_rn(y, y, -(y * y));
    // g = log Phi(z) - log s, log sqrt(2 pi) = 0.918938533204672741780... as a pair
    const double g = ((-h - log_s) - 0.9189385332046728) + ((log_pos(r) - h_lo) + 3.8782941580672414e-17);
    dzl = -g * r;
  }
  const double z = lower ? zl : -zl;
  const double dz = lower ? dzl : -dzl;
  const double x = fma_rn(P.sd_hi, z, fma_rn(P.sd_lo, z, P.mean));
  return clamp_to<double>(rescale<double>(fma_rn(P.sd_hi, dz, x), P.scale), P);
}

// l(e) = log(R(b0) / R(b0 + e)), R(y) = Q(y) / phi(y): the tail mode's
// correction to the quadratic e^2/2 + b0 e. Float: the host's polynomial
// (tinit.params, interpolated over the window's e range); double: from
// mills_ratio.
TINIT_HD float tail_correction(float e, const TruncNormalParams<float>& P, float& slope) {
  slope = horner<float>(e, P.l1, 2.0f * P.l2, 3.0f * P.l3, 4.0f * P.l4, 5.0f * P.l5);
  return e * horner<float>(e, P.l1, P.l2, P.l3, P.l4, P.l5);
}
TINIT_HD double tail_correction(double e, const TruncNormalParams<double>& P, double& slope) {
  const double y = P.b0 + e;
  const double r = mills_ratio(y);
  slope = 1.0 / r - y;  // l'(e)
  return log_pos(mills_ratio(P.b0) / r);
}

// kTail: the excursion e >= 0 of the mirrored deviate y = -z = b0 + e from
// the nearer bound, with Q(b0 + e) / Q(b0) = 1 - v = u + ratio (1 - u), i.e.
// e^2/2 + b0 e + l(e) = L = -log(u + ratio (1 - u)). Start from the root of
// the quadratic (l = 0), then Newton steps (2 in float, 3 in double: the
// start is within ~1/b0^2 of the root). Value x = edge - sd e.
template <typename T>
TINIT_HD T tail_value(uint32_t w, const TruncNormalParams<T>& P) {
  const uint32_t wf = w ^ P.flip;
  const T u = uniform_open<T>(wf);  // large words: u near 1, e near 0
  const T uc = uniform_open<T>(~wf);
  const T L = -log_pos(fma_rn(P.ratio, uc, u));
  T e = (L + L) / (P.b0 + sqrt_rn(fma_rn(P.b0, P.b0, L + L)));
#if defined(__CUDACC__)
#pragma unroll
#endif
  for (int k = 0; k < (sizeof(T) == 4 ? 2 : 3); ++k) {
    T dl;
    const T l = tail_correction(e, P, dl);
    const T f = fma_rn(e, fma_rn(T(0.5), e, P.b0), add_rn(l, -L));
    e = e - f / (P.b0 + e + dl);
  }
  e = e > T(0) ? e : T(0);
  return clamp_to<T>(rescale<T>(fma_rn(-P.sd_hi, e, fma_rn(-P.sd_lo, e, P.edge)), P.scale), P);
}

// The value of word w in the tensor's compute type, inside [lo, hi].
template <typename T, int Mode>
TINIT_HD T trunc_normal_value(uint32_t w, const TruncNormalParams<T>& P) {
  if constexpr (Mode == kUniform) {
    return uniform_value<T>(w, P);
  } else if constexpr (Mode == kTail) {
    return tail_value<T>(w, P);
  } else if constexpr (Mode == kTwoSidedPrecise && sizeof(T) == 4) {
    return two_sided_precise_value(w, P);
  } else if constexpr (Mode == kTwoSidedUnclamped && sizeof(T) == 4) {
    return two_sided_value<false>(w, P);
  } else {
    return two_sided_value(w, P);
  }
}

// Round-to-nearest-even fp32 -> bf16 bits (inputs are finite).
TINIT_HD uint16_t float_to_bf16_bits(float x) {
  const uint32_t u = float_as_bits(x);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

}  // namespace tinit
