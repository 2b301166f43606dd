// SIMD clones of the transform loop (see transform_kernels.h).
//
// Each entry is compiled several times with GCC target_clones and the best
// one for the running CPU is chosen at load time, so one binary is portable
// and fast. Contraction is off (-ffp-contract=off), so every clone computes
// the same bits.
#include "transform_kernels.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Exception.h>
#include <c10/util/Half.h>

#include <type_traits>

#include "stream_words.h"

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define TINIT_SIMD_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TINIT_SIMD_CLONES
#endif

namespace tinit {
namespace cpu {
namespace {

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
#define TINIT_TRANSFORM_ENTRY(name, out_t, T, Mode)                         \
  TINIT_SIMD_CLONES void name(void* out, const uint32_t* w, int64_t n,     \
                              const void* P) {                             \
    transform_range<out_t, T, Mode>(static_cast<out_t*>(out), w, n,        \
                                    *static_cast<const TruncNormalParams<T>*>(P)); \
  }
#define TINIT_TRANSFORM_MODES(prefix, out_t, T)                      \
  TINIT_TRANSFORM_ENTRY(prefix##_two, out_t, T, kTwoSided)           \
  TINIT_TRANSFORM_ENTRY(prefix##_far, out_t, T, kTwoSidedFar)        \
  TINIT_TRANSFORM_ENTRY(prefix##_tail, out_t, T, kTail)              \
  TINIT_TRANSFORM_ENTRY(prefix##_central, out_t, T, kCentral)
TINIT_TRANSFORM_MODES(transform_f32, float, float)
TINIT_TRANSFORM_MODES(transform_bf16, c10::BFloat16, float)
TINIT_TRANSFORM_MODES(transform_f16, c10::Half, float)
TINIT_TRANSFORM_MODES(transform_f64, double, double)
#undef TINIT_TRANSFORM_MODES
#undef TINIT_TRANSFORM_ENTRY

struct ModeSet {
  ChunkFn two, far, tail, central;
  ChunkFn operator[](int mode) const {
    return mode == kTail ? tail
                         : (mode == kTwoSidedFar ? far : (mode == kCentral ? central : two));
  }
};

}  // namespace

ChunkTransform make_chunk_transform(c10::ScalarType dtype, const double* packed,
                                    const char* op) {
  ChunkTransform t;
  ModeSet set{};
  switch (dtype) {
    case c10::kFloat:
      set = {transform_f32_two, transform_f32_far, transform_f32_tail, transform_f32_central};
      break;
    case c10::kBFloat16:
      set = {transform_bf16_two, transform_bf16_far, transform_bf16_tail, transform_bf16_central};
      break;
    case c10::kHalf:
      set = {transform_f16_two, transform_f16_far, transform_f16_tail, transform_f16_central};
      break;
    case c10::kDouble:
      set = {transform_f64_two, transform_f64_far, transform_f64_tail, transform_f64_central};
      t.is_double = true;
      break;
    default:
      TORCH_CHECK(false, op, ": unsupported dtype ", dtype,
                  " (expected float32, float64, bfloat16 or float16)");
  }
  // ModeSet maps an unknown mode to the two-sided transform: refuse it here,
  // as the CUDA binding does, instead of writing values from wrong constants.
  const double mode = packed[0];
  TORCH_CHECK(mode == kTwoSided || mode == kTail || mode == kTwoSidedFar || mode == kCentral, op,
              ": transform mode must be 0..3 (tinit/params.py), got ", mode);
  t.elem_size = static_cast<int64_t>(c10::elementSize(dtype));
  if (t.is_double) {
    t.pd = TruncNormalParams<double>::from_packed(packed);
    t.fn = set[t.pd.mode];
  } else {
    t.pf = TruncNormalParams<float>::from_packed(packed);
    t.fn = set[t.pf.mode];
  }
  return t;
}

}  // namespace cpu
}  // namespace tinit
