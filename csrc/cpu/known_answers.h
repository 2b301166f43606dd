// Known answers of the fp32 transform that a build which contracts a*b + c
// into an fma, or a thread that flushes subnormals to zero, gets wrong:
// words of fp32 tail windows (tail_value's l - L) and subnormal windows
// (rescale's x * scale + 0, where a fused step writes -0 for +0; a subnormal
// value that FTZ writes as 0). Computed from the correct build (contraction
// off, gradual underflow); each kContraction answer was checked to change
// under -ffp-contract=fast with the fp_contract.h pragma removed, each kFlush
// answer under FTZ/DAZ (tests/test_isa.py repeats both checks). Records:
// tinit.params.transform_constants of the window named, packed as the op
// takes them. Torch-free; read by tinit::cpu::self_test_failure and the test's harness.
#pragma once

#include "tinit/fp_contract.h"
// (first: contraction off)

#include <cstdint>

#include "tinit/transform.h"

namespace tinit {
namespace cpu {

enum KnownAnswerCause : int { kContraction = 0, kFlush = 1 };

struct KnownAnswer {
  const char* window;
  KnownAnswerCause catches;  // what changes the value
  uint32_t word;
  uint32_t bits;  // the fp32 value's bits
  double packed[kParamCount];
};

// clang-format off
inline constexpr KnownAnswer kKnownAnswers[] = {
    {"fp32 N(0, 1) on [9, 12] (kTail: l - L)", kContraction, 443456495u, 0x411030fau, {0x1.8000000000000p+1, -0x1.0000000000000p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, -0x1.0000000000000p+0, 0x0.0p+0, 0x1.0000000000000p+0, 0x1.2000000000000p+3, 0x1.8000000000000p+3, 0x1.2000000000000p+3, 0x0.0p+0, 0x0.0p+0, 0x1.2000000000000p+3, 0x1.1b8f5e68a9dd8p-46, 0x1.bc82b54274d9fp-4, -0x1.794b9f652842fp-8, 0x1.a095c57695096p-12, -0x1.e40676b8242d5p-16, 0x1.a68ab02d67d1cp-20}},
    {"fp32 N(0, 1) on [9, 12] (kTail: l - L)", kContraction, 741576317u, 0x41105523u, {0x1.8000000000000p+1, -0x1.0000000000000p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, -0x1.0000000000000p+0, 0x0.0p+0, 0x1.0000000000000p+0, 0x1.2000000000000p+3, 0x1.8000000000000p+3, 0x1.2000000000000p+3, 0x0.0p+0, 0x0.0p+0, 0x1.2000000000000p+3, 0x1.1b8f5e68a9dd8p-46, 0x1.bc82b54274d9fp-4, -0x1.794b9f652842fp-8, 0x1.a095c57695096p-12, -0x1.e40676b8242d5p-16, 0x1.a68ab02d67d1cp-20}},
    {"fp32 N(0, 0.02^2) on [-0.5, -0.2] (kTail, mirrored)", kContraction, 641425u, 0xbe5df5e5u, {0x1.8000000000000p+1, 0x1.0000000000000p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x1.47ae140000000p-6, 0x1.eb851e0000000p-32, 0x1.0000000000000p+0, -0x1.0000000000000p-1, -0x1.99999a0000000p-3, -0x1.999999999999ap-3, 0x0.0p+0, 0x0.0p+0, 0x1.4000000000000p+3, 0x1.f9cb61b339681p-381, 0x1.91ca346be0a0fp-4, -0x1.357f335e8b529p-8, 0x1.379d59082c9aep-12, -0x1.4eff2ddca7fb8p-16, 0x1.1a1946443d828p-20}},
    {"fp32 N(0, 0.02^2) on [-0.5, -0.2] (kTail, mirrored)", kContraction, 3806612u, 0xbe5a992bu, {0x1.8000000000000p+1, 0x1.0000000000000p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x1.47ae140000000p-6, 0x1.eb851e0000000p-32, 0x1.0000000000000p+0, -0x1.0000000000000p-1, -0x1.99999a0000000p-3, -0x1.999999999999ap-3, 0x0.0p+0, 0x0.0p+0, 0x1.4000000000000p+3, 0x1.f9cb61b339681p-381, 0x1.91ca346be0a0fp-4, -0x1.357f335e8b529p-8, 0x1.379d59082c9aep-12, -0x1.4eff2ddca7fb8p-16, 0x1.1a1946443d828p-20}},
    {"fp32 N(0, (1e-39)^2) on [-3e-39, 3e-39] (rescale: x * scale + 0)", kContraction, 2147482654u, 0x00000000u, {0x1.0000000000000p+1, 0x1.0000000000000p+0, 0x1.fffffffc00000p+30, 0x1.61de2196f97edp-10, 0x1.61de2196f97edp-10, -0x1.fe9e21de69068p-2, -0x1.fe9e21de69068p-2, 0x1.fe9e21e067a4ap-33, 0x0.0p+0, 0x1.5c72fc0000000p+0, -0x1.d55a500000000p-25, 0x1.0000000000000p-130, -0x1.0556380000000p-128, 0x1.0556380000000p-128, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0}},
    {"fp32 N(0, (1e-40)^2) on [-1e-40, 2e-40] (subnormal window)", kContraction, 1790938857u, 0x00000000u, {0x1.0000000000000p+1, -0x1.0000000000000p+0, 0x1.2a80734a00000p+31, 0x1.74bcf846cf737p-6, 0x1.44ed0bbb115e7p-3, -0x1.e8b4307b9308dp-2, -0x1.5d897a227750dp-2, 0x1.a31ed550a84bap-33, 0x0.0p+0, -0x1.16c2620000000p+0, -0x1.ddd5e80000000p-26, 0x1.0000000000000p-133, -0x1.16c2000000000p-133, 0x1.16c2000000000p-132, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0}},
    {"fp32 N(0, (1e-40)^2) on [-1e-40, 2e-40] (subnormal window)", kContraction, 1790939880u, 0x00000000u, {0x1.0000000000000p+1, -0x1.0000000000000p+0, 0x1.2a80734a00000p+31, 0x1.74bcf846cf737p-6, 0x1.44ed0bbb115e7p-3, -0x1.e8b4307b9308dp-2, -0x1.5d897a227750dp-2, 0x1.a31ed550a84bap-33, 0x0.0p+0, -0x1.16c2620000000p+0, -0x1.ddd5e80000000p-26, 0x1.0000000000000p-133, -0x1.16c2000000000p-133, 0x1.16c2000000000p-132, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0}},
    {"fp32 N(0, (1e-39)^2) on [-3e-39, 3e-39] (rescale: x * scale + 0)", kFlush, 0u, 0x8020aac7u, {0x1.0000000000000p+1, 0x1.0000000000000p+0, 0x1.fffffffc00000p+30, 0x1.61de2196f97edp-10, 0x1.61de2196f97edp-10, -0x1.fe9e21de69068p-2, -0x1.fe9e21de69068p-2, 0x1.fe9e21e067a4ap-33, 0x0.0p+0, 0x1.5c72fc0000000p+0, -0x1.d55a500000000p-25, 0x1.0000000000000p-130, -0x1.0556380000000p-128, 0x1.0556380000000p-128, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0}},
    {"fp32 N(0, (1e-40)^2) on [-1e-40, 2e-40] (subnormal window)", kFlush, 0u, 0x800116c2u, {0x1.0000000000000p+1, -0x1.0000000000000p+0, 0x1.2a80734a00000p+31, 0x1.74bcf846cf737p-6, 0x1.44ed0bbb115e7p-3, -0x1.e8b4307b9308dp-2, -0x1.5d897a227750dp-2, 0x1.a31ed550a84bap-33, 0x0.0p+0, -0x1.16c2620000000p+0, -0x1.ddd5e80000000p-26, 0x1.0000000000000p-133, -0x1.16c2000000000p-133, 0x1.16c2000000000p-132, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0, 0x0.0p+0}},
};
// clang-format on

}  // namespace cpu
}  // namespace tinit
