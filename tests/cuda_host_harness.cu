// Runs the per-thread code of csrc/cuda/trunc_normal_kernel.cu on the host,
// as an emulated grid-stride launch, so that a machine without a GPU can check
// the kernel's indexing (offset % 4, edge blocks, vector or scalar stores,
// compute-only) against the CPU op. Built and driven by
// tests/test_cuda_compile.py; the device arithmetic itself is checked on a GPU
// by tests/test_gpu.py.
//
//   cuda_host_harness values|words|compute DTYPE NUMEL SEED STREAM OFFSET SHIFT THREADS [P0..P11]
//
// DTYPE is a TinitDtype number (words: ignored). SHIFT is the output's element
// offset from a 64-byte boundary (misaligned vector paths), THREADS the
// emulated grid width. Writes the NUMEL output elements to stdout (raw bytes);
// exits 2 if a guard element around the output changed, 1 on bad arguments.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "trunc_normal_kernel.cu"

namespace {

constexpr int kGuard = 16;
constexpr unsigned char kPoison = 0xA5;

template <typename out_t, int Mode>
void run_values(unsigned char* out, int64_t numel, uint64_t seed, uint64_t stream, uint64_t offset,
                const double* packed, int64_t threads, bool compute_only) {
  using namespace tinit::cuda;
  using T = typename Out<out_t>::T;
  auto* typed = reinterpret_cast<out_t*>(out);
  const auto P = tinit::TruncNormalParams<T>::from_packed(packed);
  for (int64_t t = threads - 1; t >= 0; --t) {  // any thread order gives the same result
    fill_blocks<out_t, Mode>(typed, numel, tinit::philox_keys(seed), stream, offset, P, vector_ok(typed, offset),
                             compute_only, 0, block_count(numel, offset), t, threads);
  }
}

template <typename out_t>
void run_dtype(unsigned char* out, int64_t numel, uint64_t seed, uint64_t stream, uint64_t offset, const double* packed,
               int64_t threads, bool compute_only) {
  switch (static_cast<int>(packed[tinit::kPackedMode])) {
    case tinit::kUniform:
      return run_values<out_t, tinit::kUniform>(out, numel, seed, stream, offset, packed, threads, compute_only);
    case tinit::kTwoSided:
      return run_values<out_t, tinit::kTwoSided>(out, numel, seed, stream, offset, packed, threads, compute_only);
    case tinit::kTwoSidedPrecise:
      return run_values<out_t, tinit::kTwoSidedPrecise>(out, numel, seed, stream, offset, packed, threads,
                                                        compute_only);
    default:
      return run_values<out_t, tinit::kTail>(out, numel, seed, stream, offset, packed, threads, compute_only);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 9) return 1;
  const std::string kind = argv[1];
  const int dtype = std::atoi(argv[2]);
  const int64_t numel = std::strtoll(argv[3], nullptr, 10);
  const uint64_t seed = std::strtoull(argv[4], nullptr, 10);
  const uint64_t stream = std::strtoull(argv[5], nullptr, 10);
  const uint64_t offset = std::strtoull(argv[6], nullptr, 10);
  const int64_t shift = std::strtoll(argv[7], nullptr, 10);
  const int64_t threads = std::strtoll(argv[8], nullptr, 10);
  double packed[TINIT_PARAM_COUNT] = {};
  if (kind != "words") {
    if (argc != 9 + TINIT_PARAM_COUNT) return 1;
    for (int i = 0; i < TINIT_PARAM_COUNT; ++i) packed[i] = std::strtod(argv[9 + i], nullptr);
  }
  const size_t size = kind == "words" ? 4 : (dtype == TINIT_FLOAT32 ? 4 : dtype == TINIT_FLOAT64 ? 8 : 2);
  // 64-byte aligned storage; the output starts `shift` elements in, after a guard.
  std::vector<double> storage((size * (numel + shift + 2 * kGuard)) / sizeof(double) + 16);
  auto* base = reinterpret_cast<unsigned char*>(storage.data());
  base += (64 - reinterpret_cast<uintptr_t>(base) % 64) % 64;
  unsigned char* out = base + size * (kGuard + shift);
  const size_t total = size * (numel + shift + 2 * kGuard);
  std::memset(base, kPoison, total);
  if (kind == "words") {
    auto* words = reinterpret_cast<uint32_t*>(out);
    for (int64_t t = 0; t < threads; ++t) {
      tinit::cuda::philox_fill_blocks(words, numel, tinit::philox_keys(seed), stream, offset,
                                      tinit::cuda::vector_ok(words, offset), 0, tinit::cuda::block_count(numel, offset),
                                      t, threads);
    }
  } else {
    const bool compute_only = kind == "compute";
    switch (dtype) {
      case TINIT_FLOAT32:
        run_dtype<float>(out, numel, seed, stream, offset, packed, threads, compute_only);
        break;
      case TINIT_FLOAT64:
        run_dtype<double>(out, numel, seed, stream, offset, packed, threads, compute_only);
        break;
      case TINIT_BFLOAT16:
        run_dtype<__nv_bfloat16>(out, numel, seed, stream, offset, packed, threads, compute_only);
        break;
      case TINIT_FLOAT16:
        run_dtype<__half>(out, numel, seed, stream, offset, packed, threads, compute_only);
        break;
      default:
        return 1;
    }
  }
  for (size_t i = 0; i < total; ++i) {
    const bool inside = base + i >= out && base + i < out + size * numel;
    if (!inside && base[i] != kPoison) return 2;
  }
  std::fwrite(out, size, static_cast<size_t>(numel), stdout);
  return 0;
}
