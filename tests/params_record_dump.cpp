// Two dumps of transform.h for tests/test_params_record.py, which checks them
// against tinit.params.TruncNormalParams and tinit.params.Mode:
//   params_record_dump <kParamCount doubles>: builds TruncNormalParams<double>
//     with from_packed and prints every field as "name value", in declaration
//     order (then the derived flip, and unclamped of the float record);
//   params_record_dump --modes: prints "kModeCount n", every TransformMode
//     enumerator as "mode kName value", and valid_mode(m) for m in -2 .. n + 1
//     as "valid m 0|1".
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tinit/transform.h"

#define TINIT_FIELD(name) std::printf(#name " %.17g\n", static_cast<double>(r.name))
#define TINIT_MODE(name) std::printf("mode " #name " %d\n", static_cast<int>(tinit::name))

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--modes") == 0) {
    std::printf("kModeCount %d\n", tinit::kModeCount);
    TINIT_MODE(kUniform);
    TINIT_MODE(kTwoSided);
    TINIT_MODE(kTwoSidedPrecise);
    TINIT_MODE(kTail);
    for (int m = -2; m <= tinit::kModeCount + 1; ++m) std::printf("valid %d %d\n", m, tinit::valid_mode(m) ? 1 : 0);
    std::printf("valid 0.5 %d\n", tinit::valid_mode(0.5) ? 1 : 0);
    return 0;
  }
  if (argc != 1 + tinit::kParamCount) return 1;
  double packed[tinit::kParamCount];
  for (int i = 0; i < tinit::kParamCount; ++i) packed[i] = std::strtod(argv[1 + i], nullptr);
  const auto r = tinit::TruncNormalParams<double>::from_packed(packed);
  TINIT_FIELD(mode);
  TINIT_FIELD(sign);
  TINIT_FIELD(split);
  TINIT_FIELD(a_cdf);
  TINIT_FIELD(b_sf);
  TINIT_FIELD(a_half);
  TINIT_FIELD(b_half);
  TINIT_FIELD(step);
  TINIT_FIELD(mean);
  TINIT_FIELD(sd_hi);
  TINIT_FIELD(sd_lo);
  TINIT_FIELD(scale);
  TINIT_FIELD(lo);
  TINIT_FIELD(hi);
  TINIT_FIELD(edge);
  TINIT_FIELD(width);
  TINIT_FIELD(slope);
  TINIT_FIELD(b0);
  TINIT_FIELD(ratio);
  TINIT_FIELD(l1);
  TINIT_FIELD(l2);
  TINIT_FIELD(l3);
  TINIT_FIELD(l4);
  TINIT_FIELD(l5);
  std::printf("flip %u\n", r.flip);
  // Derived for float compute only (the fp64 record never skips its clamp).
  std::printf("unclamped %u\n", tinit::TruncNormalParams<float>::from_packed(packed).unclamped);
  return 0;
}
