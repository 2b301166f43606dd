// Stream words for consecutive counter blocks on x86 with AVX-512 / AVX2.
//
// Compilers vectorise the 32x32->64 Philox multiply poorly (vpmullq and
// permutes), so these kernels use vpmuludq by hand (AVX-512: on counters kept
// in 64-bit lanes; AVX2: the even/odd pattern). They compute exactly
// tinit::philox4x32_10 for 8 blocks at a time and store
// the words interleaved in element order
// (block b's four words at 4b .. 4b+3). The engine of isa.h picks one
// (stream_words.cpp); tinit::philox4x32_10 handles any remainder.
#pragma once

#include "tinit/fp_contract.h"
// (first: contraction off)

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include <cstdint>

#include "tinit/philox.h"

namespace tinit {
namespace x86 {

#define TINIT_AVX512 __attribute__((target("avx512f")))
#define TINIT_AVX2 __attribute__((target("avx2")))

// AVX-512 keeps each counter in a 64-bit lane, its word in the low half:
// vpmuludq reads only the low halves, so the product's low half is the next
// lo word as it stands and one shift gives the hi word. A high half is never
// read as a word (it holds bits of a product or of an xor with one), so a
// round is two multiplies, two shifts and two three-way xors for 8 counters,
// with no blends to pack words into 32-bit lanes.
struct Lanes8 {
  __m512i c0, c1, c2, c3;
};

// Counters of group g: blocks blk0 + 8 g + lane (low word), fixed words.
TINIT_AVX512 inline Lanes8 counters8(uint64_t blk0, int64_t g, __m512i iota, __m512i hi_word, __m512i s0, __m512i s1) {
  const uint32_t lo = static_cast<uint32_t>(blk0) + static_cast<uint32_t>(8 * g);
  return Lanes8{_mm512_add_epi64(_mm512_set1_epi64(lo), iota), hi_word, s0, s1};
}

TINIT_AVX512 inline void round8(Lanes8& x, __m512i m0, __m512i m1, __m512i k0, __m512i k1) {
  const __m512i p0 = _mm512_mul_epu32(x.c0, m0);
  const __m512i p2 = _mm512_mul_epu32(x.c2, m1);
  x.c0 = _mm512_ternarylogic_epi32(_mm512_srli_epi64(p2, 32), x.c1, k0, 0x96);
  x.c2 = _mm512_ternarylogic_epi32(_mm512_srli_epi64(p0, 32), x.c3, k1, 0x96);
  x.c1 = p2;
  x.c3 = p0;
}

// The 8 blocks of `x` in element order at out[0, 32): the low halves of the
// four words' lanes, interleaved by two permutes per 16 words.
TINIT_AVX512 inline void store_blocks8(uint32_t* out, const Lanes8& x) {
  const __m512i pairs = _mm512_setr_epi32(0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
  const __m512i t01 = _mm512_permutex2var_epi32(x.c0, pairs, x.c1);  // (w0, w1) of blocks 0..7
  const __m512i t23 = _mm512_permutex2var_epi32(x.c2, pairs, x.c3);  // (w2, w3)
  _mm512_storeu_si512(out, _mm512_permutex2var_epi64(t01, _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11), t23));
  _mm512_storeu_si512(out + 16, _mm512_permutex2var_epi64(t01, _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15), t23));
}

// Blocks blk0 .. blk0 + 8*groups - 1; (uint32)blk0 + 8*groups must not wrap.
// Four groups are in flight per iteration: one Philox evaluation is a chain
// of ten dependent multiplies, and interleaving four hides their latency
// (measured: 0.31 ns a word on Zen 4, against 0.50 with two groups of 16
// counters in 32-bit lanes).
TINIT_AVX512 inline void philox_blocks_avx512(uint32_t* out, uint64_t blk0, int64_t groups, uint64_t seed,
                                              uint64_t stream) {
  constexpr int kInFlight = 4;
  const __m512i m0 = _mm512_set1_epi64(kPhiloxM0), m1 = _mm512_set1_epi64(kPhiloxM1);
  __m512i keys0[10], keys1[10];
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int r = 0; r < 10; ++r) {
    keys0[r] = _mm512_set1_epi32(static_cast<int>(k0));
    keys1[r] = _mm512_set1_epi32(static_cast<int>(k1));
    k0 += kPhiloxW0;
    k1 += kPhiloxW1;
  }
  const __m512i iota = _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7);
  const __m512i hi_word = _mm512_set1_epi64(static_cast<uint32_t>(blk0 >> 32));
  const __m512i s0 = _mm512_set1_epi64(static_cast<uint32_t>(stream));
  const __m512i s1 = _mm512_set1_epi64(static_cast<uint32_t>(stream >> 32));
  int64_t g = 0;
  for (; g + kInFlight <= groups; g += kInFlight) {
    Lanes8 x[kInFlight];
#pragma GCC unroll 4
    for (int j = 0; j < kInFlight; ++j) x[j] = counters8(blk0, g + j, iota, hi_word, s0, s1);
#pragma GCC unroll 10
    for (int r = 0; r < 10; ++r) {
#pragma GCC unroll 4
      for (int j = 0; j < kInFlight; ++j) round8(x[j], m0, m1, keys0[r], keys1[r]);
    }
#pragma GCC unroll 4
    for (int j = 0; j < kInFlight; ++j) store_blocks8(out + 32 * (g + j), x[j]);
  }
  for (; g < groups; ++g) {
    Lanes8 x = counters8(blk0, g, iota, hi_word, s0, s1);
    for (int r = 0; r < 10; ++r) round8(x, m0, m1, keys0[r], keys1[r]);
    store_blocks8(out + 32 * g, x);
  }
}

TINIT_AVX2 inline void mulhilo8(__m256i a, __m256i m, __m256i& hi, __m256i& lo) {
  const __m256i pe = _mm256_mul_epu32(a, m);
  const __m256i po = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
  hi = _mm256_blend_epi32(_mm256_srli_epi64(pe, 32), po, 0xAA);
  lo = _mm256_blend_epi32(pe, _mm256_slli_epi64(po, 32), 0xAA);
}

// Eight blocks in the even/odd pattern of 32-bit lanes: vpmuludq multiplies
// the even lanes, and the odd ones after a shift; two blends pack hi and lo.
struct Lanes8x2 {
  __m256i c0, c1, c2, c3;
};

TINIT_AVX2 inline Lanes8x2 counters8x2(uint64_t blk0, int64_t g, __m256i iota, __m256i hi_word, __m256i s0,
                                       __m256i s1) {
  const uint32_t lo = static_cast<uint32_t>(blk0) + static_cast<uint32_t>(8 * g);
  return Lanes8x2{_mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(lo)), iota), hi_word, s0, s1};
}

TINIT_AVX2 inline void round8x2(Lanes8x2& x, __m256i m0, __m256i m1, __m256i k0, __m256i k1) {
  __m256i hi0, lo0, hi1, lo1;
  mulhilo8(x.c0, m0, hi0, lo0);
  mulhilo8(x.c2, m1, hi1, lo1);
  x.c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, x.c1), k0);
  x.c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, x.c3), k1);
  x.c1 = lo1;
  x.c3 = lo0;
}

// The 8 blocks of `x` in element order at out[0, 32).
TINIT_AVX2 inline void store_blocks8x2(uint32_t* out, const Lanes8x2& x) {
  const __m256i t0 = _mm256_unpacklo_epi32(x.c0, x.c1), t1 = _mm256_unpackhi_epi32(x.c0, x.c1);
  const __m256i t2 = _mm256_unpacklo_epi32(x.c2, x.c3), t3 = _mm256_unpackhi_epi32(x.c2, x.c3);
  const __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
  const __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
  __m256i* o = reinterpret_cast<__m256i*>(out);
  _mm256_storeu_si256(o, _mm256_permute2x128_si256(u0, u1, 0x20));
  _mm256_storeu_si256(o + 1, _mm256_permute2x128_si256(u2, u3, 0x20));
  _mm256_storeu_si256(o + 2, _mm256_permute2x128_si256(u0, u1, 0x31));
  _mm256_storeu_si256(o + 3, _mm256_permute2x128_si256(u2, u3, 0x31));
}

// Blocks blk0 .. blk0 + 8*groups - 1; (uint32)blk0 + 8*groups must not wrap.
// Four groups per iteration hide the multiply chain's latency, as
// philox_blocks_avx512's kInFlight does (measured on Zen 3, one thread,
// bench_cpu_kernels: 0.86 ns a word with one group in flight, 0.62 with two,
// 0.59 with three, 0.52-0.54 with four; six spill and are slower).
constexpr int kInFlightAvx2 = 4;
TINIT_AVX2 inline void philox_blocks_avx2(uint32_t* out, uint64_t blk0, int64_t groups, uint64_t seed,
                                          uint64_t stream) {
  const __m256i m0 = _mm256_set1_epi32(static_cast<int>(kPhiloxM0));
  const __m256i m1 = _mm256_set1_epi32(static_cast<int>(kPhiloxM1));
  __m256i keys0[10], keys1[10];
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int r = 0; r < 10; ++r) {
    keys0[r] = _mm256_set1_epi32(static_cast<int>(k0));
    keys1[r] = _mm256_set1_epi32(static_cast<int>(k1));
    k0 += kPhiloxW0;
    k1 += kPhiloxW1;
  }
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i hi_word = _mm256_set1_epi32(static_cast<int>(blk0 >> 32));
  const __m256i s0 = _mm256_set1_epi32(static_cast<int>(stream));
  const __m256i s1 = _mm256_set1_epi32(static_cast<int>(stream >> 32));
  int64_t g = 0;
  for (; g + kInFlightAvx2 <= groups; g += kInFlightAvx2) {
    Lanes8x2 x[kInFlightAvx2];
#pragma GCC unroll 4
    for (int j = 0; j < kInFlightAvx2; ++j) x[j] = counters8x2(blk0, g + j, iota, hi_word, s0, s1);
#pragma GCC unroll 10
    for (int r = 0; r < 10; ++r) {
#pragma GCC unroll 4
      for (int j = 0; j < kInFlightAvx2; ++j) round8x2(x[j], m0, m1, keys0[r], keys1[r]);
    }
#pragma GCC unroll 4
    for (int j = 0; j < kInFlightAvx2; ++j) store_blocks8x2(out + 32 * (g + j), x[j]);
  }
  for (; g < groups; ++g) {
    Lanes8x2 x = counters8x2(blk0, g, iota, hi_word, s0, s1);
    for (int r = 0; r < 10; ++r) round8x2(x, m0, m1, keys0[r], keys1[r]);
    store_blocks8x2(out + 32 * g, x);
  }
}

#undef TINIT_AVX512
#undef TINIT_AVX2

}  // namespace x86
}  // namespace tinit
#endif
