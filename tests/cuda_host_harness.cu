// Runs the per-thread code of the single-tensor kernels (trunc_normal_kernel,
// philox_kernel) on the host, as an emulated grid-stride launch of the
// FillLaunch that launch_fill would launch, so that a machine without a GPU
// can check the kernel's indexing (offset % 4, edge blocks, vector or scalar
// stores, compute-only) against the CPU op. Built and driven by
// tests/test_cuda_compile.py; the device arithmetic itself is checked on a GPU
// by tests/test_gpu.py.
//
//   cuda_host_harness values|words|compute DTYPE NUMEL SEED STREAM OFFSET SHIFT THREADS [kParamCount constants]
//
// DTYPE: 0 float32, 1 float64, 2 bfloat16, 3 float16 (words: ignored). SHIFT is the output's element
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

// The kernel's body for every thread of an emulated grid of `threads`,
// from the arguments launch_fill passes it.
template <typename out_t, int Mode>
void emulate(const tinit::cuda::FillLaunch<out_t>& p, int64_t threads) {
  using namespace tinit::cuda;
  for (int64_t t = threads - 1; t >= 0; --t) {  // any thread order gives the same result
    if constexpr (is_words<out_t>) {
      philox_fill_blocks(p.out, p.numel, tinit::philox_keys(p.seed), p.stream, p.offset, vector_ok(p.out, p.offset), 0,
                         block_count(p.numel, p.offset), t, threads);
    } else {
      fill_blocks<out_t, Mode>(p.out, p.numel, tinit::philox_keys(p.seed), p.stream, p.offset, p.params,
                               vector_ok(p.out, p.offset), p.compute_only, 0, block_count(p.numel, p.offset), t,
                               threads);
    }
  }
}

template <typename out_t>
void run(unsigned char* out, int64_t numel, uint64_t seed, uint64_t stream, uint64_t offset, const double* packed,
         int64_t threads, bool compute_only) {
  using tinit::cuda::compute_t;
  const tinit::cuda::FillLaunch<out_t> p{reinterpret_cast<out_t*>(out),
                                         numel,
                                         seed,
                                         stream,
                                         offset,
                                         tinit::TruncNormalParams<compute_t<out_t>>::from_packed(packed),
                                         compute_only};
  switch (tinit::kernel_mode(p.params)) {  // the choice of launch_fill
    case tinit::kUniform:
      return emulate<out_t, tinit::kUniform>(p, threads);
    case tinit::kTwoSided:
      return emulate<out_t, tinit::kTwoSided>(p, threads);
    case tinit::kTwoSidedUnclamped:
      return emulate<out_t, tinit::kTwoSidedUnclamped>(p, threads);
    case tinit::kTwoSidedPrecise:
      return emulate<out_t, tinit::kTwoSidedPrecise>(p, threads);
    default:
      return emulate<out_t, tinit::kTail>(p, threads);
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
  double packed[tinit::kParamCount] = {};
  if (kind != "words") {
    if (argc != 9 + tinit::kParamCount) return 1;
    for (int i = 0; i < tinit::kParamCount; ++i) packed[i] = std::strtod(argv[9 + i], nullptr);
  }
  const size_t size = kind == "words" ? 4 : (dtype == 0 ? 4 : dtype == 1 ? 8 : 2);
  // 64-byte aligned storage; the output starts `shift` elements in, after a guard.
  std::vector<double> storage((size * (numel + shift + 2 * kGuard)) / sizeof(double) + 16);
  auto* base = reinterpret_cast<unsigned char*>(storage.data());
  base += (64 - reinterpret_cast<uintptr_t>(base) % 64) % 64;
  unsigned char* out = base + size * (kGuard + shift);
  const size_t total = size * (numel + shift + 2 * kGuard);
  std::memset(base, kPoison, total);
  const bool compute_only = kind == "compute";
  if (kind == "words") {
    run<uint32_t>(out, numel, seed, stream, offset, packed, threads, false);
  } else {
    switch (dtype) {
      case 0:
        run<float>(out, numel, seed, stream, offset, packed, threads, compute_only);
        break;
      case 1:
        run<double>(out, numel, seed, stream, offset, packed, threads, compute_only);
        break;
      case 2:
        run<__nv_bfloat16>(out, numel, seed, stream, offset, packed, threads, compute_only);
        break;
      case 3:
        run<__half>(out, numel, seed, stream, offset, packed, threads, compute_only);
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
