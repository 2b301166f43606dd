// Philox4x32-10 counter-based generator, usable from host and device code.
//
// THE STREAM (the single definition every backend points to)
// ----------------------------------------------------------
// The value at flat (row-major, logical) element index i of a tensor is a pure
// function of (seed, stream, i, mean, std, a, b, dtype):
//
//   key      = (k0, k1)         = (seed mod 2^32, seed >> 32)           seed: 64 bits
//   counter  = (c0, c1, c2, c3) = (blk mod 2^32, blk >> 32,
//                                  stream mod 2^32, stream >> 32)      blk = i / 4
//   word     = Philox4x32-10(counter, key)[i % 4]                      (uint32)
//   uniform  = word * 2^-32 + 2^-33, in the open interval (0, 1); its
//              complement 1 - uniform is formed the same way from ~word
//   value    = the truncated-normal transform, tinit::trunc_normal_value
//
// i counts from the start of the logical tensor (a shard adds its global
// element offset), never from a thread, block or program id, so the values do
// not depend on launch shape, thread count, device or sharding.
//
// Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as easy as 1, 2, 3",
// SC'11. Known-answer vectors: tests/data/philox4x32_10_kat.json.
#pragma once

#include "tinit/fp_contract.h"
// (first: contraction off)

#include <cstdint>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define TINIT_HD __host__ __device__ __forceinline__
#else
#define TINIT_HD inline __attribute__((always_inline))
#endif

namespace tinit {

constexpr uint32_t kPhiloxM0 = 0xD2511F53u;
constexpr uint32_t kPhiloxM1 = 0xCD9E8D57u;
constexpr uint32_t kPhiloxW0 = 0x9E3779B9u;
constexpr uint32_t kPhiloxW1 = 0xBB67AE85u;

// The ten round keys of `seed`, computed once per thread by the GPU kernels
// (in the loop, the key schedule would cost two adds a round).
struct PhiloxKeys {
  uint32_t k0[10], k1[10];
};

TINIT_HD PhiloxKeys philox_keys(uint64_t seed) {
  PhiloxKeys keys;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
#if defined(__CUDACC__)
#pragma unroll
#endif
  for (int round = 0; round < 10; ++round) {
    keys.k0[round] = k0;
    keys.k1[round] = k1;
    k0 += kPhiloxW0;
    k1 += kPhiloxW1;
  }
  return keys;
}

// Ten rounds in place on the counter words, with the round keys
// precomputed; the result replaces them.
TINIT_HD void philox4x32_10(uint32_t& c0, uint32_t& c1, uint32_t& c2, uint32_t& c3, const PhiloxKeys& keys) {
#if defined(__CUDACC__)
#pragma unroll
#endif
  for (int round = 0; round < 10; ++round) {
#if defined(__CUDA_ARCH__)
    // 32x32 -> hi and lo words: the 64-bit product form compiles to a wide
    // multiply plus an add of the (zero) upper operand halves.
    const uint32_t hi0 = __umulhi(kPhiloxM0, c0), lo0 = kPhiloxM0 * c0;
    const uint32_t hi1 = __umulhi(kPhiloxM1, c2), lo1 = kPhiloxM1 * c2;
#else
    const uint64_t p0 = static_cast<uint64_t>(kPhiloxM0) * c0;
    const uint64_t p1 = static_cast<uint64_t>(kPhiloxM1) * c2;
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
#endif
    const uint32_t n0 = hi1 ^ c1 ^ keys.k0[round];
    const uint32_t n2 = hi0 ^ c3 ^ keys.k1[round];
    c1 = lo1;
    c3 = lo0;
    c0 = n0;
    c2 = n2;
  }
}

// The four words of counter block `blk` of `stream` under precomputed keys.
TINIT_HD void philox_block(const PhiloxKeys& keys, uint64_t stream, uint64_t blk, uint32_t out[4]) {
  uint32_t c0 = static_cast<uint32_t>(blk);
  uint32_t c1 = static_cast<uint32_t>(blk >> 32);
  uint32_t c2 = static_cast<uint32_t>(stream);
  uint32_t c3 = static_cast<uint32_t>(stream >> 32);
  philox4x32_10(c0, c1, c2, c3, keys);
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

// Ten rounds under the key (k0, k1) = (seed mod 2^32, seed >> 32).
TINIT_HD void philox4x32_10(uint32_t& c0, uint32_t& c1, uint32_t& c2, uint32_t& c3, uint32_t k0, uint32_t k1) {
  philox4x32_10(c0, c1, c2, c3, philox_keys((static_cast<uint64_t>(k1) << 32) | k0));
}

// The four words of counter block `blk` of `stream` under key `seed`.
TINIT_HD void philox_block(uint64_t seed, uint64_t stream, uint64_t blk, uint32_t out[4]) {
  philox_block(philox_keys(seed), stream, blk, out);
}

}  // namespace tinit
