// Prototype, not the stream: the CPU cost of ndtri_mantissa.h's two-sided
// transform beside the shipped engines, in one process (mantissa_cpu.py
// builds and runs it; bench/bench_cpu_kernels.cpp is the pattern). Reads
// the windows' packed TruncNormalParams on stdin, one line of numbers each.
//
//   bench_mantissa_cpu check N SEED PATH   bits: every engine against its
//       portable code (tinit::two_sided_value / proto::two_sided_value) on N
//       words of stream 3; writes the prototype's portable fp32 values of
//       every window to PATH (raw, window after window) for the numpy check.
//   bench_mantissa_cpu time ROUNDS         rounds of interleaved timings
//       (today and the prototype in alternating order), one thread:
//       "chunk": the transform alone on a 1024-word chunk in L1, the best of
//       kTrials x kCalls calls, ns an element; "fill": a 2^24-element buffer
//       filled chunk by chunk (Philox words into L1, then the transform into
//       the buffer), the memset of the same buffer and the Philox words
//       alone, ns an element.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "cpu/isa.h"
#include "cpu/philox_x86.h"
#include "cpu/transform_avx2.h"
#include "cpu/transform_avx512.h"
#include "ndtri_mantissa.h"
#include "proto_cpu.h"

namespace {

using tinit::cpu::ChunkFn;
using Clock = std::chrono::steady_clock;
constexpr int kChunk = 1024;
constexpr int64_t kFill = int64_t(1) << 24;
constexpr uint64_t kSeed = 12345, kStream = 3;
volatile uint32_t g_sink = 0;

struct Engine {
  const char* isa;
  bool available;
  ChunkFn (*today)(c10::ScalarType, bool);
  ChunkFn (*proto)(c10::ScalarType, bool);
  void (*philox)(uint32_t*, uint64_t, int64_t, uint64_t, uint64_t);
};

std::vector<Engine> engines() {
  return {
      {"avx512", tinit::cpu::isa_supported(tinit::cpu::Isa::kAvx512), tinit::cpu::two_sided_avx512,
       tinit::proto::two_sided_mantissa_avx512, tinit::x86::philox_blocks_avx512},
      {"avx2", tinit::cpu::isa_supported(tinit::cpu::Isa::kAvx2), tinit::cpu::two_sided_avx2,
       tinit::proto::two_sided_mantissa_avx2, tinit::x86::philox_blocks_avx2},
  };
}

double seconds(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

template <class F>
double best_ns(F fn, int64_t elems) {
  constexpr int kCalls = 400, kTrials = 10;
  double best = 1e30;
  for (int t = 0; t < kTrials; ++t) {
    const auto t0 = Clock::now();
    for (int r = 0; r < kCalls; ++r) fn();
    best = std::min(best, seconds(t0) * 1e9 / kCalls / elems);
  }
  return best;
}

float portable(uint32_t w, const tinit::TruncNormalParams<float>& P, bool proto) {
  const bool precise = P.mode == tinit::kTwoSidedPrecise;
  if (proto) return precise ? tinit::proto::two_sided_precise_value(w, P) : tinit::proto::two_sided_value(w, P);
  return precise ? tinit::two_sided_precise_value(w, P) : tinit::two_sided_value(w, P);
}

// Mismatches of one engine entry (fp32 or bf16) against the portable values.
int64_t mismatches(ChunkFn fn, bool bf16, const std::vector<uint32_t>& w, const std::vector<float>& want,
                   const tinit::TruncNormalParams<float>& P) {
  const int64_t n = static_cast<int64_t>(w.size());
  std::vector<float> f32(n);
  std::vector<uint16_t> b16(n);
  fn(bf16 ? static_cast<void*>(b16.data()) : static_cast<void*>(f32.data()), w.data(), n, &P);
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    bad += bf16 ? b16[i] != tinit::float_to_bf16_bits(want[i])
                : tinit::float_as_bits(f32[i]) != tinit::float_as_bits(want[i]);
  }
  return bad;
}

int check(const std::vector<std::vector<double>>& windows, int64_t n, uint64_t seed, const char* path) {
  std::FILE* out = std::fopen(path, "wb");
  if (!out) return 2;
  for (size_t k = 0; k < windows.size(); ++k) {
    const auto P = tinit::TruncNormalParams<float>::from_packed(windows[k].data());
    const bool precise = P.mode == tinit::kTwoSidedPrecise;
    std::vector<uint32_t> w(n);
    for (int64_t b = 0; b < n / 4; ++b) tinit::philox_block(seed, kStream, b, w.data() + 4 * b);
    for (int variant = 0; variant < 2; ++variant) {
      std::vector<float> want(n);
      for (int64_t i = 0; i < n; ++i) want[i] = portable(w[i], P, variant == 1);
      if (variant == 1) std::fwrite(want.data(), sizeof(float), n, out);
      for (const Engine& e : engines()) {
        if (!e.available) continue;
        const auto of = variant ? e.proto : e.today;
        std::printf("check %zu %s %s fp32 %lld bf16 %lld\n", k, variant ? "mantissa" : "today", e.isa,
                    static_cast<long long>(mismatches(of(c10::kFloat, precise), false, w, want, P)),
                    static_cast<long long>(mismatches(of(c10::kBFloat16, precise), true, w, want, P)));
      }
    }
  }
  std::fclose(out);
  return 0;
}

// One round of the chunk timings, today's and the prototype's in `order`.
void chunk_round(const std::vector<std::vector<double>>& windows, int round) {
  alignas(64) static uint32_t words[kChunk];
  alignas(64) static float out[kChunk];
  for (const Engine& e : engines()) {
    if (!e.available) continue;
    e.philox(words, 77, kChunk / 32, kSeed, kStream);
    for (size_t k = 0; k < windows.size(); ++k) {
      const auto P = tinit::TruncNormalParams<float>::from_packed(windows[k].data());
      const bool precise = P.mode == tinit::kTwoSidedPrecise;
      for (const auto dtype : {c10::kFloat, c10::kBFloat16}) {
        const ChunkFn fns[2] = {e.today(dtype, precise), e.proto(dtype, precise)};
        double ns[2];
        for (int j = 0; j < 2; ++j) {
          const int v = (round + j) % 2;  // alternate which goes first
          ns[v] = best_ns([&] { fns[v](out, words, kChunk, &P); }, kChunk);
        }
        std::printf("chunk %zu %s %s %d %.4f %.4f\n", k, dtype == c10::kFloat ? "fp32" : "bf16", e.isa, round, ns[0],
                    ns[1]);
      }
    }
  }
}

double fill_ns(const Engine& e, ChunkFn fn, void* buf, size_t elem_bytes, const tinit::TruncNormalParams<float>& P) {
  alignas(64) static uint32_t words[kChunk];
  const auto t0 = Clock::now();
  for (int64_t i = 0; i < kFill; i += kChunk) {
    e.philox(words, static_cast<uint64_t>(i / 4), kChunk / 32, kSeed, kStream);
    fn(static_cast<char*>(buf) + i * elem_bytes, words, kChunk, &P);
  }
  return seconds(t0) * 1e9 / kFill;
}

// One round of the fill timings (the first two windows, the first ISA the CPU has).
void fill_round(const std::vector<std::vector<double>>& windows, int round, std::vector<float>& buf) {
  alignas(64) static uint32_t words[kChunk];
  for (const Engine& e : engines()) {
    if (!e.available) continue;
    for (size_t k = 0; k < std::min<size_t>(2, windows.size()); ++k) {
      const auto P = tinit::TruncNormalParams<float>::from_packed(windows[k].data());
      const bool precise = P.mode == tinit::kTwoSidedPrecise;
      for (const auto dtype : {c10::kFloat, c10::kBFloat16}) {
        const size_t bytes = dtype == c10::kFloat ? 4 : 2;
        const ChunkFn fns[2] = {e.today(dtype, precise), e.proto(dtype, precise)};
        double ns[2];
        for (int j = 0; j < 2; ++j) {
          const int v = (round + j) % 2;
          ns[v] = fill_ns(e, fns[v], buf.data(), bytes, P);
        }
        auto t0 = Clock::now();
        std::memset(buf.data(), round & 0xff, kFill * bytes);
        const double memset_ns = seconds(t0) * 1e9 / kFill;
        t0 = Clock::now();
        for (int64_t i = 0; i < kFill; i += kChunk) {
          e.philox(words, i / 4, kChunk / 32, kSeed, kStream);
          g_sink = g_sink + words[i % kChunk];  // the words are read: no call is dropped
        }
        const double philox_ns = seconds(t0) * 1e9 / kFill;
        std::printf("fill %zu %s %s %d %.4f %.4f %.4f %.4f\n", k, dtype == c10::kFloat ? "fp32" : "bf16", e.isa, round,
                    ns[0], ns[1], memset_ns, philox_ns);
      }
    }
    break;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s check N SEED PATH | time ROUNDS (windows on stdin)\n", argv[0]);
    return 2;
  }
  std::vector<std::vector<double>> windows;
  for (std::vector<double> packed(tinit::kParamCount); std::cin >> packed[0];) {
    for (int i = 1; i < tinit::kParamCount; ++i) std::cin >> packed[i];
    windows.push_back(packed);
  }
  if (std::string(argv[1]) == "check" && argc == 5) {
    return check(windows, std::atoll(argv[2]) / 32 * 32, std::strtoull(argv[3], nullptr, 10), argv[4]);
  }
  std::vector<float> buf(kFill);
  std::memset(buf.data(), 0, kFill * sizeof(float));  // pages faulted in before any timing
  for (int round = 0; round < std::atoi(argv[2]); ++round) {
    chunk_round(windows, round);
    fill_round(windows, round, buf);
    std::fflush(stdout);
  }
  return 0;
}
