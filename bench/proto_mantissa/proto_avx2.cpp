// Prototype, not the stream: csrc/cpu/transform_avx2.cpp's two-sided engine
// with ndtri_mantissa.h's inverse (every row in the mantissa variable), fp32
// and bf16 only. Everything but the transform is the shipped engine's,
// copied (each lane's row loaded whole and transposed, here from
// kMantissaHost). What goes: q's fma and blend, the s >= 1/4 compare, the
// blends of the variable and the multiplier, q * q, and m * p (precise: m's
// product, fma and product of p_lo); z is p with the sign bit of the upper
// lanes. The same bits as proto::two_sided_value (bench_mantissa_cpu checks).
#include "tinit/fp_contract.h"
// (first: contraction off)

#include "proto_cpu.h"

#if defined(__GNUC__) && defined(__x86_64__)

#include <c10/util/BFloat16.h>
#include <immintrin.h>

#include <cstring>

#include "ndtri_mantissa.h"

#define TINIT_AVX2_FMA __attribute__((target("avx2,fma,f16c")))

namespace tinit {
namespace proto {
namespace {

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
  __m256 step, a_cdf, b_sf, mean, sd_hi, sd_lo, scale, lo, hi;
  bool zero_bound;
  TINIT_AVX2_FMA explicit Consts8(const TruncNormalParams<float>& P)
      : split_biased(_mm256_set1_epi32(static_cast<int>(P.split ^ 0x80000000u))),
        split_not(_mm256_set1_epi32(static_cast<int>(~P.split))),
        step(_mm256_set1_ps(P.step)),
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

// neg: the sign bit on upper lanes (z = -Phi^-1(s)); t: r on every lane;
// top = bits(s) >> 22 (the row is 255 - top). No q, no multiplier m.
struct Lanes {
  __m256 neg, t;
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

template <Split Kind>
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
  const __m256 s = fma(fw, K.step, mask_lower ? blend(K.b_sf, K.a_cdf, mask) : blend(K.a_cdf, K.b_sf, mask));
  l.top = _mm256_srli_epi32(_mm256_castps_si256(s), 22);
  l.t = _mm256_sub_ps(_mm256_or_ps(_mm256_and_ps(s, _mm256_castsi256_ps(_mm256_set1_epi32(0x003fffff))),
                                   _mm256_castsi256_ps(_mm256_set1_epi32(0x3f800000))),
                      _mm256_set1_ps(1.25f));
  return l;
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

// Byte offsets into kMantissaHost of the eight lanes' rows: ndtri_segment,
// 255 - top, in [0, 255] for s in (0, 1.75] (valid_params), times 32.
struct RowOffsets {
  uint64_t pair[4];  // lanes 2k (low half) and 2k + 1 (high half)
};

TINIT_AVX2_FMA inline RowOffsets row_offsets(__m256i top) {
  const __m256i off = _mm256_slli_epi32(_mm256_sub_epi32(_mm256_set1_epi32(255), top), 5);
  const __m128i lo = _mm256_castsi256_si128(off), hi = _mm256_extracti128_si256(off, 1);
  return {{static_cast<uint64_t>(_mm_cvtsi128_si64(lo)), static_cast<uint64_t>(_mm_extract_epi64(lo, 1)),
           static_cast<uint64_t>(_mm_cvtsi128_si64(hi)), static_cast<uint64_t>(_mm_extract_epi64(hi, 1))}};
}

TINIT_AVX2_FMA inline const float* row_at(const RowOffsets& o, int lane) {
  const uint64_t pair = o.pair[lane >> 1];
  const uint32_t bytes = static_cast<uint32_t>(lane & 1 ? pair >> 32 : pair);
  return reinterpret_cast<const float*>(reinterpret_cast<const char*>(kMantissaHost) + bytes);
}

// Coefficients 4h .. 4h+3 of lane j's row in the low half and of lane j+4's
// in the high half.
TINIT_AVX2_FMA inline __m256 row_pair(const RowOffsets& o, int j, int h) {
  const __m128 lo = _mm_load_ps(row_at(o, j) + 4 * h);
  const __m128 hi = _mm_load_ps(row_at(o, j + 4) + 4 * h);
  return _mm256_insertf128_ps(_mm256_castps128_ps256(lo), hi, 1);
}

// c[0..3] = coefficients 4h .. 4h+3 of every lane: a 4x4 transpose in each
// 128-bit half (lanes 0..3 low, 4..7 high). c[3] only when All (the
// precise mode's c0_lo is coefficient 7).
template <bool All>
TINIT_AVX2_FMA inline void transpose_rows(const RowOffsets& o, int h, __m256* c) {
  const __m256 r0 = row_pair(o, 0, h), r1 = row_pair(o, 1, h);
  const __m256 r2 = row_pair(o, 2, h), r3 = row_pair(o, 3, h);
  const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
  const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
  c[0] = _mm256_shuffle_ps(t0, t2, 0x44);
  c[1] = _mm256_shuffle_ps(t0, t2, 0xEE);
  c[2] = _mm256_shuffle_ps(t1, t3, 0x44);
  if constexpr (All) c[3] = _mm256_shuffle_ps(t1, t3, 0xEE);
}

// Every lane's row of the ndtri table, transposed into coefficient vectors,
// and the polynomial.
template <bool Precise>
TINIT_AVX2_FMA inline Poly row_poly(const Lanes& l) {
  const RowOffsets o = row_offsets(l.top);
  __m256 c[kNdtriRow];
  transpose_rows<true>(o, 0, c);
  transpose_rows<Precise>(o, 1, c + 4);  // c[7]: c0_lo, only in the precise mode
  if constexpr (!Precise) c[7] = _mm256_setzero_ps();
  return horner(c, l.t);
}

template <bool Precise>
TINIT_AVX2_FMA inline __m256 finish(const Lanes& l, const Poly& p, const Consts8& K) {
  __m256 x;
  if constexpr (!Precise) {
    const __m256 z = _mm256_xor_ps(p.p_hi, l.neg);
    x = fma(K.sd_hi, z, fma(K.sd_lo, z, K.mean));
  } else {
    const __m256 p_lo = _mm256_add_ps(fma(p.acc, l.t, _mm256_sub_ps(p.c0, p.p_hi)), p.c7);
    const __m256 z_hi = _mm256_xor_ps(p.p_hi, l.neg);
    const __m256 z_lo = _mm256_xor_ps(p_lo, l.neg);
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

// V vectors of 8 words from w into out.
template <int V, typename out_t, bool Precise, Split Kind>
TINIT_AVX2_FMA inline void two_sided_step(out_t* out, const uint32_t* w, const Consts8& K) {
  Lanes l[V];
#pragma GCC unroll 4
  for (int j = 0; j < V; ++j) {
    l[j] = two_sided_lanes<Kind>(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 8 * j)), K);
  }
  Poly p[V];
#pragma GCC unroll 4
  for (int j = 0; j < V; ++j) p[j] = row_poly<Precise>(l[j]);
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
// registers spill a few values.
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

cpu::ChunkFn two_sided_mantissa_avx2(c10::ScalarType dtype, bool precise) {
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
cpu::ChunkFn two_sided_mantissa_avx2(c10::ScalarType, bool) { return nullptr; }
}  // namespace proto
}  // namespace tinit

#endif
