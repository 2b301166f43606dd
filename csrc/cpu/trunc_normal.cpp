// CPU implementation of tinit::trunc_normal_ and tinit::philox_.
//
// Work is split with at::parallel_for over element ranges; each range is
// processed in chunks of kChunk elements: Philox words for the chunk's counter
// blocks (a loop over blocks the compiler vectorises), then the transform
// (a branch-free loop over elements), then the store in the tensor's dtype.
// The word for element j is the stream word of index offset + j
// (tinit/philox.h), so results do not depend on the thread count or chunking.
//
// SIMD: the chunk kernels are compiled several times with GCC target_clones
// and the best one for the running CPU is chosen at load time, so one binary
// is portable and fast. Contraction is off (-ffp-contract=off), so every clone
// computes the same bits.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <torch/library.h>

#include <algorithm>
#include <type_traits>
#include <cstdint>
#include <vector>

#include "tinit/philox.h"
#include "tinit/transform.h"
#include "philox_x86.h"

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define TINIT_SIMD_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TINIT_SIMD_CLONES
#endif

namespace tinit {
namespace {

constexpr int64_t kChunk = 1024;  // elements per inner step; a multiple of 64
constexpr int64_t kGrain = 1 << 15;

using BlocksFn = void (*)(uint32_t*, uint64_t, int64_t, uint64_t, uint64_t);

void philox_blocks_scalar(uint32_t* out, uint64_t blk0, int64_t nblk,
                          uint64_t seed, uint64_t stream) {
  for (int64_t b = 0; b < nblk; ++b) {
    philox_block(seed, stream, blk0 + static_cast<uint64_t>(b), out + 4 * b);
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
template <int Lanes, void (*Groups)(uint32_t*, uint64_t, int64_t, uint64_t,
                                    uint64_t)>
void philox_blocks_simd(uint32_t* out, uint64_t blk0, int64_t nblk,
                        uint64_t seed, uint64_t stream) {
  // The vector kernels keep the high counter word fixed, so stop a group
  // short of a 2^32-block boundary and let the scalar loop cross it.
  const uint64_t to_wrap = (uint64_t{1} << 32) - (blk0 & 0xffffffffu);
  int64_t groups = nblk / Lanes;
  if (static_cast<uint64_t>(groups) * Lanes > to_wrap) groups = to_wrap / Lanes;
  Groups(out, blk0, groups, seed, stream);
  const int64_t done = groups * Lanes;
  philox_blocks_scalar(out + 4 * done, blk0 + done, nblk - done, seed, stream);
}
#endif

BlocksFn pick_blocks_fn() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) {
    return &philox_blocks_simd<16, x86::philox_blocks_avx512>;
  }
  if (__builtin_cpu_supports("avx2")) {
    return &philox_blocks_simd<8, x86::philox_blocks_avx2>;
  }
#endif
  return &philox_blocks_scalar;
}

const BlocksFn philox_blocks = pick_blocks_fn();

// Words of the counter blocks covering [first, first + count) into buf;
// returns the position of word `first` in buf (0..3).
int stream_blocks(uint32_t* buf, uint64_t first, int64_t count, uint64_t seed,
                  uint64_t stream) {
  const int skip = static_cast<int>(first & 3u);
  philox_blocks(buf, first >> 2, (skip + count + 3) >> 2, seed, stream);
  return skip;
}

template <typename out_t, typename T>
TINIT_HD out_t store_cast(T x) {
  return static_cast<out_t>(x);
}
template <>
TINIT_HD c10::BFloat16 store_cast<c10::BFloat16, float>(float x) {
  return c10::BFloat16(float_to_bf16_bits(x), c10::BFloat16::from_bits());
}

// Precision of the inverse-CDF rationals (transform.h, ndtri_lower).
template <typename out_t>
using RationalT = typename std::conditional<sizeof(out_t) >= 4, double, float>::type;

template <typename out_t, typename T, int Mode>
TINIT_HD void transform_range(out_t* __restrict out,
                              const uint32_t* __restrict w, int64_t n,
                              const TruncNormalParams<T>& params) {
  const TruncNormalParams<T> P = params;  // by value: no aliasing with out
  if constexpr (Mode == kCentral && std::is_same<T, float>::value) {
    // The same arithmetic as trunc_normal_value, as two loops: fused into
    // one, GCC's AVX-512 code for it runs 2-4x slower (measured).
    alignas(64) float d[kChunk], v[kChunk], h[kChunk], sd[kChunk];
    for (int64_t i = 0; i < n; ++i) {
      central_stage1(w[i], P, d[i], v[i], h[i], sd[i]);
    }
    for (int64_t i = 0; i < n; ++i) {
      const float x = central_finish<RationalT<out_t>>(d[i], v[i], h[i], sd[i], P.mean);
      out[i] = store_cast<out_t, T>(clamp_to<float>(x, P));
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      out[i] = store_cast<out_t, T>(trunc_normal_value<T, Mode, RationalT<out_t>>(w[i], P));
    }
  }
}

// One non-template entry per (dtype, mode) so target_clones applies.
#define TINIT_TRANSFORM_ENTRY(name, out_t, T, Mode)                        \
  TINIT_SIMD_CLONES void name(out_t* out, const uint32_t* w, int64_t n,   \
                              const TruncNormalParams<T>& P) {            \
    transform_range<out_t, T, Mode>(out, w, n, P);                        \
  }
#define TINIT_TRANSFORM_MODES(prefix, out_t, T)                      \
  TINIT_TRANSFORM_ENTRY(prefix##_two, out_t, T, kTwoSided)           \
  TINIT_TRANSFORM_ENTRY(prefix##_far, out_t, T, kTwoSidedFar)        \
  TINIT_TRANSFORM_ENTRY(prefix##_tail, out_t, T, kTail)            \
  TINIT_TRANSFORM_ENTRY(prefix##_central, out_t, T, kCentral)
TINIT_TRANSFORM_MODES(transform_f32, float, float)
TINIT_TRANSFORM_MODES(transform_bf16, c10::BFloat16, float)
TINIT_TRANSFORM_MODES(transform_f16, c10::Half, float)
TINIT_TRANSFORM_MODES(transform_f64, double, double)
#undef TINIT_TRANSFORM_MODES
#undef TINIT_TRANSFORM_ENTRY

// A 64-byte aligned word offset into the staging buffer that puts it half a
// page away from `out`: a load and a store 4 KiB apart (modulo) falsely alias
// on x86 and would stall every iteration of the transform loop.
inline int64_t word_shift_from(const void* storage, const void* out) {
  const auto diff = reinterpret_cast<uintptr_t>(out) + 2048 -
                    reinterpret_cast<uintptr_t>(storage);
  return static_cast<int64_t>((diff & 4095u) / 4) & ~int64_t{15};
}

template <typename out_t, typename T>
using TransformFn = void (*)(out_t*, const uint32_t*, int64_t,
                             const TruncNormalParams<T>&);

template <typename out_t, typename T>
struct TransformSet {
  TransformFn<out_t, T> two, far, tail, central;
  TransformFn<out_t, T> operator[](int mode) const {
    return mode == kTail ? tail
                         : (mode == kTwoSidedFar ? far : (mode == kCentral ? central : two));
  }
};

template <typename out_t, typename T>
void launch(const at::Tensor& t, uint64_t seed, uint64_t stream,
            uint64_t offset, const TruncNormalParams<T>& P,
            const TransformSet<out_t, T>& set) {
  out_t* base = t.data_ptr<out_t>();
  const auto fn = set[P.mode];
  at::parallel_for(0, t.numel(), kGrain, [&](int64_t begin, int64_t end) {
    alignas(64) uint32_t storage[kChunk + 64 + 4 + 1024];
    for (int64_t j = begin; j < end; j += kChunk) {
      const int64_t m = std::min(kChunk, end - j);
      uint32_t* buf = storage + word_shift_from(storage, base + j);
      const int skip = stream_blocks(buf, offset + static_cast<uint64_t>(j), m,
                                     seed, stream);
      fn(base + j, buf + skip, m, P);
    }
  });
}

void check_target(const at::Tensor& self, const char* op) {
  TORCH_CHECK(self.device().is_cpu(), op, ": expected a CPU tensor, got ",
              self.device());
  TORCH_CHECK(self.is_contiguous(), op,
              ": expected a contiguous tensor (tinit.ops copies views)");
}

void trunc_normal_cpu(at::Tensor self, int64_t seed, int64_t stream,
                      int64_t offset, at::ArrayRef<double> transform) {
  check_target(self, "tinit::trunc_normal_");
  TORCH_CHECK(static_cast<int64_t>(transform.size()) == kParamCount,
              "tinit::trunc_normal_: expected ", kParamCount,
              " transform constants (tinit/params.py), got ", transform.size());
  TORCH_CHECK(offset >= 0, "tinit::trunc_normal_: offset must be >= 0");
  if (self.numel() == 0) return;
  const auto s = static_cast<uint64_t>(seed);
  const auto st = static_cast<uint64_t>(stream);
  const auto off = static_cast<uint64_t>(offset);
  switch (self.scalar_type()) {
    case at::kFloat:
      launch<float, float>(self, s, st, off,
                           TruncNormalParams<float>::from_packed(transform.data()),
                           {transform_f32_two, transform_f32_far, transform_f32_tail, transform_f32_central});
      break;
    case at::kBFloat16:
      launch<c10::BFloat16, float>(
          self, s, st, off,
          TruncNormalParams<float>::from_packed(transform.data()),
          {transform_bf16_two, transform_bf16_far, transform_bf16_tail, transform_bf16_central});
      break;
    case at::kHalf:
      launch<c10::Half, float>(
          self, s, st, off,
          TruncNormalParams<float>::from_packed(transform.data()),
          {transform_f16_two, transform_f16_far, transform_f16_tail, transform_f16_central});
      break;
    case at::kDouble:
      launch<double, double>(
          self, s, st, off,
          TruncNormalParams<double>::from_packed(transform.data()),
          {transform_f64_two, transform_f64_far, transform_f64_tail, transform_f64_central});
      break;
    default:
      TORCH_CHECK(false, "tinit::trunc_normal_: unsupported dtype ",
                  self.scalar_type(),
                  " (expected float32, float64, bfloat16 or float16)");
  }
}

void philox_cpu(at::Tensor self, int64_t seed, int64_t stream,
                int64_t offset) {
  check_target(self, "tinit::philox_");
  TORCH_CHECK(self.scalar_type() == at::kInt,
              "tinit::philox_: expected an int32 tensor for the uint32 words");
  TORCH_CHECK(offset >= 0, "tinit::philox_: offset must be >= 0");
  auto* base = reinterpret_cast<uint32_t*>(self.data_ptr<int32_t>());
  at::parallel_for(0, self.numel(), kGrain, [&](int64_t begin, int64_t end) {
    alignas(64) uint32_t buf[kChunk + 64 + 4];
    for (int64_t j = begin; j < end; j += kChunk) {
      const int64_t m = std::min(kChunk, end - j);
      const int skip = stream_blocks(
          buf, static_cast<uint64_t>(offset) + static_cast<uint64_t>(j), m,
          static_cast<uint64_t>(seed), static_cast<uint64_t>(stream));
      std::copy(buf + skip, buf + skip + m, base + j);
    }
  });
}

std::vector<int64_t> philox_words_raw(at::IntArrayRef counter,
                                      at::IntArrayRef key) {
  TORCH_CHECK(counter.size() == 4 && key.size() == 2,
              "tinit::philox4x32_10: expected 4 counter and 2 key words");
  uint32_t c[4];
  for (int i = 0; i < 4; ++i) c[i] = static_cast<uint32_t>(counter[i]);
  philox4x32_10(c[0], c[1], c[2], c[3], static_cast<uint32_t>(key[0]),
                static_cast<uint32_t>(key[1]));
  return {c[0], c[1], c[2], c[3]};
}

}  // namespace

// Device-independent: registered for every backend.
TORCH_LIBRARY_IMPL(tinit, CompositeExplicitAutograd, m) {
  m.impl("philox4x32_10", &philox_words_raw);
}

TORCH_LIBRARY_IMPL(tinit, CPU, m) {
  m.impl("trunc_normal_", &trunc_normal_cpu);
  m.impl("philox_", &philox_cpu);
}

}  // namespace tinit
