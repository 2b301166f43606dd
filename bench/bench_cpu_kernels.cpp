// Per-kernel CPU cost of the AVX-512 paths (bench/bench_cpu_kernels.py
// builds and runs it): the Philox words (philox_blocks_avx512) and the
// two-sided transform (two_sided_avx512) per output dtype, on a 1024-element
// chunk in L1, one thread, the best of 30 trials of 2000 calls, in ns per
// element. Reads the windows' packed TruncNormalParams, one line of 24
// numbers per window, on stdin.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <vector>

#include "cpu/philox_x86.h"
#include "cpu/transform_avx512.cpp"

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

int main() {
  if (!tinit::cpu::avx512_available()) {
    std::puts("no AVX-512 on this CPU: nothing to measure");
    return 0;
  }
  constexpr int n = 1024;
  alignas(64) static uint32_t words[n];
  alignas(64) static float out32[n];
  alignas(64) static uint16_t out16[n];
  volatile uint64_t seed = 12345;  // not a compile-time constant
  const double philox = best_ns_per_elem([&] { tinit::x86::philox_blocks_avx512(words, 77, n / 32, seed, 3); }, n);
  std::printf("philox_blocks_avx512: %.3f ns/word\n", philox);
  std::vector<double> packed(tinit::kParamCount);
  for (int window = 0; std::cin >> packed[0]; ++window) {
    for (int i = 1; i < tinit::kParamCount; ++i) std::cin >> packed[i];
    const auto P = tinit::TruncNormalParams<float>::from_packed(packed.data());
    const bool precise = P.mode == tinit::kTwoSidedPrecise;
    const auto f32 = tinit::cpu::two_sided_avx512(c10::kFloat, precise);
    const auto bf16 = tinit::cpu::two_sided_avx512(c10::kBFloat16, precise);
    const auto f16 = tinit::cpu::two_sided_avx512(c10::kHalf, precise);
    std::printf("window %d two_sided%s: fp32 %.3f, bf16 %.3f, fp16 %.3f ns/elem\n", window, precise ? "_precise" : "",
                best_ns_per_elem([&] { f32(out32, words, n, &P); }, n),
                best_ns_per_elem([&] { bf16(out16, words, n, &P); }, n),
                best_ns_per_elem([&] { f16(out16, words, n, &P); }, n));
  }
  return 0;
}
