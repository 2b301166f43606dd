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

#include <cstdlib>

#include "stream_words.h"
#include "transform_avx2.h"
#include "transform_avx512.h"

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define TINIT_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
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

template <typename out_t, typename T, int Mode>
TINIT_HD void transform_range(out_t* __restrict out, const uint32_t* __restrict w, int64_t n,
                              const TruncNormalParams<T>& params) {
  const TruncNormalParams<T> P = params;  // by value: no aliasing with out
  for (int64_t i = 0; i < n; ++i) {
    out[i] = store_cast<out_t, T>(trunc_normal_value<T, Mode>(w[i], P));
  }
}

// One non-template entry per (dtype, mode) so target_clones applies.
#define TINIT_TRANSFORM_ENTRY(name, out_t, T, Mode)                                                                \
  TINIT_SIMD_CLONES void name(void* out, const uint32_t* w, int64_t n, const void* P) {                            \
    transform_range<out_t, T, Mode>(static_cast<out_t*>(out), w, n, *static_cast<const TruncNormalParams<T>*>(P)); \
  }
#define TINIT_TRANSFORM_MODES(prefix, out_t, T)                       \
  TINIT_TRANSFORM_ENTRY(prefix##_uniform, out_t, T, kUniform)         \
  TINIT_TRANSFORM_ENTRY(prefix##_two, out_t, T, kTwoSided)            \
  TINIT_TRANSFORM_ENTRY(prefix##_precise, out_t, T, kTwoSidedPrecise) \
  TINIT_TRANSFORM_ENTRY(prefix##_tail, out_t, T, kTail)
TINIT_TRANSFORM_MODES(transform_f32, float, float)
TINIT_TRANSFORM_MODES(transform_bf16, c10::BFloat16, float)
TINIT_TRANSFORM_MODES(transform_f16, c10::Half, float)
TINIT_TRANSFORM_MODES(transform_f64, double, double)
#undef TINIT_TRANSFORM_MODES
#undef TINIT_TRANSFORM_ENTRY

// The hand-vectorised entry of a two-sided mode for this CPU (AVX-512, else
// AVX2), or nullptr for the portable one. TINIT_CPU_PORTABLE=1 keeps the
// portable entries (the tests compare both).
ChunkFn two_sided_simd(c10::ScalarType dtype, bool precise) {
  const char* portable = std::getenv("TINIT_CPU_PORTABLE");
  if (portable && portable[0] == '1') return nullptr;
  if (avx512_available()) return two_sided_avx512(dtype, precise);
  if (avx2_available()) return two_sided_avx2(dtype, precise);
  return nullptr;
}

// Indexed by TransformMode.
struct ModeSet {
  ChunkFn fn[kModeCount];
  ChunkFn operator[](int mode) const { return fn[mode]; }
};

}  // namespace

ChunkTransform make_chunk_transform(c10::ScalarType dtype, const double* packed, const char* op) {
  ChunkTransform t;
  ModeSet set{};
  switch (dtype) {
    case c10::kFloat:
      set = {{transform_f32_uniform, transform_f32_two, transform_f32_precise, transform_f32_tail}};
      break;
    case c10::kBFloat16:
      set = {{transform_bf16_uniform, transform_bf16_two, transform_bf16_precise, transform_bf16_tail}};
      break;
    case c10::kHalf:
      set = {{transform_f16_uniform, transform_f16_two, transform_f16_precise, transform_f16_tail}};
      break;
    case c10::kDouble:
      set = {{transform_f64_uniform, transform_f64_two, transform_f64_precise, transform_f64_tail}};
      t.is_double = true;
      break;
    default:
      TORCH_CHECK(false, op, ": unsupported dtype ", dtype, " (expected float32, float64, bfloat16 or float16)");
  }
  // An unknown mode would index past ModeSet: the callers' check_record refused it; this guard stays
  // with the table it protects.
  TORCH_CHECK(valid_mode(packed[kPackedMode]) && valid_params(packed), op, ": invalid transform record");
  t.elem_size = static_cast<int64_t>(c10::elementSize(dtype));
  if (t.is_double) {
    t.pd = TruncNormalParams<double>::from_packed(packed);
    t.fn = set[t.pd.mode];
  } else {
    t.pf = TruncNormalParams<float>::from_packed(packed);
    t.fn = set[t.pf.mode];
    if (t.pf.mode == kTwoSided || t.pf.mode == kTwoSidedPrecise) {
      if (ChunkFn fn = two_sided_simd(dtype, t.pf.mode == kTwoSidedPrecise)) t.fn = fn;
    }
  }
  return t;
}

}  // namespace cpu
}  // namespace tinit
