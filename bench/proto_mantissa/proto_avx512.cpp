// Prototype, not the stream: csrc/cpu/transform_avx512.cpp's two-sided
// engine with ndtri_mantissa.h's inverse (every row in the mantissa
// variable), fp32 and bf16 only. Everything but the transform is the
// shipped engine's, copied: the words, the in-register rows 0..31 selected
// by vpermt2ps (here from kMantissaHost), the gather below s = 2^-15, the
// stores. What goes: q's fma and blend, the s >= 1/4 compare, the masked
// q * q, the masked q * p (precise: the multiplier m, its product, fma and
// product of p_lo). The same bits as proto::two_sided_value
// (bench_mantissa_cpu checks).
#include "tinit/fp_contract.h"
// (first: contraction off)

#include "proto_cpu.h"

#if defined(__GNUC__) && defined(__x86_64__)

#include <c10/util/BFloat16.h>
#include <immintrin.h>

#include "ndtri_mantissa.h"

#define TINIT_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma")))

namespace tinit {
namespace proto {
namespace {

// Coefficient k of rows 0..31 in reverse (position p holds row 31 - p), as the shipped FastRows.
struct FastRows {
  alignas(64) float c[kNdtriRow][kNdtriFastSegments];
  FastRows() {
    for (int k = 0; k < kNdtriRow; ++k)
      for (int p = 0; p < kNdtriFastSegments; ++p)
        c[k][p] = kMantissaHost[(kNdtriFastSegments - 1 - p) * kNdtriRow + k];
  }
};
constexpr int kFastExponentTop = 256 - kNdtriFastSegments;
const FastRows kFast;

TINIT_AVX512 inline __m512 fma(__m512 a, __m512 b, __m512 c) { return _mm512_fmadd_ps(a, b, c); }

TINIT_AVX512 inline __m512 clamp16(__m512 x, __m512 lo, __m512 hi, bool zero_bound) {
  if (!zero_bound) return _mm512_min_ps(_mm512_max_ps(x, lo), hi);
  x = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ), x, lo);
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, hi, _CMP_GT_OQ), x, hi);
}

// The per-call constants: a_half and b_half are no longer read.
struct Consts16 {
  __m512i split, split_not;
  __m512 step, a_cdf, b_sf, mean, sd_hi, sd_lo, scale, lo, hi;
  bool zero_bound;
  TINIT_AVX512 explicit Consts16(const TruncNormalParams<float>& P)
      : split(_mm512_set1_epi32(static_cast<int>(P.split))),
        split_not(_mm512_set1_epi32(static_cast<int>(~P.split))),
        step(_mm512_set1_ps(P.step)),
        a_cdf(_mm512_set1_ps(P.a_cdf)),
        b_sf(_mm512_set1_ps(P.b_sf)),
        mean(_mm512_set1_ps(P.mean)),
        sd_hi(_mm512_set1_ps(P.sd_hi)),
        sd_lo(_mm512_set1_ps(P.sd_lo)),
        scale(_mm512_set1_ps(P.scale)),
        lo(_mm512_set1_ps(P.lo)),
        hi(_mm512_set1_ps(P.hi)),
        zero_bound(P.lo == 0.0f || P.hi == 0.0f) {}
};

// The side, the row (top = bits(s) >> 22) and r: no q, no central mask.
struct Lanes {
  __mmask16 lower;
  __m512 t;
  __m512i top;
};

template <bool Flip>
TINIT_AVX512 inline Lanes two_sided_lanes(__m512i w, const Consts16& K) {
  Lanes l;
  __m512i wsel;
  if constexpr (Flip) {
    l.lower = _mm512_cmpge_epu32_mask(w, K.split_not);
    wsel = _mm512_mask_ternarylogic_epi32(w, l.lower, w, w, 0x55);
  } else {
    l.lower = _mm512_cmple_epu32_mask(w, K.split);
    wsel = _mm512_mask_ternarylogic_epi32(w, static_cast<__mmask16>(~l.lower), w, w, 0x55);
  }
  const __m512 fw = _mm512_cvtepu32_ps(wsel);
  const __m512 s = fma(fw, K.step, _mm512_mask_blend_ps(l.lower, K.b_sf, K.a_cdf));
  const __m512i bits = _mm512_castps_si512(s);
  l.top = _mm512_srli_epi32(bits, 22);
  l.t = _mm512_sub_ps(_mm512_castsi512_ps(_mm512_ternarylogic_epi32(bits, _mm512_set1_epi32(0x003fffff),
                                                                    _mm512_set1_epi32(0x3f800000), 0xEA)),
                      _mm512_set1_ps(1.25f));
  return l;
}

struct Poly {
  __m512 acc, p_hi, c0, c7;
};

TINIT_AVX512 inline Poly horner(const __m512 c[kNdtriRow], __m512 t) {
  __m512 acc = fma(c[6], t, c[5]);
  acc = fma(acc, t, c[4]);
  acc = fma(acc, t, c[3]);
  acc = fma(acc, t, c[2]);
  acc = fma(acc, t, c[1]);
  return {acc, fma(acc, t, c[0]), c[0], c[7]};
}

template <bool Precise>
TINIT_AVX512 inline __m512 finish(const Lanes& l, const Poly& p, const Consts16& K) {
  const __m512 sign = _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(0x80000000u)));
  const __mmask16 upper = static_cast<__mmask16>(~l.lower);
  __m512 x;
  if constexpr (!Precise) {
    const __m512 z = _mm512_mask_xor_ps(p.p_hi, upper, p.p_hi, sign);
    x = fma(K.sd_hi, z, fma(K.sd_lo, z, K.mean));
  } else {
    const __m512 p_lo = _mm512_add_ps(fma(p.acc, l.t, _mm512_sub_ps(p.c0, p.p_hi)), p.c7);
    const __m512 z_hi = _mm512_mask_xor_ps(p.p_hi, upper, p.p_hi, sign);
    const __m512 z_lo = _mm512_mask_xor_ps(p_lo, upper, p_lo, sign);
    const __m512 main = fma(K.sd_hi, z_hi, K.mean);
    const __m512 small = fma(K.sd_hi, z_lo, _mm512_mul_ps(K.sd_lo, z_hi));
    x = _mm512_add_ps(_mm512_mul_ps(_mm512_add_ps(main, small), K.scale), _mm512_setzero_ps());
  }
  return clamp16(x, K.lo, K.hi, K.zero_bound);
}

TINIT_AVX512 inline void store16(float* out, __m512 x, __mmask16 m) { _mm512_mask_storeu_ps(out, m, x); }
TINIT_AVX512 inline void store16(c10::BFloat16* out, __m512 x, __mmask16 m) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), odd), 16);
  _mm256_mask_storeu_epi16(out, m, _mm512_cvtepi32_epi16(r));
}

template <typename out_t>
TINIT_AVX512 inline void store32(out_t* out, __m512 x0, __m512 x1) {
  store16(out, x0, 0xffff);
  store16(out + 16, x1, 0xffff);
}
TINIT_AVX512 inline __m512i bf16_rounded_high(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __mmask16 odd = _mm512_test_epi32_mask(u, _mm512_set1_epi32(0x10000));
  const __m512i r = _mm512_add_epi32(u, _mm512_set1_epi32(0x7fff));
  return _mm512_mask_add_epi32(r, odd, r, _mm512_set1_epi32(1));
}
template <>
TINIT_AVX512 inline void store32(c10::BFloat16* out, __m512 x0, __m512 x1) {
  const __m512i high =
      _mm512_setr_epi32(0x00030001, 0x00070005, 0x000b0009, 0x000f000d, 0x00130011, 0x00170015, 0x001b0019, 0x001f001d,
                        0x00230021, 0x00270025, 0x002b0029, 0x002f002d, 0x00330031, 0x00370035, 0x003b0039, 0x003f003d);
  _mm512_storeu_si512(out, _mm512_permutex2var_epi16(bf16_rounded_high(x0), high, bf16_rounded_high(x1)));
}

template <int V, typename out_t, bool Precise, bool Flip>
TINIT_AVX512 inline void two_sided_step(out_t* out, const uint32_t* w, __mmask16 last, const Consts16& K,
                                        const __m512 lo_rows[kNdtriRow], const __m512 hi_rows[kNdtriRow]) {
  constexpr int used = Precise ? kNdtriRow : kNdtriRow - 1;
  Lanes l[V];
  __m512i shallowest = _mm512_set1_epi32(-1);
#pragma GCC unroll 4
  for (int j = 0; j < V; ++j) {
    l[j] = two_sided_lanes<Flip>(_mm512_maskz_loadu_epi32(j == V - 1 ? last : __mmask16(0xffff), w + 16 * j), K);
    shallowest = _mm512_min_epu32(shallowest, l[j].top);
  }
  Poly p[V];
  __m512 c[kNdtriRow];
  c[kNdtriRow - 1] = _mm512_setzero_ps();
  if (__builtin_expect(_mm512_cmplt_epu32_mask(shallowest, _mm512_set1_epi32(kFastExponentTop)) == 0, 1)) {
#pragma GCC unroll 4
    for (int j = 0; j < V; ++j) {
#pragma GCC unroll 8
      for (int k = 0; k < used; ++k) c[k] = _mm512_permutex2var_ps(lo_rows[k], l[j].top, hi_rows[k]);
      p[j] = horner(c, l[j].t);
    }
  } else {
    for (int j = 0; j < V; ++j) {
      const __m512i base = _mm512_slli_epi32(_mm512_sub_epi32(_mm512_set1_epi32(255), l[j].top), 3);
      for (int k = 0; k < used; ++k) {
        c[k] = _mm512_i32gather_ps(_mm512_add_epi32(base, _mm512_set1_epi32(k)), kMantissaHost, 4);
      }
      p[j] = horner(c, l[j].t);
    }
  }
  if constexpr (V % 2 == 0) {
#pragma GCC unroll 2
    for (int j = 0; j < V; j += 2) {
      store32(out + 16 * j, finish<Precise>(l[j], p[j], K), finish<Precise>(l[j + 1], p[j + 1], K));
    }
  } else {
#pragma GCC unroll 4
    for (int j = 0; j < V; ++j) {
      store16(out + 16 * j, finish<Precise>(l[j], p[j], K), j == V - 1 ? last : __mmask16(0xffff));
    }
  }
}

constexpr int kVectors = 4;

template <typename out_t, bool Precise, bool Flip>
TINIT_AVX512 void two_sided_loop(out_t* out, const uint32_t* w, int64_t n, const TruncNormalParams<float>& P) {
  const Consts16 K(P);
  __m512 lo_rows[kNdtriRow], hi_rows[kNdtriRow];
  for (int k = 0; k < kNdtriRow; ++k) {
    lo_rows[k] = _mm512_load_ps(kFast.c[k]);
    hi_rows[k] = _mm512_load_ps(kFast.c[k] + 16);
  }
  int64_t i = 0;
  for (; i + 16 * kVectors <= n; i += 16 * kVectors) {
    two_sided_step<kVectors, out_t, Precise, Flip>(out + i, w + i, 0xffff, K, lo_rows, hi_rows);
  }
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1u);
    two_sided_step<1, out_t, Precise, Flip>(out + i, w + i, m, K, lo_rows, hi_rows);
  }
}

template <typename out_t, bool Precise>
TINIT_AVX512 void two_sided_range(void* out, const uint32_t* w, int64_t n, const void* params) {
  const TruncNormalParams<float>& P = *static_cast<const TruncNormalParams<float>*>(params);
  if (P.flip != 0) {
    two_sided_loop<out_t, Precise, true>(static_cast<out_t*>(out), w, n, P);
  } else {
    two_sided_loop<out_t, Precise, false>(static_cast<out_t*>(out), w, n, P);
  }
}

}  // namespace

cpu::ChunkFn two_sided_mantissa_avx512(c10::ScalarType dtype, bool precise) {
  switch (dtype) {
    case c10::kFloat:
      return precise ? two_sided_range<float, true> : two_sided_range<float, false>;
    case c10::kBFloat16:
      return precise ? two_sided_range<c10::BFloat16, true> : two_sided_range<c10::BFloat16, false>;
    default:
      return nullptr;
  }
}

}  // namespace proto
}  // namespace tinit

#else

namespace tinit {
namespace proto {
cpu::ChunkFn two_sided_mantissa_avx512(c10::ScalarType, bool) { return nullptr; }
}  // namespace proto
}  // namespace tinit

#endif
