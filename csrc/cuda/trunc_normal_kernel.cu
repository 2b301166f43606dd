// CUDA kernels of tinit::trunc_normal_ and tinit::philox_.
//
// Free of torch headers, so any nvcc compiles it (test_kernel_compiles_for_sm90_and_sm80);
// the torch binding is trunc_normal.cpp. Build with --fmad=false: the shared
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

#include "trunc_normal_device.cuh"

namespace tinit {
namespace cuda {
namespace {

constexpr int kMaxDevices = 64;

// Minimum resident blocks per SM for __launch_bounds__. The fp64 tail
// kernel, at ptxas's own choice of 48 registers, spills two loop-invariant
// words to the stack; asking for four blocks (up to 64 registers) keeps them
// in registers (62). 0 leaves every other kernel to ptxas's choice: an
// explicit 1 makes ptxas take up to twice the registers (and half the
// resident warps) for one or two fewer instructions an element.
template <typename out_t, int Mode>
constexpr int kMinBlocks = sizeof(out_t) == 8 && Mode == kTail ? 4 : 0;

template <typename out_t, int Mode>
__global__ void __launch_bounds__(kThreads, (kMinBlocks<out_t, Mode>))
    trunc_normal_kernel(out_t* __restrict__ out, int64_t numel, const PhiloxKeys keys, uint64_t stream, uint64_t offset,
                        const TruncNormalParams<typename Out<out_t>::T> P, bool vec_ok, bool compute_only) {
  using T = typename Out<out_t>::T;
  const uint32_t sink = fill_blocks<out_t, Mode>(
      out, numel, keys, stream, offset, P, vec_ok, compute_only, 0, block_count(numel, offset),
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

// Blocks of `kernel` resident on the current device at once (the grid-stride
// loop needs no more), cached per kernel and device: the occupancy query is
// host-only, so it is also safe while a CUDA graph is being captured.
template <typename Kernel>
cudaError_t grid_size(Kernel kernel, std::atomic<int>* cache, int64_t blocks, int* grid) {
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  int resident = device < kMaxDevices ? cache[device].load(std::memory_order_relaxed) : 0;
  if (resident <= 0) {
    int sms = 0, per_sm = 0;
    err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    if (err != cudaSuccess) return err;
    err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, 0);
    if (err != cudaSuccess) return err;
    resident = sms * (per_sm > 0 ? per_sm : 1);
    if (device < kMaxDevices) cache[device].store(resident, std::memory_order_relaxed);
  }
  const int64_t needed = (blocks + kThreads - 1) / kThreads;
  *grid = static_cast<int>(needed < resident ? needed : resident);
  return cudaSuccess;
}

template <typename out_t, int Mode>
cudaError_t launch_mode(out_t* out, int64_t numel, uint64_t seed, uint64_t stream, uint64_t offset,
                        const double* packed, bool compute_only, cudaStream_t cuda_stream) {
  using T = typename Out<out_t>::T;
  static std::atomic<int> cache[kMaxDevices];
  const auto kernel = &trunc_normal_kernel<out_t, Mode>;
  const int64_t blocks = block_count(numel, offset);
  int grid = 0;
  const cudaError_t err = grid_size(kernel, cache, blocks, &grid);
  if (err != cudaSuccess) return err;
  kernel<<<grid, kThreads, 0, cuda_stream>>>(out, numel, philox_keys(seed), stream, offset,
                                             TruncNormalParams<T>::from_packed(packed), vector_ok(out, offset),
                                             compute_only);
  return cudaGetLastError();
}

template <typename out_t>
cudaError_t launch(void* data, int64_t numel, uint64_t seed, uint64_t stream, uint64_t offset, const double* packed,
                   bool compute_only, cudaStream_t cuda_stream) {
  auto* out = static_cast<out_t*>(data);
  switch (static_cast<int>(packed[tinit::kPackedMode])) {
    case kUniform:
      return launch_mode<out_t, kUniform>(out, numel, seed, stream, offset, packed, compute_only, cuda_stream);
    case kTwoSided:
      return launch_mode<out_t, kTwoSided>(out, numel, seed, stream, offset, packed, compute_only, cuda_stream);
    case kTwoSidedPrecise:
      return launch_mode<out_t, kTwoSidedPrecise>(out, numel, seed, stream, offset, packed, compute_only, cuda_stream);
    case kTail:
      return launch_mode<out_t, kTail>(out, numel, seed, stream, offset, packed, compute_only, cuda_stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace
}  // namespace cuda
}  // namespace tinit

extern "C" cudaError_t tinit_trunc_normal_cuda(void* data, int64_t numel, TinitDtype dtype, uint64_t seed,
                                               uint64_t stream, uint64_t offset, const TinitTransformParams* params,
                                               unsigned flags, cudaStream_t cuda_stream) {
  using namespace tinit::cuda;
  if (params == nullptr || !valid_range(data, numel, offset) || !tinit::valid_params(params->packed)) {
    return cudaErrorInvalidValue;
  }
  if (numel == 0) return cudaSuccess;
  const bool compute_only = (flags & TINIT_FLAG_COMPUTE_ONLY) != 0;
  const double* packed = params->packed;
  switch (dtype) {
    case TINIT_FLOAT32:
      return launch<float>(data, numel, seed, stream, offset, packed, compute_only, cuda_stream);
    case TINIT_FLOAT64:
      return launch<double>(data, numel, seed, stream, offset, packed, compute_only, cuda_stream);
    case TINIT_BFLOAT16:
      return launch<__nv_bfloat16>(data, numel, seed, stream, offset, packed, compute_only, cuda_stream);
    case TINIT_FLOAT16:
      return launch<__half>(data, numel, seed, stream, offset, packed, compute_only, cuda_stream);
    default:
      return cudaErrorInvalidValue;
  }
}

extern "C" cudaError_t tinit_philox_cuda(uint32_t* data, int64_t numel, uint64_t seed, uint64_t stream, uint64_t offset,
                                         cudaStream_t cuda_stream) {
  using namespace tinit::cuda;
  if (!valid_range(data, numel, offset)) return cudaErrorInvalidValue;
  if (numel == 0) return cudaSuccess;
  static std::atomic<int> cache[kMaxDevices];
  const int64_t blocks = block_count(numel, offset);
  int grid = 0;
  const cudaError_t err = grid_size(&philox_kernel, cache, blocks, &grid);
  if (err != cudaSuccess) return err;
  philox_kernel<<<grid, kThreads, 0, cuda_stream>>>(data, numel, tinit::philox_keys(seed), stream, offset,
                                                    vector_ok(data, offset));
  return cudaGetLastError();
}
