// Torch-free driver of the CPU kernels for the portability check
// (portability_check.build): it is linked with the project's own CPU kernel
// sources (setup.py's CPU_KERNEL_SOURCES), built against the torch/headeronly stand-ins,
// cross-compiled and run under qemu-user, and its bytes are compared with the
// extension's.
//
// Input (a file named by the only argument, or stdin): one case a line,
//   seed stream offset numel dtype ftz p[0] .. p[kParamCount - 1]
// with dtype one of f32 bf16 f16 f64, ftz 0 or 1, and the packed
// tinit.params.TruncNormalParams record as C99 hex floats (exact). Output
// (stdout): the uint32 0x01020304 in the host's byte order (so the reader
// knows it), then each case's numel values in the host's byte order.
//
// Per element it does what the extension's fill (trunc_normal_cpu) does:
// gather_words over the contiguous RunMap, a kChunk at a time, then
// ChunkTransform::run of make_chunk_transform. One thread: the values do not
// depend on the chunking (stream_words.h). With ftz = 1 it sets FTZ/DAZ
// (MXCSR on x86, FPCR.FZ on aarch64) before the fill and restores it after,
// as a caller of the extension may have; where neither exists it exits 2.
#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "denormal_guard.h"
#include "stream_words.h"
#include "transform_kernels.h"
#include "tinit/transform.h"

namespace {

using tinit::cpu::ChunkTransform;
using tinit::cpu::RunMap;

bool ftz_supported() {
#if defined(__x86_64__) || defined(__aarch64__)
  return true;
#else
  return false;
#endif
}

// Sets FTZ and DAZ (x86: MXCSR bits 15 and 6; aarch64: FPCR.FZ, bit 24, which
// flushes both inputs and results); returns the previous control word.
uint64_t set_ftz() {
#if defined(__x86_64__)
  const unsigned old = _mm_getcsr();
  _mm_setcsr(old | 0x8040u);
  return old;
#elif defined(__aarch64__)
  uint64_t old;
  __asm__ __volatile__("mrs %0, fpcr" : "=r"(old));
  const uint64_t set = old | (uint64_t{1} << 24);
  __asm__ __volatile__("msr fpcr, %0" : : "r"(set));
  return old;
#else
  return 0;
#endif
}

void restore_ftz(uint64_t old) {
#if defined(__x86_64__)
  _mm_setcsr(static_cast<unsigned>(old));
#elif defined(__aarch64__)
  __asm__ __volatile__("msr fpcr, %0" : : "r"(old));
#else
  (void)old;
#endif
}

// trunc_normal_cpu's fill for one range [0, numel).
void fill(char* base, int64_t numel, uint64_t seed, uint64_t stream, uint64_t offset, const ChunkTransform& tf) {
  const RunMap map = RunMap::contiguous(offset, numel);
  alignas(64) static uint32_t storage[tinit::cpu::kWordBuffer];
  alignas(64) static uint32_t scratch[tinit::cpu::kScratch];
  for (int64_t j = 0; j < numel; j += tinit::cpu::kChunk) {
    const int64_t m = std::min(tinit::cpu::kChunk, numel - j);
    char* out = base + j * tf.elem_size;
    uint32_t* buf = storage + tinit::cpu::word_shift_from(storage, out);
    tf.run(out, tinit::cpu::gather_words(map, j, m, seed, stream, buf, scratch), m);
  }
}

bool parse_dtype(const char* name, torch::headeronly::ScalarType& dtype) {
  if (std::strcmp(name, "f32") == 0) {
    dtype = torch::headeronly::ScalarType::Float;
  } else if (std::strcmp(name, "bf16") == 0) {
    dtype = torch::headeronly::ScalarType::BFloat16;
  } else if (std::strcmp(name, "f16") == 0) {
    dtype = torch::headeronly::ScalarType::Half;
  } else if (std::strcmp(name, "f64") == 0) {
    dtype = torch::headeronly::ScalarType::Double;
  } else {
    return false;
  }
  return true;
}

// One case line; false (with a message) when it is malformed.
bool run_case(const std::string& line, int number, std::vector<char>& out) {
  char* pos = const_cast<char*>(line.c_str());
  char* end = nullptr;
  const uint64_t seed = std::strtoull(pos, &end, 10);
  const uint64_t stream = std::strtoull(end, &end, 10);
  const uint64_t offset = std::strtoull(end, &end, 10);
  const long long numel = std::strtoll(end, &end, 10);
  char dtype_name[8] = {0};
  int ftz = -1, used = 0;
  if (std::sscanf(end, " %7s %d%n", dtype_name, &ftz, &used) != 2) {
    std::fprintf(stderr, "portability_harness: case %d: expected 'seed stream offset numel dtype ftz'\n", number);
    return false;
  }
  end += used;
  torch::headeronly::ScalarType dtype;
  if (!parse_dtype(dtype_name, dtype) || numel < 0 || (ftz != 0 && ftz != 1)) {
    std::fprintf(stderr, "portability_harness: case %d: bad dtype '%s', numel or ftz\n", number, dtype_name);
    return false;
  }
  double packed[tinit::kParamCount];
  for (double& p : packed) {
    char* next = nullptr;
    p = std::strtod(end, &next);
    if (next == end) {
      std::fprintf(stderr, "portability_harness: case %d: expected %d record values\n", number, tinit::kParamCount);
      return false;
    }
    end = next;
  }
  if (ftz == 1 && !ftz_supported()) {
    std::fprintf(stderr, "portability_harness: case %d: no FTZ/DAZ control on this target\n", number);
    std::exit(2);
  }
  // The caller's FTZ/DAZ is set before the op, as torch.set_flush_denormal sets it; the op clears
  // it for its own work (DenormalGuard, as trunc_normal_cpu and each of its worker chunks do).
  const uint64_t saved = ftz == 1 ? set_ftz() : 0;
  {
    const tinit::cpu::DenormalGuard gradual_underflow;
    const ChunkTransform tf = tinit::cpu::make_chunk_transform(dtype, packed, "portability_harness");
    out.assign(static_cast<size_t>(numel) * tf.elem_size, 0);
    fill(out.data(), numel, seed, stream, offset, tf);
  }
  if (ftz == 1) restore_ftz(saved);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::FILE* in = argc == 2 ? std::fopen(argv[1], "r") : stdin;
  if (argc > 2 || in == nullptr) {
    std::fprintf(stderr, "usage: portability_harness [CASES]  (cases on stdin without CASES)\n");
    return 1;
  }
  const uint32_t magic = 0x01020304u;
  std::fwrite(&magic, sizeof(magic), 1, stdout);
  std::string line;
  std::vector<char> out;
  int number = 0;
  for (int c = std::fgetc(in);; c = std::fgetc(in)) {
    if (c != '\n' && c != EOF) {
      line.push_back(static_cast<char>(c));
      continue;
    }
    if (line.find_first_not_of(" \t\r") != std::string::npos) {
      try {
        if (!run_case(line, number, out)) return 1;
      } catch (const std::exception& err) {
        std::fprintf(stderr, "portability_harness: case %d: %s\n", number, err.what());
        return 1;
      }
      std::fwrite(out.data(), 1, out.size(), stdout);
      ++number;
    }
    line.clear();
    if (c == EOF) break;
  }
  return std::fflush(stdout) == 0 ? 0 : 1;
}
