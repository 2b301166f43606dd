// CUDA kernels of tinit::trunc_normal_ and tinit::philox_, and launch_fill
// (launch.h) for FillLaunch of every element type.
// Its other backends, callers, tests and benchmarks: CONTRIBUTING.md, "Where each op lives".
//
// Free of torch headers, so any nvcc compiles it (test_kernel_compiles_for_sm90_and_sm80);
// the torch bindings are in bindings.cpp. Build with --fmad=false: the shared
// headers spell every fused step as fma_rn, so the device computes the same
// float bits as the CPU kernel (trunc_normal_cpu), which instantiates
// the same trunc_normal_value<T, Mode, A>.
//
// Work split: thread unit g is one Philox counter block of the tensor (the
// indexing and stores live in trunc_normal_device.cuh, shared with the grouped
// kernels). Values depend on the element's stream index only, never on the
// thread or grid, so they are the same for any launch shape, any GPU and the
// CPU. Grid-stride loop, 64-bit indices throughout, one wave of resident
// blocks at most.
#include <atomic>
#include <cstdint>
#include <type_traits>

#include "trunc_normal_device.cuh"

namespace tinit {
namespace cuda {
namespace {

// Minimum resident blocks per SM for __launch_bounds__: two (at most 128
// registers, 16 warps an SM, 4 a scheduler), so that the round keys
// (keys_in_registers) and the loop's values stay in registers: the loop is
// issue-bound (its only loads are ndtri rows that stay in L1, its stores need
// no wait, and each lane carries four independent values a trip), so four
// warps a scheduler cover its latencies, and every instruction saved is
// throughput. The fp64 tail kernel asks for four (up to 64 registers): at
// ptxas's own choice of 48 it spilled two loop-invariant words.
template <typename out_t, int Mode>
constexpr int kMinBlocks = sizeof(out_t) == 8 && Mode == kTail ? 4 : 2;

template <typename out_t, int Mode>
__global__ void __launch_bounds__(kThreads, (kMinBlocks<out_t, Mode>))
    trunc_normal_kernel(out_t* __restrict__ out, int64_t numel, const PhiloxKeys keys, uint64_t stream, uint64_t offset,
                        const TruncNormalParams<typename Out<out_t>::T> P, bool vec_ok, bool compute_only) {
  using T = typename Out<out_t>::T;
  const uint32_t sink = fill_blocks<out_t, Mode>(
      out, numel, keys_in_registers(keys), stream, offset, P, vec_ok, compute_only, 0, block_count(numel, offset),
      static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x, static_cast<int64_t>(gridDim.x) * blockDim.x);
  // Compute-only runs keep every value alive through this (practically never
  // taken) store, so the compiler cannot drop the arithmetic feeding it.
  if (compute_only && sink == 0x2545F491u) out[0] = Out<out_t>::cvt(static_cast<T>(P.mean));
}

__global__ void __launch_bounds__(kThreads)
    philox_kernel(uint32_t* __restrict__ out, int64_t numel, const PhiloxKeys keys, uint64_t stream, uint64_t offset,
                  bool vec_ok) {
  philox_fill_blocks(out, numel, keys, stream, offset, vec_ok, 0, block_count(numel, offset),
                     static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x,
                     static_cast<int64_t>(gridDim.x) * blockDim.x);
}

template <typename out_t, int Mode>
cudaError_t launch_mode(const FillLaunch<out_t>& p, cudaStream_t cuda_stream) {
  static std::atomic<int> cache[kMaxDevices];
  const auto kernel = &trunc_normal_kernel<out_t, Mode>;
  int grid = 0;
  const cudaError_t err = grid_size(kernel, cache, (block_count(p.numel, p.offset) + kThreads - 1) / kThreads, &grid);
  if (err != cudaSuccess) return err;
  kernel<<<grid, kThreads, 0, cuda_stream>>>(p.out, p.numel, philox_keys(p.seed), p.stream, p.offset, p.params,
                                             vector_ok(p.out, p.offset), p.compute_only);
  return cudaSuccess;
}

cudaError_t launch_words(const FillLaunch<uint32_t>& p, cudaStream_t cuda_stream) {
  static std::atomic<int> cache[kMaxDevices];
  int grid = 0;
  const cudaError_t err =
      grid_size(&philox_kernel, cache, (block_count(p.numel, p.offset) + kThreads - 1) / kThreads, &grid);
  if (err != cudaSuccess) return err;
  philox_kernel<<<grid, kThreads, 0, cuda_stream>>>(p.out, p.numel, philox_keys(p.seed), p.stream, p.offset,
                                                    vector_ok(p.out, p.offset));
  return cudaSuccess;
}

}  // namespace

template <typename out_t>
cudaError_t launch_fill(const FillLaunch<out_t>& launch, cudaStream_t cuda_stream) {
  if (launch.numel == 0) return cudaSuccess;
  if constexpr (is_words<out_t>) {
    return launch_words(launch, cuda_stream);
  } else {
    switch (kernel_mode(launch.params)) {
      case kUniform:
        return launch_mode<out_t, kUniform>(launch, cuda_stream);
      case kTwoSided:
        return launch_mode<out_t, kTwoSided>(launch, cuda_stream);
      case kTwoSidedUnclamped:  // set for float compute only
        if constexpr (std::is_same<compute_t<out_t>, float>::value) {
          return launch_mode<out_t, kTwoSidedUnclamped>(launch, cuda_stream);
        }
        return cudaErrorInvalidValue;
      case kTwoSidedPrecise:
        return launch_mode<out_t, kTwoSidedPrecise>(launch, cuda_stream);
      case kTail:
        return launch_mode<out_t, kTail>(launch, cuda_stream);
      default:
        return cudaErrorInvalidValue;
    }
  }
}

template cudaError_t launch_fill<float>(const FillLaunch<float>&, cudaStream_t);
template cudaError_t launch_fill<double>(const FillLaunch<double>&, cudaStream_t);
template cudaError_t launch_fill<__nv_bfloat16>(const FillLaunch<__nv_bfloat16>&, cudaStream_t);
template cudaError_t launch_fill<__half>(const FillLaunch<__half>&, cudaStream_t);
template cudaError_t launch_fill<uint32_t>(const FillLaunch<uint32_t>&, cudaStream_t);

}  // namespace cuda
}  // namespace tinit
