// Uniform word -> truncated normal, usable from host and device code.
//
// Computed in T = float for fp32/bf16/fp16 tensors and T = double for fp64
// tensors, from IEEE basic operations only (+ - * / sqrt, compares and bit
// casts): no libm/libdevice calls on the float path, no fused multiply-add
// (builds use -ffp-contract=off / --fmad=false; fused steps are explicit
// fma_rn calls, correctly rounded everywhere), so every backend computes the
// same float bits. The stream that feeds it is defined in tinit/philox.h.
//
// Sampling x ~ N(mean, std^2) truncated to [a, b] by inversion:
//   alpha = (a - mean) / std, beta = (b - mean) / std
//   x = mean + std * Phi^-1(Phi(alpha) + u (Phi(beta) - Phi(alpha)))
// The window is first mirrored so that its heavier side is the lower tail
// (alpha' = -beta, beta' = -alpha, sign = -1 when alpha > -beta; the mirrored
// frame then takes the complement word ~w, so in every case the value is
// x = F^-1(u), increasing in the word). Then
//   two-sided mode: p = Phi(alpha') + u D and q = Q(beta') + (1-u) D are both
//     formed from small, accurate terms (D = Phi(beta') - Phi(alpha'),
//     Q = 1 - Phi); the smaller of the two is inverted, so neither tail loses
//     digits to cancellation near 1. Which one is smaller is decided on the
//     word itself: p <= q exactly when word <= split (a host constant), so
//     only one uniform is formed per element. The far-tail branch of the
//     inverse (s < e^-25) is compiled in only when the window can reach it;
//     windows inside |z| <~ 3.3 (float compute) use one division-free
//     polynomial instead (central_stage1 + central_finish; fp32 tensors
//     finish it in fp64).
//   tail mode (whole window beyond 10.4 sigma for float, 37 for double, where
//     Phi underflows or D has no digits left): log p = log Phi(beta')
//     + log(u + r (1-u)) with r = Phi(alpha')/Phi(beta'), inverted with the
//     asymptotic Mills-ratio series.
// The per-tensor constants come from tinit/params.py (fp64, packed as
// kParamCount doubles in the order of TruncNormalParams below).
#pragma once

#include <cstdint>
#include <cstring>
#if !defined(__CUDACC__)
#include <cmath>
#endif

#include "tinit/philox.h"

namespace tinit {

enum TransformMode : int {
  kTwoSided = 0,     // AS 241 central + tail branches
  kTail = 1,         // log-space tail sampling
  kTwoSidedFar = 2,  // AS 241 with its far-tail branch
  kCentral = 3,      // one polynomial, for windows inside |z| <~ 3.3
};
constexpr int kParamCount = 14;

template <typename T>
struct TruncNormalParams {
  int mode;      // TransformMode
  T sign;        // +1, or -1 when the window was mirrored
  uint32_t flip;   // ~0 when mirrored: the mirrored frame uses word ~w, so
                   // the value is increasing in w (x = F^-1(u)) either way
  T a_cdf;       // Phi(alpha')
  T b_sf;        // 1 - Phi(beta')
  T mass;        // Phi(beta') - Phi(alpha')
  T log_b_cdf;   // log Phi(beta')                (tail mode)
  T ratio;       // Phi(alpha') / Phi(beta')      (tail mode)
  uint32_t split;  // words <= split take the lower side (two-sided modes)
  T mean, std;   // tensor units
  T lo, hi;      // [a, b] shrunk to values representable in the tensor dtype
  T a_half;      // Phi(alpha') - 1/2  } so the central branches get q = s - 1/2
  T b_half;      // 1/2 - Phi(beta')   } without cancellation (narrow windows)

  static TruncNormalParams from_packed(const double* p) {
    TruncNormalParams r;
    r.mode = static_cast<int>(p[0]);
    r.sign = static_cast<T>(p[1]);
    r.flip = p[1] < 0 ? 0xffffffffu : 0u;
    r.a_cdf = static_cast<T>(p[2]);
    r.b_sf = static_cast<T>(p[3]);
    r.mass = static_cast<T>(p[4]);
    r.log_b_cdf = static_cast<T>(p[5]);
    r.ratio = static_cast<T>(p[6]);
    r.split = static_cast<uint32_t>(p[7]);
    r.mean = static_cast<T>(p[8]);
    r.std = static_cast<T>(p[9]);
    r.lo = static_cast<T>(p[10]);
    r.hi = static_cast<T>(p[11]);
    r.a_half = static_cast<T>(p[12]);
    r.b_half = static_cast<T>(p[13]);
    return r;
  }
};

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

// Correctly rounded a*b + c: one rounding on every backend (hardware FMA on
// x86-64-v3+, CUDA and Triton), so results stay bit-identical while each
// Horner step costs one instruction.
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
// (tinit/params.py) sends them to the complement side. 1 - u is formed the
// same way from ~word.
template <typename T>
TINIT_HD T uniform_open(uint32_t w) {
  return fma_rn(static_cast<T>(w), static_cast<T>(2.3283064365386962890625e-10),
                static_cast<T>(1.16415321826934814453125e-10));
}

// Natural log for normal x > 0 (callers never pass subnormals: see the
// tail-mode edge in tinit/params.py), Cephes logf polynomial on
// [sqrt(1/2), sqrt(2)); about 1 ulp.
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

TINIT_HD double log_pos(double x) { return ::log(x); }
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

// Phi^-1(s) for s in (0, 1/2], given q = s - 1/2 and log(s). Wichura, "Algorithm AS 241:
// The percentage points of the normal distribution", Applied Statistics
// 37(3), 1988 (PPND16 coefficients). The central and tail rationals are both
// evaluated (two independent fma chains) and selected per lane, so the loop
// vectorises without divergent control flow; Far = false drops the s < e^-25
// branch for windows that cannot reach it.
//
// A is the precision of the rationals. In fp32 they lose up to ~4.5 ulp, so
// fp32 tensors evaluate them in fp64 from the fp32 inputs (result within
// ~1 ulp); bf16/fp16 tensors, whose ulp is 2^16 / 2^13 times coarser, use
// fp32 (A = T).
template <typename T, bool Far = true, typename A = T>
TINIT_HD A ndtri_lower(T q_in, T log_s_in) {
  const A q = q_in, log_s = log_s_in;
  const bool central = q >= A(-0.425);
  const A tc = fma_rn(-q, q, A(0.180625));
  const A num_c = horner<A>(tc, A(3.3871328727963666080e+0), A(1.3314166789178437745e+2),
                            A(1.9715909503065514427e+3), A(1.3731693765509461125e+4),
                            A(4.5921953931549871457e+4), A(6.7265770927008700853e+4),
                            A(3.3430575583588128105e+4), A(2.5090809287301226727e+3));
  const A den_c = horner<A>(tc, A(1), A(4.2313330701600911252e+1), A(6.8718700749205790830e+2),
                            A(5.3941960214247511077e+3), A(2.1213794301586595867e+4),
                            A(3.9307895800092710610e+4), A(2.8729085735721942674e+4),
                            A(5.2264952788528545610e+3));
  const A rt = sqrt_rn(-log_s);
  const bool far = Far && rt > A(5);
  const A tt = far ? rt - A(5) : rt - A(1.6);
#define TINIT_C(near_coef, far_coef) (far ? A(far_coef) : A(near_coef))
  const A num_t = horner<A>(
      tt, TINIT_C(1.42343711074968357734e+0, 6.65790464350110377720e+0),
      TINIT_C(4.63033784615654529590e+0, 5.46378491116411436990e+0),
      TINIT_C(5.76949722146069140550e+0, 1.78482653991729133580e+0),
      TINIT_C(3.64784832476320460504e+0, 2.96560571828504891230e-1),
      TINIT_C(1.27045825245236838258e+0, 2.65321895265761230930e-2),
      TINIT_C(2.41780725177450611770e-1, 1.24266094738807843860e-3),
      TINIT_C(2.27238449892691845833e-2, 2.71155556874348757815e-5),
      TINIT_C(7.74545014278341407640e-4, 2.01033439929228813265e-7));
  const A den_t = horner<A>(
      tt, A(1), TINIT_C(2.05319162663775882187e+0, 5.99832206555887937690e-1),
      TINIT_C(1.67638483018380384940e+0, 1.36929880922735805310e-1),
      TINIT_C(6.89767334985100004550e-1, 1.48753612908506148525e-2),
      TINIT_C(1.48103976427480074590e-1, 7.86869131145613259100e-4),
      TINIT_C(1.51986665636164571966e-2, 1.84631831751005468180e-5),
      TINIT_C(5.47593808499534494600e-4, 1.42151175831644588870e-7),
      TINIT_C(1.05075007164441684324e-9, 2.04426310338993978564e-15));
#undef TINIT_C
  // Select before dividing (bitwise, so the compiler keeps one division).
  const A ratio = select_bits(central, num_c, num_t) / select_bits(central, den_c, den_t);
  return central ? q * ratio : -ratio;
}

// Phi^-1(s) for s in [e^-6.25 / 4, 1/2] (|z| <= 3.3): z = -x G(w) with
// x = 1 - 2s, w = -log(4 s (1 - s)) = -log(1 - x^2) in [0, 6.25] and G a
// degree-12 polynomial in w - 3.125 (least-squares fit of sqrt(2) erfinv(x)/x,
// relative error 2e-9; the same variables as Giles, "Approximating the
// erfinv function", GPU Computing Gems Jade, 2011). No division, square root
// or branch: the mode for the +-2 and +-3 sigma windows of weight init.
// central_poly_tail gives the degree >= 1 part h of G (G = c0 + v h with
// v = w - 3.125); 4 s (1 - s) is formed from q = s - 1/2 near the centre and
// from s towards the tails, whichever keeps its digits.
template <typename T>
TINIT_HD T central_poly_tail(T q, T s, T& v) {
  const T y = q > T(-0.25) && q < T(0.25) ? fma_rn(T(-4) * q, q, T(1))
                                          : T(4) * fma_rn(-s, s, s);
  const T w = -log_pos(y);
  v = w - T(3.125);
  return horner<T>(v, T(3.39634954474917872e-01), T(-8.53289995011116860e-03),
                   T(-1.04749843972010777e-03), T(2.64083328814145697e-04),
                   T(-1.96445117269990424e-05), T(-1.93183641443874362e-06),
                   T(6.03361620658563376e-07), T(-4.09017025663115202e-08),
                   T(-6.66849891677600610e-09), T(1.46103378864113002e-09),
                   T(5.96620113740977795e-12), T(-1.76240363502017303e-11));
}
constexpr double kCentralC0 = 2.33862071010127481e+00;

// Central mode, second stage, in A: the last Horner step, the product with
// d = 2s - 1 = 2q and mean + signed_std z, rounded to float once. fp32
// tensors use A = double (~2 ulp; in fp32 this reaches ~4.6 ulp where x sits
// just below a power of two), bf16/fp16 tensors A = float. The CPU kernel
// runs the two stages as two loops (fused, GCC's AVX-512 code for them ran
// 2-4x slower, measured).
template <typename A>
TINIT_HD float central_finish(float d, float v, float h, float signed_std, float mean) {
  const A g = fma_rn(A(v), A(h), A(kCentralC0));
  const A t = A(d) * g;  // (2s - 1) g
  return static_cast<float>(fma_rn(A(signed_std), t, A(mean)));
}

// y > 0 with log Q(y) = log_p, for y beyond 10.4 (float) / 37 (double):
// fixed point of y^2/2 = c - log y + log M(y), c = -log_p - log(sqrt(2 pi)),
// M(y) = y Q(y) / phi(y) = 1 - 1/y^2 + 3/y^4 - 15/y^6 + ... (Abramowitz &
// Stegun 26.2.12). The map contracts by ~1/y^2, so a fixed count converges.
template <typename T>
TINIT_HD T upper_tail_quantile_from_log(T log_p) {
  const T c = -log_p - T(0.91893853320467274178);
  T y = sqrt_rn(c + c);
  constexpr int iterations = sizeof(T) == 4 ? 4 : 6;
#if defined(__CUDACC__)
#pragma unroll
#else
#pragma GCC unroll 8
#endif
  for (int k = 0; k < iterations; ++k) {
    const T t = T(1) / (y * y);
    T m = T(10395);
    m = m * t - T(945);
    m = m * t + T(105);
    m = m * t - T(15);
    m = m * t + T(3);
    m = m * t - T(1);
    m = m * t + T(1);
    const T h = c - log_pos(y) + log_pos(m);
    y = sqrt_rn(h + h);
  }
  return y;
}

// The probability s inverted for word w in the two-sided modes, q = s - 1/2
// formed from its own host constant (exact where s is near 1/2, e.g. windows
// narrow compared with std), and which side (lower: z = Phi^-1(s) <= 0;
// upper: z = -Phi^-1(s)) the word belongs to.
template <typename T>
TINIT_HD T two_sided_s(uint32_t w, const TruncNormalParams<T>& P, bool& lower, T& q) {
  lower = w <= P.split;
  const T u = uniform_open<T>(lower ? w : ~w);
  q = fma_rn(u, P.mass, lower ? P.a_half : P.b_half);
  return fma_rn(u, P.mass, lower ? P.a_cdf : P.b_sf);
}

// Standard-normal deviate for word w (already flipped), in the mirrored
// frame, in precision A (see ndtri_lower).
template <typename T, int Mode, typename A = T>
TINIT_HD A standard_deviate(uint32_t w, const TruncNormalParams<T>& P) {
  if (Mode == kTail) {
    const T u = uniform_open<T>(w);
    const T uc = uniform_open<T>(~w);
    const T log_p = P.log_b_cdf + log_pos(u + P.ratio * uc);
    return -A(upper_tail_quantile_from_log<T>(log_p));
  }
  bool lower;
  T q;
  const T s = two_sided_s(w, P, lower, q);
  // kCentral is handled in trunc_normal_value (float compute only).
  const A z = ndtri_lower<T, Mode == kTwoSidedFar, A>(q, log_pos(s));
  return lower ? z : -z;
}

// The value for word w in tensor units, inside [lo, hi]. With A wider than
// T, mean + std z is formed in A and rounded to T once.
template <typename T>
TINIT_HD T clamp_to(T x, const TruncNormalParams<T>& P) {
  const T c = x < P.lo ? P.lo : x;
  return c > P.hi ? P.hi : c;
}

// Central mode, first stage (float compute): d = 2s - 1 = 2q, v, h and the
// signed std.
TINIT_HD void central_stage1(uint32_t word, const TruncNormalParams<float>& P,
                                 float& d, float& v, float& h, float& signed_std) {
  bool lower;
  float q;
  const float s = two_sided_s(word ^ P.flip, P, lower, q);
  h = central_poly_tail(q, s, v);
  d = q + q;
  signed_std = (lower ? P.std : -P.std) * P.sign;
}

template <typename T, int Mode, typename A = T>
TINIT_HD T trunc_normal_value(uint32_t word, const TruncNormalParams<T>& P) {
  if constexpr (Mode == kCentral && sizeof(T) == 4) {
    float d, v, h, signed_std;
    central_stage1(word, P, d, v, h, signed_std);
    return clamp_to<T>(central_finish<A>(d, v, h, signed_std, P.mean), P);
  } else {
    const A z = standard_deviate<T, Mode, A>(word ^ P.flip, P) * A(P.sign);
    return clamp_to<T>(static_cast<T>(fma_rn(A(P.std), z, A(P.mean))), P);
  }
}

// Round-to-nearest-even fp32 -> bf16 bits (inputs are finite).
TINIT_HD uint16_t float_to_bf16_bits(float x) {
  const uint32_t u = float_as_bits(x);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

}  // namespace tinit
