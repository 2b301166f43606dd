// AVX-512 entries of the two-sided modes (transform_avx512.h).
//
// The same operations, in the same order, as two_sided_value and
// two_sided_precise_value of tinit/transform.h, sixteen lanes at a time, so
// the bits equal the portable code's (tests compare the two). What changes
// is how a lane finds its row of the ndtri table: rows 0..31 (s >= 2^-15,
// all but ~6e-5 of the lanes) sit transposed in registers and one vpermt2ps
// per coefficient selects them; a vector with any deeper lane gathers its
// rows from memory instead. The compiler cannot do this itself: it
// vectorises the portable loop with eight gathers per vector, which is
// several times slower (measured in bench/bench_trunc_normal.py).
#include "transform_avx512.h"

#if defined(__GNUC__) && defined(__x86_64__)

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <immintrin.h>

#include "tinit/transform.h"

#define TINIT_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma")))

namespace tinit {
namespace cpu {
namespace {

// Coefficient k of rows 0..31, as two 16-float halves.
struct FastRows {
  alignas(64) float c[kNdtriRow][kNdtriFastSegments];
  FastRows() {
    for (int k = 0; k < kNdtriRow; ++k)
      for (int r = 0; r < kNdtriFastSegments; ++r) c[k][r] = kNdtriHost[r * kNdtriRow + k];
  }
};
const FastRows kFast;

struct Coefs {
  __m512 c[kNdtriRow];
};

TINIT_AVX512 inline Coefs fast_coefs(const __m512 lo[kNdtriRow], const __m512 hi[kNdtriRow],
                                     __m512i seg) {
  Coefs r;
  for (int k = 0; k < kNdtriRow; ++k) r.c[k] = _mm512_permutex2var_ps(lo[k], seg, hi[k]);
  return r;
}

TINIT_AVX512 inline Coefs gathered_coefs(__m512i seg) {  // seg in [0, 255]: valid_params
  Coefs r;
  const __m512i base = _mm512_slli_epi32(seg, 3);
  for (int k = 0; k < kNdtriRow; ++k) {
    r.c[k] = _mm512_i32gather_ps(_mm512_add_epi32(base, _mm512_set1_epi32(k)), kNdtriHost, 4);
  }
  return r;
}

TINIT_AVX512 inline __m512 fma(__m512 a, __m512 b, __m512 c) { return _mm512_fmadd_ps(a, b, c); }

// clamp_to. vmaxps(x, lo) returns lo when x == lo, the same bits unless x
// and lo are zeros of opposite signs, so a zero bound takes the compares.
TINIT_AVX512 inline __m512 clamp16(__m512 x, const TruncNormalParams<float>& P) {
  const __m512 lo = _mm512_set1_ps(P.lo), hi = _mm512_set1_ps(P.hi);
  if (P.lo != 0.0f && P.hi != 0.0f) return _mm512_min_ps(_mm512_max_ps(x, lo), hi);
  x = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ), x, lo);
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, hi, _CMP_GT_OQ), x, hi);
}

template <bool Precise>
TINIT_AVX512 inline __m512 two_sided16(__m512i w, const TruncNormalParams<float>& P,
                                       const __m512 lo_rows[kNdtriRow],
                                       const __m512 hi_rows[kNdtriRow]) {
  // two_sided_s
  const __m512i wf = _mm512_xor_si512(w, _mm512_set1_epi32(static_cast<int>(P.flip)));
  const __mmask16 lower = _mm512_cmple_epu32_mask(wf, _mm512_set1_epi32(static_cast<int>(P.split)));
  const __m512i wsel = _mm512_mask_blend_epi32(lower, _mm512_xor_si512(wf, _mm512_set1_epi32(-1)), wf);
  const __m512 fw = _mm512_cvtepu32_ps(wsel);
  const __m512 step = _mm512_set1_ps(P.step);
  const __m512 q = fma(fw, step, _mm512_mask_blend_ps(lower, _mm512_set1_ps(P.b_half),
                                                      _mm512_set1_ps(P.a_half)));
  const __m512 s = fma(fw, step, _mm512_mask_blend_ps(lower, _mm512_set1_ps(P.b_sf),
                                                      _mm512_set1_ps(P.a_cdf)));
  // ndtri_segment, ndtri_variable
  const __mmask16 central = _mm512_cmp_ps_mask(s, _mm512_set1_ps(0.25f), _CMP_GE_OQ);
  const __m512i bits = _mm512_castps_si512(s);
  const __m512i seg = _mm512_sub_epi32(_mm512_set1_epi32(255), _mm512_srli_epi32(bits, 22));
  const __m512 r = _mm512_sub_ps(
      _mm512_castsi512_ps(_mm512_or_si512(_mm512_and_si512(bits, _mm512_set1_epi32(0x003fffff)),
                                          _mm512_set1_epi32(0x3f800000))),
      _mm512_set1_ps(1.25f));
  const __m512 t = _mm512_mask_blend_ps(central, r, _mm512_mul_ps(q, q));
  const bool fast = _mm512_cmpge_epi32_mask(seg, _mm512_set1_epi32(kNdtriFastSegments)) == 0;
  const Coefs c = fast ? fast_coefs(lo_rows, hi_rows, seg) : gathered_coefs(seg);
  // ndtri_poly
  __m512 acc = fma(c.c[6], t, c.c[5]);
  acc = fma(acc, t, c.c[4]);
  acc = fma(acc, t, c.c[3]);
  acc = fma(acc, t, c.c[2]);
  acc = fma(acc, t, c.c[1]);
  const __m512 p_hi = fma(acc, t, c.c[0]);
  const __m512 sign = _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(0x80000000u)));
  __m512 x;
  if constexpr (!Precise) {
    const __m512 zl = _mm512_mask_blend_ps(central, p_hi, _mm512_mul_ps(q, p_hi));
    const __m512 z = _mm512_mask_blend_ps(lower, _mm512_xor_ps(zl, sign), zl);
    x = fma(_mm512_set1_ps(P.sd_hi), z, fma(_mm512_set1_ps(P.sd_lo), z, _mm512_set1_ps(P.mean)));
  } else {
    const __m512 p_lo = _mm512_add_ps(fma(acc, t, _mm512_sub_ps(c.c[0], p_hi)), c.c[7]);
    const __m512 m = _mm512_mask_blend_ps(central, _mm512_set1_ps(1.0f), q);
    const __m512 zl_hi = _mm512_mul_ps(m, p_hi);
    const __m512 zl_lo = _mm512_add_ps(fma(m, p_hi, _mm512_xor_ps(zl_hi, sign)), _mm512_mul_ps(m, p_lo));
    const __m512 z_hi = _mm512_mask_blend_ps(lower, _mm512_xor_ps(zl_hi, sign), zl_hi);
    const __m512 z_lo = _mm512_mask_blend_ps(lower, _mm512_xor_ps(zl_lo, sign), zl_lo);
    const __m512 sd_hi = _mm512_set1_ps(P.sd_hi);
    const __m512 main = fma(sd_hi, z_hi, _mm512_set1_ps(P.mean));
    const __m512 small = fma(sd_hi, z_lo, _mm512_mul_ps(_mm512_set1_ps(P.sd_lo), z_hi));
    // rescale: x scale + 0 (an underflowed -0 becomes +0)
    x = _mm512_add_ps(_mm512_mul_ps(_mm512_add_ps(main, small), _mm512_set1_ps(P.scale)), _mm512_setzero_ps());
  }
  return clamp16(x, P);
}

TINIT_AVX512 inline void store16(float* out, __m512 x, __mmask16 m) {
  _mm512_mask_storeu_ps(out, m, x);
}
// float_to_bf16_bits, sixteen at a time.
TINIT_AVX512 inline void store16(c10::BFloat16* out, __m512 x, __mmask16 m) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i r = _mm512_srli_epi32(
      _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), odd), 16);
  _mm256_mask_storeu_epi16(out, m, _mm512_cvtepi32_epi16(r));
}
// Round to nearest even, as c10::Half(float).
TINIT_AVX512 inline void store16(c10::Half* out, __m512 x, __mmask16 m) {
  _mm256_mask_storeu_epi16(out, m, _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

template <typename out_t, bool Precise>
TINIT_AVX512 void two_sided_range(void* out_v, const uint32_t* w, int64_t n, const void* params) {
  const TruncNormalParams<float> P = *static_cast<const TruncNormalParams<float>*>(params);
  auto* out = static_cast<out_t*>(out_v);
  __m512 lo_rows[kNdtriRow], hi_rows[kNdtriRow];
  for (int k = 0; k < kNdtriRow; ++k) {
    lo_rows[k] = _mm512_load_ps(kFast.c[k]);
    hi_rows[k] = _mm512_load_ps(kFast.c[k] + 16);
  }
  // Four independent vectors per step: one vector's chain of dependent
  // operations is ~75 cycles long, so the scheduler needs several in flight.
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m512 x0 = two_sided16<Precise>(_mm512_loadu_si512(w + i), P, lo_rows, hi_rows);
    const __m512 x1 = two_sided16<Precise>(_mm512_loadu_si512(w + i + 16), P, lo_rows, hi_rows);
    const __m512 x2 = two_sided16<Precise>(_mm512_loadu_si512(w + i + 32), P, lo_rows, hi_rows);
    const __m512 x3 = two_sided16<Precise>(_mm512_loadu_si512(w + i + 48), P, lo_rows, hi_rows);
    store16(out + i, x0, 0xffff);
    store16(out + i + 16, x1, 0xffff);
    store16(out + i + 32, x2, 0xffff);
    store16(out + i + 48, x3, 0xffff);
  }
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1u);
    const __m512i words = _mm512_maskz_loadu_epi32(m, w + i);
    store16(out + i, two_sided16<Precise>(words, P, lo_rows, hi_rows), m);
  }
}

}  // namespace

bool avx512_available() {
  static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  return ok;
}

ChunkFn two_sided_avx512(c10::ScalarType dtype, bool precise) {
  switch (dtype) {
    case c10::kFloat:
      return precise ? two_sided_range<float, true> : two_sided_range<float, false>;
    case c10::kBFloat16:
      return precise ? two_sided_range<c10::BFloat16, true> : two_sided_range<c10::BFloat16, false>;
    case c10::kHalf:
      return precise ? two_sided_range<c10::Half, true> : two_sided_range<c10::Half, false>;
    default:
      return nullptr;
  }
}

}  // namespace cpu
}  // namespace tinit

#else

namespace tinit {
namespace cpu {
bool avx512_available() { return false; }
ChunkFn two_sided_avx512(c10::ScalarType, bool) { return nullptr; }
}  // namespace cpu
}  // namespace tinit

#endif
