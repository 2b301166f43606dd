// Reads kParamCount doubles (argv), builds TruncNormalParams<double> with
// from_packed, and prints every field as "name value", in declaration order:
// tests/test_params_record.py checks the names and values against
// tinit.params.TruncNormalParams.
#include <cstdio>
#include <cstdlib>

#include "tinit/transform.h"

#define TINIT_FIELD(name) std::printf(#name " %.17g\n", static_cast<double>(r.name))

int main(int argc, char** argv) {
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
  return 0;
}
