// The CPU engine (instruction set) of the CPU kernels, chosen once per
// process: the Philox words (stream_words.cpp), the transform entries
// (transform_kernels.cpp) and the hand-vectorised two-sided modes
// (transform_avx512.cpp) all follow it, so one engine runs a whole fill.
// Every engine computes the same bits (tests/test_isa.py runs each one).
//
// The best engine this CPU runs, unless TINIT_CPU_ISA names one
// (scalar, avx2 or avx512); an engine the CPU lacks, or an unknown name, is
// refused with a std::runtime_error (a RuntimeError in Python) at the first
// op. Torch-free: the portability check compiles it for foreign targets.
#pragma once

#include "tinit/fp_contract.h"
// (first: contraction off)

#include <string>
#include <vector>

namespace tinit {
namespace cpu {

enum class Isa : int {
  kScalar = 0,  // portable C++, any target
  kAvx2 = 1,    // x86-64-v3: AVX2 Philox, the x86-64-v3 transform entries
  kAvx512 = 2,  // x86-64-v4: AVX-512 Philox and two-sided modes, x86-64-v4 entries
};
constexpr int kIsaCount = 3;

// "scalar", "avx2", "avx512".
const char* isa_name(Isa isa);

// Whether this CPU runs `isa`.
bool isa_supported(Isa isa);

// The engines this CPU runs, scalar first.
std::vector<Isa> available_isas();

// The engine of this process: chosen at the first call (TINIT_CPU_ISA or the
// best available) and the same for every later call. Throws
// std::runtime_error, at this and every later call, for a bad TINIT_CPU_ISA.
Isa chosen_isa();

}  // namespace cpu
}  // namespace tinit
