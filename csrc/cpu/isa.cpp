// The CPU engine, chosen once (see isa.h).
#include "tinit/fp_contract.h"
// (first: contraction off)

#include "isa.h"

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace tinit {
namespace cpu {
namespace {

Isa choose() {
  const std::vector<Isa> have = available_isas();
  const char* env = std::getenv("TINIT_CPU_ISA");
  if (env == nullptr || env[0] == '\0' || std::string(env) == "auto") return have.back();
  std::string names;
  for (Isa isa : have) names += std::string(names.empty() ? "" : ", ") + isa_name(isa);
  for (int k = 0; k < kIsaCount; ++k) {
    const Isa isa = static_cast<Isa>(k);
    if (std::string(env) != isa_name(isa)) continue;
    if (!isa_supported(isa)) {
      throw std::runtime_error(std::string("TINIT_CPU_ISA=") + env +
                               ": this CPU (or this build) lacks that engine; available: " + names);
    }
    return isa;
  }
  throw std::runtime_error(std::string("TINIT_CPU_ISA=") + env +
                           " is not an engine (expected scalar, avx2, avx512 or auto); available here: " + names);
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
  }
  return "unknown";
}

bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return true;
#if defined(__x86_64__) && defined(__GNUC__)
    // The x86-64-v3 / -v4 levels of the transform entries' target attributes
    // (each implies what its Philox kernel needs: AVX2, or AVX-512 F/BW/DQ/VL).
    case Isa::kAvx2:
      __builtin_cpu_init();
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi") &&
             __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("f16c") && __builtin_cpu_supports("movbe") &&
             __builtin_cpu_supports("lzcnt");
    case Isa::kAvx512:
      __builtin_cpu_init();
      return isa_supported(Isa::kAvx2) && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512cd");
#endif
    default:
      return false;
  }
}

std::vector<Isa> available_isas() {
  std::vector<Isa> have;
  for (int k = 0; k < kIsaCount; ++k) {
    if (isa_supported(static_cast<Isa>(k))) have.push_back(static_cast<Isa>(k));
  }
  return have;
}

Isa chosen_isa() {
  static const Isa isa = choose();  // a throw leaves it unset: the next call throws again
  return isa;
}

}  // namespace cpu
}  // namespace tinit
