// Per-kernel CPU cost of the x86 SIMD paths (bench/bench_cpu_kernels.py
// builds and runs it): the Philox words (philox_blocks_avx512 /
// philox_blocks_avx2) and the two-sided transform (two_sided_avx512 /
// two_sided_avx2) per output dtype, for each ISA the CPU has, on a
// 1024-element chunk in L1, one thread, the best of 30 trials of 2000 calls,
// in ns per element. Reads the windows' packed TruncNormalParams, one line of
// 24 numbers per window, on stdin.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <vector>

#include "cpu/isa.h"
#include "cpu/philox_x86.h"
#include "cpu/transform_avx2.h"
#include "cpu/transform_avx512.h"

namespace {

template <class F>
double best_ns_per_elem(F fn, int n) {
  constexpr int kCalls = 2000, kTrials = 30;
  double best = 1e30;
  for (int t = 0; t < kTrials; ++t) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < kCalls; ++r) fn();
    const auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double, std::nano>(t1 - t0).count() / kCalls / n);
  }
  return best;
}

}  // namespace

struct Isa {
  const char* name;
  bool available;
  void (*philox)(uint32_t*, uint64_t, int64_t, uint64_t, uint64_t);
  tinit::cpu::ChunkFn (*two_sided)(c10::ScalarType, bool);
};

int main() {
  const Isa isas[] = {
      {"avx512", tinit::cpu::isa_supported(tinit::cpu::Isa::kAvx512), tinit::x86::philox_blocks_avx512,
       tinit::cpu::two_sided_avx512},
      {"avx2", tinit::cpu::isa_supported(tinit::cpu::Isa::kAvx2), tinit::x86::philox_blocks_avx2,
       tinit::cpu::two_sided_avx2},
  };
  constexpr int n = 1024;
  alignas(64) static uint32_t words[n];
  alignas(64) static float out32[n];
  alignas(64) static uint16_t out16[n];
  volatile uint64_t seed = 12345;  // not a compile-time constant
  std::vector<std::vector<double>> windows;
  for (std::vector<double> packed(tinit::kParamCount); std::cin >> packed[0];) {
    for (int i = 1; i < tinit::kParamCount; ++i) std::cin >> packed[i];
    windows.push_back(packed);
  }
  for (const Isa& isa : isas) {
    if (!isa.available) {
      std::printf("no %s on this CPU\n", isa.name);
      continue;
    }
    const double philox = best_ns_per_elem([&] { isa.philox(words, 77, n / 32, seed, 3); }, n);  // 32 words a group
    std::printf("philox_blocks_%s: %.3f ns/word\n", isa.name, philox);
    for (size_t window = 0; window < windows.size(); ++window) {
      const auto P = tinit::TruncNormalParams<float>::from_packed(windows[window].data());
      const bool precise = P.mode == tinit::kTwoSidedPrecise;
      const auto f32 = isa.two_sided(c10::kFloat, precise);
      const auto bf16 = isa.two_sided(c10::kBFloat16, precise);
      const auto f16 = isa.two_sided(c10::kHalf, precise);
      std::printf("window %zu two_sided_%s%s: fp32 %.3f, bf16 %.3f, fp16 %.3f ns/elem\n", window, isa.name,
                  precise ? " precise" : "", best_ns_per_elem([&] { f32(out32, words, n, &P); }, n),
                  best_ns_per_elem([&] { bf16(out16, words, n, &P); }, n),
                  best_ns_per_elem([&] { f16(out16, words, n, &P); }, n));
    }
  }
  return 0;
}
