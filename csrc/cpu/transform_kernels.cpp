// Per-engine entries of the transform loop (see transform_kernels.h).
//
// Each entry is compiled once per engine of isa.h (a target attribute:
// default, x86-64-v3, x86-64-v4) and the engine chosen once per process
// (tinit::cpu::chosen_isa) picks the set, so one binary is portable and fast.
// Contraction is off (fp_contract.h), so every engine computes the same
// bits.
#include "tinit/fp_contract.h"
// (first: contraction off)

#include "transform_kernels.h"

#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Half.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "denormal_guard.h"
#include "isa.h"
#include "known_answers.h"
#include "stream_words.h"
#include "tinit/check.h"
#include "transform_avx2.h"
#include "transform_avx512.h"

#if defined(__GNUC__) && defined(__x86_64__)
#define TINIT_X86_ENGINES 1
// An engine's target only where it adds to the build's own: a function whose target has fewer
// features than the translation unit's (-march=x86-64-v4 or -march=native on an AVX-512 CPU)
// cannot inline the always_inline transform, and GCC refuses to compile it.
#if defined(__AVX512F__)
#define TINIT_TARGET_AVX2
#define TINIT_TARGET_AVX512
#elif defined(__AVX2__)
#define TINIT_TARGET_AVX2
#define TINIT_TARGET_AVX512 __attribute__((target("arch=x86-64-v4")))
#else
#define TINIT_TARGET_AVX2 __attribute__((target("arch=x86-64-v3")))
#define TINIT_TARGET_AVX512 __attribute__((target("arch=x86-64-v4")))
#endif
#endif

namespace tinit {
namespace cpu {
namespace {

using torch::headeronly::BFloat16;
using torch::headeronly::Half;

template <typename out_t, typename T>
TINIT_HD out_t store_cast(T x) {
  return static_cast<out_t>(x);
}
template <>
TINIT_HD BFloat16 store_cast<BFloat16, float>(float x) {
  return BFloat16(float_to_bf16_bits(x), BFloat16::from_bits());
}

// Inlined into each engine's entry, so it is compiled for that engine.
template <typename out_t, typename T, int Mode>
TINIT_HD void transform_range(out_t* __restrict out, const uint32_t* __restrict w, int64_t n,
                              const TruncNormalParams<T>& params) {
  const TruncNormalParams<T> P = params;  // by value: no aliasing with out
  for (int64_t i = 0; i < n; ++i) {
    out[i] = store_cast<out_t, T>(trunc_normal_value<T, Mode>(w[i], P));
  }
}

// One non-template entry per (engine, dtype, mode): a target attribute
// applies to a function, not to the template it inlines.
#define TINIT_TRANSFORM_ENTRY(attr, name, out_t, T, Mode)                                                          \
  attr void name(void* out, const uint32_t* w, int64_t n, const void* P) {                                         \
    transform_range<out_t, T, Mode>(static_cast<out_t*>(out), w, n, *static_cast<const TruncNormalParams<T>*>(P)); \
  }
#define TINIT_TRANSFORM_MODES(attr, prefix, out_t, T)                       \
  TINIT_TRANSFORM_ENTRY(attr, prefix##_uniform, out_t, T, kUniform)         \
  TINIT_TRANSFORM_ENTRY(attr, prefix##_two, out_t, T, kTwoSided)            \
  TINIT_TRANSFORM_ENTRY(attr, prefix##_precise, out_t, T, kTwoSidedPrecise) \
  TINIT_TRANSFORM_ENTRY(attr, prefix##_tail, out_t, T, kTail)
#define TINIT_TRANSFORM_DTYPES(attr, engine)                   \
  namespace engine {                                           \
  TINIT_TRANSFORM_MODES(attr, transform_f32, float, float)     \
  TINIT_TRANSFORM_MODES(attr, transform_bf16, BFloat16, float) \
  TINIT_TRANSFORM_MODES(attr, transform_f16, Half, float)      \
  TINIT_TRANSFORM_MODES(attr, transform_f64, double, double)   \
  }
TINIT_TRANSFORM_DTYPES(, scalar)
#if defined(TINIT_X86_ENGINES)
TINIT_TRANSFORM_DTYPES(TINIT_TARGET_AVX2, avx2)
TINIT_TRANSFORM_DTYPES(TINIT_TARGET_AVX512, avx512)
#endif
#undef TINIT_TRANSFORM_DTYPES
#undef TINIT_TRANSFORM_MODES
#undef TINIT_TRANSFORM_ENTRY

// Indexed by TransformMode.
struct ModeSet {
  ChunkFn fn[kModeCount];
  ChunkFn operator[](int mode) const { return fn[mode]; }
};

#define TINIT_MODE_SET(ns, prefix)                                                    \
  {                                                                                   \
    {                                                                                 \
      ns::prefix##_uniform, ns::prefix##_two, ns::prefix##_precise, ns::prefix##_tail \
    }                                                                                 \
  }

// The entries of `dtype` for `isa` (an unsupported dtype: all null).
ModeSet mode_set(ScalarType dtype, Isa isa) {
#define TINIT_ENGINE_SETS(ns)                            \
  switch (dtype) {                                       \
    case ScalarType::Float:                              \
      return ModeSet TINIT_MODE_SET(ns, transform_f32);  \
    case ScalarType::BFloat16:                           \
      return ModeSet TINIT_MODE_SET(ns, transform_bf16); \
    case ScalarType::Half:                               \
      return ModeSet TINIT_MODE_SET(ns, transform_f16);  \
    case ScalarType::Double:                             \
      return ModeSet TINIT_MODE_SET(ns, transform_f64);  \
    default:                                             \
      return ModeSet{};                                  \
  }
#if defined(TINIT_X86_ENGINES)
  if (isa == Isa::kAvx512) TINIT_ENGINE_SETS(avx512)
  if (isa == Isa::kAvx2) TINIT_ENGINE_SETS(avx2)
#endif
  (void)isa;
  TINIT_ENGINE_SETS(scalar)
#undef TINIT_ENGINE_SETS
}
#undef TINIT_MODE_SET

// The hand-vectorised entry of a two-sided mode for the engine (two_sided_avx512 for avx512,
// two_sided_avx2 for avx2), or nullptr: the compiled entries. TINIT_CPU_PORTABLE=1 keeps the
// compiled entries (the tests compare both, in one process: read per tensor, not once).
ChunkFn hand_two_sided(ScalarType dtype, bool precise, Isa isa) {
  const char* v = std::getenv("TINIT_CPU_PORTABLE");
  if (v != nullptr && v[0] == '1') return nullptr;
  if (isa == Isa::kAvx512) return two_sided_avx512(dtype, precise);
  if (isa == Isa::kAvx2) return two_sided_avx2(dtype, precise);
  return nullptr;
}

}  // namespace

std::string self_test_failure(Isa isa) {
  const DenormalGuard gradual_underflow;
  volatile float tiny = 0x1p-140f, half = 0.5f;  // volatile: computed at run time
  if (tiny * half == 0.0f) {
    return "subnormal arithmetic flushes to zero (FTZ/DAZ set, and DenormalGuard cannot clear it on this target)";
  }
  const ModeSet set = mode_set(ScalarType::Float, isa);
  for (const KnownAnswer& k : kKnownAnswers) {
    const TruncNormalParams<float> P = TruncNormalParams<float>::from_packed(k.packed);
    ChunkFn fn = set[P.mode];
    if (P.mode == kTwoSided || P.mode == kTwoSidedPrecise) {
      if (ChunkFn hand = hand_two_sided(ScalarType::Float, P.mode == kTwoSidedPrecise, isa)) fn = hand;
    }
    float x = 0.0f;
    fn(&x, &k.word, 1, &P);
    const uint32_t bits = float_as_bits(x);
    if (bits != k.bits) {
      char what[400];
      std::snprintf(what, sizeof(what), "known answer for %s, word %u: 0x%08x instead of 0x%08x: %s", k.window, k.word,
                    bits, k.bits,
                    k.catches == kContraction
                        ? "the build contracts a*b + c into an fma (-ffp-contract=fast, or a compiler that "
                          "ignores fp_contract.h)"
                        : "subnormals are flushed to zero (FTZ/DAZ) although DenormalGuard cleared them");
      return what;
    }
  }
  return {};
}

void require_cpu_engine(const char* op) {
  Isa isa;
  try {
    isa = chosen_isa();
  } catch (const std::runtime_error& err) {
    check_failed(op, ": ", err.what());
  }
  static const std::string failure = self_test_failure(isa);
  TINIT_CHECK(failure.empty(), op, ": refused: the CPU self-test failed on engine ", isa_name(isa), ": ", failure,
              " (every CPU op refuses: its values would differ from the stream's)");
}

ChunkTransform make_chunk_transform(ScalarType dtype, const double* packed, const char* op) {
  ChunkTransform t;
  require_cpu_engine(op);
  const Isa isa = chosen_isa();
  const ModeSet set = mode_set(dtype, isa);
  TINIT_CHECK(set.fn[0] != nullptr, op, ": unsupported dtype ", dtype,
              " (expected float32, float64, bfloat16 or float16)");
  t.is_double = dtype == ScalarType::Double;
  // An unknown mode would index past ModeSet: the callers' check_record refused it; this guard stays
  // with the table it protects.
  TINIT_CHECK(valid_mode(packed[kPackedMode]) && valid_params(packed), op, ": invalid transform record");
  t.elem_size = dtype == ScalarType::Double ? 8 : dtype == ScalarType::Float ? 4 : 2;
  if (t.is_double) {
    t.pd = TruncNormalParams<double>::from_packed(packed);
    t.fn = set[t.pd.mode];
  } else {
    t.pf = TruncNormalParams<float>::from_packed(packed);
    t.fn = set[t.pf.mode];
    if (t.pf.mode == kTwoSided || t.pf.mode == kTwoSidedPrecise) {
      if (ChunkFn fn = hand_two_sided(dtype, t.pf.mode == kTwoSidedPrecise, isa)) t.fn = fn;
    }
  }
  return t;
}

}  // namespace cpu
}  // namespace tinit
