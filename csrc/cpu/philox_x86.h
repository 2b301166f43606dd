// Stream words for consecutive counter blocks on x86 with AVX-512 / AVX2.
//
// Compilers vectorise the 32x32->64 Philox multiply poorly (vpmullq and
// permutes), so these kernels use the even/odd vpmuludq pattern by hand. They
// compute exactly tinit::philox4x32_10 (tinit/philox.h) for 16 (AVX-512) or 8
// (AVX2) blocks at a time and store the words interleaved in element order
// (block b's four words at 4b .. 4b+3). Callers pick one at run time with
// __builtin_cpu_supports; tinit::philox4x32_10 handles any remainder.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include <cstdint>

#include "tinit/philox.h"

namespace tinit {
namespace x86 {

#define TINIT_AVX512 __attribute__((target("avx512f")))
#define TINIT_AVX2 __attribute__((target("avx2")))

TINIT_AVX512 inline void mulhilo16(__m512i a, __m512i m, __m512i& hi,
                                   __m512i& lo) {
  const __m512i pe = _mm512_mul_epu32(a, m);
  const __m512i po = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m);
  hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(pe, 32), po);
  lo = _mm512_mask_blend_epi32(0xAAAA, pe, _mm512_slli_epi64(po, 32));
}

// Counter words of 16 lanes; after ten rounds, their four output words.
struct Lanes16 {
  __m512i c0, c1, c2, c3;
};

// Stores the 16 blocks of `x` in element order at out[0, 64).
TINIT_AVX512 inline void store_blocks16(uint32_t* out, const Lanes16& x) {
  // 4x16 -> element order: unpack within 128-bit lanes, then move lanes.
  const __m512i t0 = _mm512_unpacklo_epi32(x.c0, x.c1), t1 = _mm512_unpackhi_epi32(x.c0, x.c1);
  const __m512i t2 = _mm512_unpacklo_epi32(x.c2, x.c3), t3 = _mm512_unpackhi_epi32(x.c2, x.c3);
  const __m512i u0 = _mm512_unpacklo_epi64(t0, t2), u1 = _mm512_unpackhi_epi64(t0, t2);
  const __m512i u2 = _mm512_unpacklo_epi64(t1, t3), u3 = _mm512_unpackhi_epi64(t1, t3);
  const __m512i v0 = _mm512_shuffle_i32x4(u0, u1, 0x44), v1 = _mm512_shuffle_i32x4(u0, u1, 0xEE);
  const __m512i v2 = _mm512_shuffle_i32x4(u2, u3, 0x44), v3 = _mm512_shuffle_i32x4(u2, u3, 0xEE);
  _mm512_storeu_si512(out, _mm512_shuffle_i32x4(v0, v2, 0x88));
  _mm512_storeu_si512(out + 16, _mm512_shuffle_i32x4(v0, v2, 0xDD));
  _mm512_storeu_si512(out + 32, _mm512_shuffle_i32x4(v1, v3, 0x88));
  _mm512_storeu_si512(out + 48, _mm512_shuffle_i32x4(v1, v3, 0xDD));
}

// Counters of group g: blocks blk0 + 16 g + lane (low word), fixed words.
TINIT_AVX512 inline Lanes16 counters16(uint64_t blk0, int64_t g, __m512i iota,
                                       __m512i hi_word, __m512i s0, __m512i s1) {
  const uint32_t lo = static_cast<uint32_t>(blk0) + static_cast<uint32_t>(16 * g);
  return Lanes16{_mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(lo)), iota),
                 hi_word, s0, s1};
}

TINIT_AVX512 inline void round16(Lanes16& x, __m512i m0, __m512i m1, __m512i k0,
                                 __m512i k1) {
  __m512i hi0, lo0, hi1, lo1;
  mulhilo16(x.c0, m0, hi0, lo0);
  mulhilo16(x.c2, m1, hi1, lo1);
  x.c0 = _mm512_ternarylogic_epi32(hi1, x.c1, k0, 0x96);
  x.c2 = _mm512_ternarylogic_epi32(hi0, x.c3, k1, 0x96);
  x.c1 = lo1;
  x.c3 = lo0;
}

// Blocks blk0 .. blk0 + 16*groups - 1; (uint32)blk0 + 16*groups must not wrap.
// Two groups are in flight per iteration: one Philox evaluation is a long
// chain of dependent multiplies, and interleaving two hides their latency.
TINIT_AVX512 inline void philox_blocks_avx512(uint32_t* out, uint64_t blk0,
                                              int64_t groups, uint64_t seed,
                                              uint64_t stream) {
  const __m512i m0 = _mm512_set1_epi32(static_cast<int>(kPhiloxM0));
  const __m512i m1 = _mm512_set1_epi32(static_cast<int>(kPhiloxM1));
  const __m512i iota =
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i hi_word = _mm512_set1_epi32(static_cast<int>(blk0 >> 32));
  const __m512i s0 = _mm512_set1_epi32(static_cast<int>(stream));
  const __m512i s1 = _mm512_set1_epi32(static_cast<int>(stream >> 32));
  __m512i keys0[10], keys1[10];
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int r = 0; r < 10; ++r) {
    keys0[r] = _mm512_set1_epi32(static_cast<int>(k0));
    keys1[r] = _mm512_set1_epi32(static_cast<int>(k1));
    k0 += kPhiloxW0;
    k1 += kPhiloxW1;
  }
  int64_t g = 0;
  for (; g + 2 <= groups; g += 2) {
    Lanes16 a = counters16(blk0, g, iota, hi_word, s0, s1);
    Lanes16 b = counters16(blk0, g + 1, iota, hi_word, s0, s1);
    for (int r = 0; r < 10; ++r) {
      round16(a, m0, m1, keys0[r], keys1[r]);
      round16(b, m0, m1, keys0[r], keys1[r]);
    }
    store_blocks16(out + 64 * g, a);
    store_blocks16(out + 64 * (g + 1), b);
  }
  if (g < groups) {
    Lanes16 a = counters16(blk0, g, iota, hi_word, s0, s1);
    for (int r = 0; r < 10; ++r) round16(a, m0, m1, keys0[r], keys1[r]);
    store_blocks16(out + 64 * g, a);
  }
}

TINIT_AVX2 inline void mulhilo8(__m256i a, __m256i m, __m256i& hi, __m256i& lo) {
  const __m256i pe = _mm256_mul_epu32(a, m);
  const __m256i po = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
  hi = _mm256_blend_epi32(_mm256_srli_epi64(pe, 32), po, 0xAA);
  lo = _mm256_blend_epi32(pe, _mm256_slli_epi64(po, 32), 0xAA);
}

// Blocks blk0 .. blk0 + 8*groups - 1; (uint32)blk0 + 8*groups must not wrap.
TINIT_AVX2 inline void philox_blocks_avx2(uint32_t* out, uint64_t blk0,
                                          int64_t groups, uint64_t seed,
                                          uint64_t stream) {
  const __m256i m0 = _mm256_set1_epi32(static_cast<int>(kPhiloxM0));
  const __m256i m1 = _mm256_set1_epi32(static_cast<int>(kPhiloxM1));
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i hi_word = _mm256_set1_epi32(static_cast<int>(blk0 >> 32));
  const __m256i s0 = _mm256_set1_epi32(static_cast<int>(stream));
  const __m256i s1 = _mm256_set1_epi32(static_cast<int>(stream >> 32));
  for (int64_t g = 0; g < groups; ++g) {
    const uint32_t lo0 = static_cast<uint32_t>(blk0) + static_cast<uint32_t>(8 * g);
    __m256i c0 = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(lo0)), iota);
    __m256i c1 = hi_word, c2 = s0, c3 = s1;
    uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
    for (int r = 0; r < 10; ++r) {
      __m256i hi0, lo_0, hi1, lo_1;
      mulhilo8(c0, m0, hi0, lo_0);
      mulhilo8(c2, m1, hi1, lo_1);
      c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32(static_cast<int>(k0)));
      c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32(static_cast<int>(k1)));
      c1 = lo_1;
      c3 = lo_0;
      k0 += kPhiloxW0;
      k1 += kPhiloxW1;
    }
    const __m256i t0 = _mm256_unpacklo_epi32(c0, c1), t1 = _mm256_unpackhi_epi32(c0, c1);
    const __m256i t2 = _mm256_unpacklo_epi32(c2, c3), t3 = _mm256_unpackhi_epi32(c2, c3);
    const __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
    const __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
    __m256i* o = reinterpret_cast<__m256i*>(out + 32 * g);
    _mm256_storeu_si256(o, _mm256_permute2x128_si256(u0, u1, 0x20));
    _mm256_storeu_si256(o + 1, _mm256_permute2x128_si256(u2, u3, 0x20));
    _mm256_storeu_si256(o + 2, _mm256_permute2x128_si256(u0, u1, 0x31));
    _mm256_storeu_si256(o + 3, _mm256_permute2x128_si256(u2, u3, 0x31));
  }
}

#undef TINIT_AVX512
#undef TINIT_AVX2

}  // namespace x86
}  // namespace tinit
#endif
