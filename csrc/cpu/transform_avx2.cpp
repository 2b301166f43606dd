// AVX2 entries of the two-sided modes (transform_avx2.h).
//
// The same operations, in the same order, as tinit::two_sided_value and
// tinit::two_sided_precise_value, eight lanes at a time, so the bits equal
// the portable code's (tests compare the two). The structure is
// two_sided_avx512's with masks held as vectors. AVX2 has no unsigned
// compare or conversion: the side test compares the words with their sign
// bits flipped (or by an unsigned max), and float(word) is
// fma(float(w >> 16), 2^16, float(w & 0xffff)), whose product is exact, so
// its one rounding is the conversion's (a symmetric window, split 2^31 - 1,
// converts every lane's word as a signed one). A lane finds its row of the
// ndtri table by vpermps from rows held eight to a vector in memory: rows
// 0..15 (s >= 2^-7, |z| <= 2.4) in two vectors per coefficient and one
// blend, rows 0..31 (s >= 2^-15) in four and three blends; a pair of vectors
// with a lane deeper than that gathers its rows. The compiler cannot do this
// itself: the portable loop, compiled for x86-64-v3, stays scalar.
#include "tinit/fp_contract.h"
// (first: contraction off)

#include "transform_avx2.h"

#if defined(__GNUC__) && defined(__x86_64__)

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <immintrin.h>

#include <cstring>

#include "tinit/transform.h"

#define TINIT_AVX2_FMA __attribute__((target("avx2,fma,f16c")))

namespace tinit {
namespace cpu {
namespace {

// Coefficient k of rows 0..31 in reverse: position p holds row 31 - p. A
// lane's row is 255 - top, top = bits(s) >> 22, so for rows below 32 its
// position is top & 31: vpermps reads the low three bits of top as they
// stand and bits 3 and 4 pick the vector (two_sided_avx512's layout).
struct FastRows {
  alignas(64) float c[kNdtriRow][kNdtriFastSegments];
  FastRows() {
    for (int k = 0; k < kNdtriRow; ++k)
      for (int p = 0; p < kNdtriFastSegments; ++p) c[k][p] = kNdtriHost[(kNdtriFastSegments - 1 - p) * kNdtriRow + k];
  }
};
// Rows below 16 (below kNdtriFastSegments) are the lanes with top at least this.
constexpr int kTop16 = 256 - 16;
constexpr int kTop32 = 256 - kNdtriFastSegments;
const FastRows kFast;

TINIT_AVX2_FMA inline __m256 fma(__m256 a, __m256 b, __m256 c) { return _mm256_fmadd_ps(a, b, c); }

// mask ? b : a by the sign bit of each lane of mask, one vblendvps. Not the
// intrinsic: GCC rewrites _mm256_blendv_ps as a select on mask < 0 and, for a
// mask that feeds several blends, computes that compare into a register
// first (one vpcmpgtd more per mask and vector).
TINIT_AVX2_FMA inline __m256 blend(__m256 a, __m256 b, __m256 mask) {
  __m256 r;
  asm("vblendvps %3, %2, %1, %0" : "=x"(r) : "x"(a), "xm"(b), "x"(mask));
  return r;
}

// clamp_to. vmaxps(x, lo) returns lo when x == lo, the same bits unless x
// and lo are zeros of opposite signs, so a zero bound takes the compares.
TINIT_AVX2_FMA inline __m256 clamp8(__m256 x, __m256 lo, __m256 hi, bool zero_bound) {
  if (!zero_bound) return _mm256_min_ps(_mm256_max_ps(x, lo), hi);
  x = blend(x, lo, _mm256_cmp_ps(x, lo, _CMP_LT_OQ));
  return blend(x, hi, _mm256_cmp_ps(x, hi, _CMP_GT_OQ));
}

// The per-call constants of TruncNormalParams<float>, broadcast once.
struct Consts8 {
  __m256i split_biased, split_not;  // split ^ 2^31 (unsigned order as signed), ~split
  __m256 step, a_half, b_half, a_cdf, b_sf, mean, sd_hi, sd_lo, scale, lo, hi;
  bool zero_bound;
  TINIT_AVX2_FMA explicit Consts8(const TruncNormalParams<float>& P)
      : split_biased(_mm256_set1_epi32(static_cast<int>(P.split ^ 0x80000000u))),
        split_not(_mm256_set1_epi32(static_cast<int>(~P.split))),
        step(_mm256_set1_ps(P.step)),
        a_half(_mm256_set1_ps(P.a_half)),
        b_half(_mm256_set1_ps(P.b_half)),
        a_cdf(_mm256_set1_ps(P.a_cdf)),
        b_sf(_mm256_set1_ps(P.b_sf)),
        mean(_mm256_set1_ps(P.mean)),
        sd_hi(_mm256_set1_ps(P.sd_hi)),
        sd_lo(_mm256_set1_ps(P.sd_lo)),
        scale(_mm256_set1_ps(P.scale)),
        lo(_mm256_set1_ps(P.lo)),
        hi(_mm256_set1_ps(P.hi)),
        zero_bound(P.lo == 0.0f || P.hi == 0.0f) {}
};

// What two_sided_s and ndtri_segment / ndtri_variable give one vector.
// neg: the sign bit on upper lanes (z = -Phi^-1(s)); m: ndtri_table_pair's
// multiplier of the row's polynomial (q on central lanes, s >= 1/4, else 1),
// in kTwoSided with neg's sign already applied: (-m) p = -(m p) exactly, so
// z = m p is the portable code's (lower ? zl : -zl) bit for bit;
// top = bits(s) >> 22 (the row is 255 - top).
struct Lanes {
  __m256 neg, m, t;
  __m256i top;
};

// float(w) for any uint32 w, rounded to nearest even as static_cast does.
TINIT_AVX2_FMA inline __m256 u32_to_float(__m256i w) {
  const __m256 high = _mm256_cvtepi32_ps(_mm256_srli_epi32(w, 16));
  const __m256 low = _mm256_cvtepi32_ps(_mm256_and_si256(w, _mm256_set1_epi32(0xffff)));
  return fma(high, _mm256_set1_ps(65536.0f), low);
}

// The side of each lane, mirrored or not, and the word it converts.
// Flip: the window was mirrored (P.flip = ~0), so the frame's word is ~w.
// Lower lanes are those with wf = w ^ flip <= split and take wf, the others
// ~wf: with the flip known at compile time, one mask m of the lanes that
// take ~w and wsel = w ^ m, without forming wf. Centred: split = 2^31 - 1
// and no flip (every symmetric window): the upper lanes are those with the
// top bit set, and every lane's wsel is below 2^31, so the signed conversion
// is exact.
enum class Split { kAny, kFlip, kCentred };

template <Split Kind, bool Precise>
TINIT_AVX2_FMA inline Lanes two_sided_lanes(__m256i w, const Consts8& K) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  Lanes l;
  __m256 fw, mask;
  if constexpr (Kind == Split::kCentred) {
    mask = _mm256_castsi256_ps(w);  // upper lanes by the sign bit
    l.neg = _mm256_and_ps(mask, sign);
    fw = _mm256_cvtepi32_ps(_mm256_xor_si256(w, _mm256_srai_epi32(w, 31)));
  } else if constexpr (Kind == Split::kFlip) {
    // lower lanes: ~w <= split <=> w >= ~split <=> max(w, ~split) == w; they take ~w
    const __m256i m = _mm256_cmpeq_epi32(_mm256_max_epu32(w, K.split_not), w);
    mask = _mm256_castsi256_ps(m);
    l.neg = _mm256_andnot_ps(mask, sign);
    fw = u32_to_float(_mm256_xor_si256(w, m));
  } else {
    // upper lanes: w > split, compared as signed with the sign bits flipped; they take ~w
    const __m256i m =
        _mm256_cmpgt_epi32(_mm256_xor_si256(w, _mm256_set1_epi32(static_cast<int>(0x80000000u))), K.split_biased);
    mask = _mm256_castsi256_ps(m);
    l.neg = _mm256_and_ps(mask, sign);
    fw = u32_to_float(_mm256_xor_si256(w, m));
  }
  // blend picks its second operand where the mask is set: the lower lanes' constants under kFlip
  const bool mask_lower = Kind == Split::kFlip;
  const __m256 q = fma(fw, K.step, mask_lower ? blend(K.b_half, K.a_half, mask) : blend(K.a_half, K.b_half, mask));
  const __m256 s = fma(fw, K.step, mask_lower ? blend(K.b_sf, K.a_cdf, mask) : blend(K.a_cdf, K.b_sf, mask));
  const __m256 central = _mm256_cmp_ps(s, _mm256_set1_ps(0.25f), _CMP_GE_OQ);
  l.top = _mm256_srli_epi32(_mm256_castps_si256(s), 22);
  const __m256 r = _mm256_sub_ps(_mm256_or_ps(_mm256_and_ps(s, _mm256_castsi256_ps(_mm256_set1_epi32(0x003fffff))),
                                              _mm256_castsi256_ps(_mm256_set1_epi32(0x3f800000))),
                                 _mm256_set1_ps(1.25f));
  l.t = blend(r, _mm256_mul_ps(q, q), central);
  l.m = blend(_mm256_set1_ps(1.0f), q, central);
  if constexpr (!Precise) l.m = _mm256_xor_ps(l.m, l.neg);
  return l;
}

// Coefficient row[k] of each lane's row from FastRows' c[k] (`c`): Groups
// = 2 for rows 0..15 (the upper 16 positions), 4 for rows 0..31. bit3 and
// bit4 carry bits 3 and 4 of top in their sign bits (blend reads only that).
template <int Groups>
TINIT_AVX2_FMA inline __m256 fast_coefficient(const float* c, __m256i top, __m256 bit3, __m256 bit4) {
  const __m256 upper16 = blend(_mm256_permutevar8x32_ps(_mm256_load_ps(c + 16), top),
                               _mm256_permutevar8x32_ps(_mm256_load_ps(c + 24), top), bit3);
  if constexpr (Groups == 2) return upper16;
  const __m256 lower16 = blend(_mm256_permutevar8x32_ps(_mm256_load_ps(c), top),
                               _mm256_permutevar8x32_ps(_mm256_load_ps(c + 8), top), bit3);
  return blend(lower16, upper16, bit4);
}

// ndtri_poly's Horner steps with the row coefficients c[0..7] (c[7]: c0_lo).
struct Poly {
  __m256 acc, p_hi, c0, c7;
};

TINIT_AVX2_FMA inline Poly horner(const __m256 c[kNdtriRow], __m256 t) {
  __m256 acc = fma(c[6], t, c[5]);
  acc = fma(acc, t, c[4]);
  acc = fma(acc, t, c[3]);
  acc = fma(acc, t, c[2]);
  acc = fma(acc, t, c[1]);
  return {acc, fma(acc, t, c[0]), c[0], c[7]};
}

// The coefficients of every lane's row and the polynomial, for lanes whose
// rows lie below 8 Groups (Groups = 0: any row, gathered from the table).
template <int Groups, bool Precise>
TINIT_AVX2_FMA inline Poly row_poly(const Lanes& l) {
  constexpr int used = Precise ? kNdtriRow : kNdtriRow - 1;  // c0_lo only in the precise mode
  __m256 c[kNdtriRow];
  c[kNdtriRow - 1] = _mm256_setzero_ps();
  if constexpr (Groups == 0) {
    // ndtri_segment, in [0, 255] for s in (0, 1.75] (valid_params)
    const __m256i base = _mm256_slli_epi32(_mm256_sub_epi32(_mm256_set1_epi32(255), l.top), 3);
    for (int k = 0; k < used; ++k) c[k] = _mm256_i32gather_ps(kNdtriHost + k, base, 4);
  } else {
    const __m256 bit3 = _mm256_castsi256_ps(_mm256_slli_epi32(l.top, 28));
    const __m256 bit4 = _mm256_castsi256_ps(_mm256_slli_epi32(l.top, 27));
#pragma GCC unroll 8
    for (int k = 0; k < used; ++k) c[k] = fast_coefficient<Groups>(kFast.c[k], l.top, bit3, bit4);
  }
  return horner(c, l.t);
}

template <bool Precise>
TINIT_AVX2_FMA inline __m256 finish(const Lanes& l, const Poly& p, const Consts8& K) {
  __m256 x;
  if constexpr (!Precise) {
    const __m256 z = _mm256_mul_ps(l.m, p.p_hi);
    x = fma(K.sd_hi, z, fma(K.sd_lo, z, K.mean));
  } else {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256 p_lo = _mm256_add_ps(fma(p.acc, l.t, _mm256_sub_ps(p.c0, p.p_hi)), p.c7);
    const __m256 m = l.m;
    const __m256 zl_hi = _mm256_mul_ps(m, p.p_hi);
    const __m256 zl_lo = _mm256_add_ps(fma(m, p.p_hi, _mm256_xor_ps(zl_hi, sign)), _mm256_mul_ps(m, p_lo));
    const __m256 z_hi = _mm256_xor_ps(zl_hi, l.neg);
    const __m256 z_lo = _mm256_xor_ps(zl_lo, l.neg);
    const __m256 main = fma(K.sd_hi, z_hi, K.mean);
    const __m256 small = fma(K.sd_hi, z_lo, _mm256_mul_ps(K.sd_lo, z_hi));
    // rescale: x scale + 0 (an underflowed -0 becomes +0)
    x = _mm256_add_ps(_mm256_mul_ps(_mm256_add_ps(main, small), K.scale), _mm256_setzero_ps());
  }
  return clamp8(x, K.lo, K.hi, K.zero_bound);
}

// float_to_bf16_bits in each 32-bit lane.
TINIT_AVX2_FMA inline __m256i bf16_bits(__m256 x) {
  const __m256i u = _mm256_castps_si256(x);
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  return _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), odd), 16);
}

TINIT_AVX2_FMA inline void store8(float* out, __m256 x) { _mm256_storeu_ps(out, x); }
TINIT_AVX2_FMA inline void store8(c10::BFloat16* out, __m256 x) {
  const __m256i r = bf16_bits(x);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out),
                   _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1)));
}
// Round to nearest even, as c10::Half(float).
TINIT_AVX2_FMA inline void store8(c10::Half* out, __m256 x) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

// Two vectors at once. bf16: one in-lane pack of both (the bits fit 16
// unsigned bits) and one cross-lane permute to restore the order; the others
// store each vector.
template <typename out_t>
TINIT_AVX2_FMA inline void store16(out_t* out, __m256 x0, __m256 x1) {
  store8(out, x0);
  store8(out + 8, x1);
}
template <>
TINIT_AVX2_FMA inline void store16(c10::BFloat16* out, __m256 x0, __m256 x1) {
  const __m256i packed = _mm256_packus_epi32(bf16_bits(x0), bf16_bits(x1));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_permute4x64_epi64(packed, 0xD8));
}

// Whether a lane's top is below `bound` (top <= 255: a signed compare).
TINIT_AVX2_FMA inline bool any_below(__m256i top, int bound) {
  return _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(bound), top))) != 0;
}

// V vectors of 8 words from w into out.
template <int V, typename out_t, bool Precise, Split Kind>
TINIT_AVX2_FMA inline void two_sided_step(out_t* out, const uint32_t* w, const Consts8& K) {
  Lanes l[V];
#pragma GCC unroll 4
  for (int j = 0; j < V; ++j) {
    l[j] = two_sided_lanes<Kind, Precise>(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 8 * j)), K);
  }
  Poly p[V];
  // One row test per pair of vectors, on its deepest lane (the least top).
  constexpr int pair = V < 2 ? V : 2;
#pragma GCC unroll 2
  for (int h = 0; h < V; h += pair) {
    __m256i shallowest = l[h].top;
    for (int j = h + 1; j < h + pair; ++j) shallowest = _mm256_min_epi32(shallowest, l[j].top);
    if (__builtin_expect(!any_below(shallowest, kTop16), 1)) {
      for (int j = h; j < h + pair; ++j) p[j] = row_poly<2, Precise>(l[j]);
    } else if (!any_below(shallowest, kTop32)) {
      for (int j = h; j < h + pair; ++j) p[j] = row_poly<4, Precise>(l[j]);
    } else {  // a lane below s = 2^-15 (~1e-3 of the pairs when untruncated)
      for (int j = h; j < h + pair; ++j) p[j] = row_poly<0, Precise>(l[j]);
    }
  }
  if constexpr (V % 2 == 0) {
#pragma GCC unroll 2
    for (int j = 0; j < V; j += 2) {
      store16(out + 8 * j, finish<Precise>(l[j], p[j], K), finish<Precise>(l[j + 1], p[j + 1], K));
    }
  } else {
#pragma GCC unroll 4
    for (int j = 0; j < V; ++j) store8(out + 8 * j, finish<Precise>(l[j], p[j], K));
  }
}

// Vectors per step, written stage by stage so that the scheduler has
// independent chains (as two_sided_avx512's kVectors); AVX2's sixteen
// registers spill a few values. The row test per pair keeps the two-vector
// rows path for 78% of the pairs of an untruncated window (16 lanes in rows
// 0..15), against 60% for a test per step of 32 lanes.
constexpr int kVectors = 4;

template <typename out_t, bool Precise, Split Kind>
TINIT_AVX2_FMA void two_sided_loop(out_t* out, const uint32_t* w, int64_t n, const TruncNormalParams<float>& P) {
  const Consts8 K(P);
  int64_t i = 0;
  for (; i + 8 * kVectors <= n; i += 8 * kVectors) two_sided_step<kVectors, out_t, Precise, Kind>(out + i, w + i, K);
  for (; i + 8 <= n; i += 8) two_sided_step<1, out_t, Precise, Kind>(out + i, w + i, K);
  if (i < n) {  // the last 1..7: through buffers (AVX2 has no 16-bit masked store); word 0 pads
    alignas(32) uint32_t words[8] = {};
    alignas(32) out_t values[8];
    std::memcpy(words, w + i, sizeof(uint32_t) * (n - i));
    two_sided_step<1, out_t, Precise, Kind>(values, words, K);
    std::memcpy(out + i, values, sizeof(out_t) * (n - i));
  }
}

template <typename out_t, bool Precise>
TINIT_AVX2_FMA void two_sided_range(void* out, const uint32_t* w, int64_t n, const void* params) {
  const TruncNormalParams<float>& P = *static_cast<const TruncNormalParams<float>*>(params);
  out_t* o = static_cast<out_t*>(out);
  if (P.flip != 0) {
    two_sided_loop<out_t, Precise, Split::kFlip>(o, w, n, P);
  } else if (P.split == 0x7fffffffu) {
    two_sided_loop<out_t, Precise, Split::kCentred>(o, w, n, P);
  } else {
    two_sided_loop<out_t, Precise, Split::kAny>(o, w, n, P);
  }
}

}  // namespace

ChunkFn two_sided_avx2(c10::ScalarType dtype, bool precise) {
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
ChunkFn two_sided_avx2(c10::ScalarType, bool) { return nullptr; }
}  // namespace cpu
}  // namespace tinit

#endif
