// CUDA implementations of tinit::trunc_normal_, philox_, trunc_normal_grouped_,
// trunc_normal_runs_, philox_runs_ and tinit_bench::trunc_normal_compute_only_
// (schemas in TORCH_LIBRARY(tinit, m) and TORCH_LIBRARY(tinit_bench, m)).
// Its other backends, callers, tests and benchmarks: CONTRIBUTING.md, "Where each op lives".
//
// Each op checks its arguments (the checks every binding shares, tinit::Where) before anything is written, picks
// the kernels' element type with AT_DISPATCH_*, fills the launch struct of
// launch.h and calls its launcher under a device guard on the current
// stream; every launch is checked (C10_CUDA_KERNEL_LAUNCH_CHECK). Nothing
// synchronises the host, so a fill can be captured in a CUDA graph.
//
// The grouped and runs ops turn a model's thousands of tensors, or a
// row-parallel shard's thousands of rows, into the outputs of one table
// (GroupPlan), packed in pinned host memory, copied on the current stream and
// walked by one launch per element type: the caching host allocator keeps the
// pinned buffer until the copy has run, and the device copy is freed in
// stream order. Captured in a CUDA graph, the copy reads the pinned buffer at
// every replay: kHostCapturePools says whether torch keeps it for the graph.
#include "tinit/fp_contract.h"
// (first: contraction off)

#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>
#include <torch/version.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 11)
#include <ATen/core/CachingHostAllocator.h>
#define TINIT_HOST_CAPTURE_POOLS 1
#else
#define TINIT_HOST_CAPTURE_POOLS 0
#endif

#include "../checks.h"
#include "launch.h"

namespace tinit {
namespace cuda {
namespace {

// The kernels' element type for an ATen scalar type: the same bits.
template <typename scalar_t>
struct DeviceType {
  using type = scalar_t;
};
template <>
struct DeviceType<c10::BFloat16> {
  using type = __nv_bfloat16;
};
template <>
struct DeviceType<c10::Half> {
  using type = __half;
};
template <typename scalar_t>
using device_t = typename DeviceType<scalar_t>::type;
static_assert(sizeof(c10::BFloat16) == sizeof(__nv_bfloat16) && sizeof(c10::Half) == sizeof(__half),
              "ATen's 16-bit floats must have the layout of CUDA's");

// The four dtypes of check_dtype; scalar_t is the ATen type inside.
#define TINIT_DISPATCH_DTYPES(TYPE, NAME, ...) \
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, TYPE, NAME, __VA_ARGS__)

uint64_t bits(int64_t x) { return static_cast<uint64_t>(x); }

cudaStream_t current_stream(c10::Device device) { return c10::cuda::getCurrentCUDAStream(device.index()).stream(); }

template <typename out_t>
void run_fill(const at::Tensor& self, const FillLaunch<out_t>& launch) {
  const c10::cuda::CUDAGuard guard(self.device());
  C10_CUDA_CHECK(launch_fill(launch, current_stream(self.device())));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename out_t>
FillLaunch<out_t> fill_launch(const at::Tensor& self, int64_t seed, int64_t stream, int64_t offset,
                              const double* packed, bool compute_only) {
  return {static_cast<out_t*>(self.data_ptr()),
          self.numel(),
          bits(seed),
          bits(stream),
          bits(offset),
          TruncNormalParams<compute_t<out_t>>::from_packed(packed),
          compute_only};
}

void fill(const at::Tensor& self, int64_t seed, int64_t stream, int64_t offset, at::ArrayRef<double> transform,
          bool compute_only, const char* op) {
  const Where where{op};
  check_target(self, c10::DeviceType::CUDA, where);
  check_transform(transform, where);
  check_offset(offset, self.numel(), where);
  check_dtype(self, where);
  if (self.numel() == 0) return;
  TINIT_DISPATCH_DTYPES(self.scalar_type(), "tinit::trunc_normal_", [&] {
    using out_t = device_t<scalar_t>;
    run_fill(self, fill_launch<out_t>(self, seed, stream, offset, transform.data(), compute_only));
  });
}

void trunc_normal_cuda(at::Tensor self, int64_t seed, int64_t stream, int64_t offset, at::ArrayRef<double> transform) {
  fill(self, seed, stream, offset, transform, false, "tinit::trunc_normal_");
}

void trunc_normal_compute_only_cuda(at::Tensor self, int64_t seed, int64_t stream, int64_t offset,
                                    at::ArrayRef<double> transform) {
  fill(self, seed, stream, offset, transform, true, "tinit_bench::trunc_normal_compute_only_");
}

void philox_cuda(at::Tensor self, int64_t seed, int64_t stream, int64_t offset) {
  const char* op = "tinit::philox_";
  const Where where{op};
  check_target(self, c10::DeviceType::CUDA, where);
  check_words(self, where);
  check_offset(offset, self.numel(), where);
  if (self.numel() == 0) return;
  run_fill<uint32_t>(self, {reinterpret_cast<uint32_t*>(self.data_ptr<int32_t>()),
                            self.numel(),
                            bits(seed),
                            bits(stream),
                            bits(offset),
                            {},
                            false});
}

// ------------------------------------------------------------ grouped, runs

// Whether a pinned table allocated during a CUDA-graph capture stays the
// graph's. From torch 2.11 on, CUDAGraph::capture_begin routes the caching
// host allocator's allocations on the capturing stream to the graph's private
// pool (HostAllocator::begin_allocate_to_pool), and
// CachingHostAllocatorImpl::free never recycles a block allocated during a
// capture once a copy recorded an event on it (copy_kernel_cuda does, for a
// non-blocking copy from pinned memory). torch 2.10's allocator returns the
// block to its free list, so a later call could overwrite what a replay
// copies: launch_plan refuses to be captured there.
constexpr bool kHostCapturePools = TINIT_HOST_CAPTURE_POOLS;
#if TINIT_HOST_CAPTURE_POOLS
template <typename Allocator, typename = void>
struct HasCapturePools : std::false_type {};
template <typename Allocator>
struct HasCapturePools<Allocator, std::void_t<decltype(&Allocator::begin_allocate_to_pool)>> : std::true_type {};
static_assert(HasCapturePools<at::HostAllocator>::value,
              "this torch's HostAllocator has no begin_allocate_to_pool: see kHostCapturePools");
#endif

void check_capture(c10::Device device, const char* op) {
  if (kHostCapturePools) return;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  C10_CUDA_CHECK(cudaStreamIsCapturing(current_stream(device), &status));
  TORCH_CHECK(status == cudaStreamCaptureStatusNone, op, ": cannot be captured in a CUDA graph with torch ",
              TORCH_VERSION,
              ": its caching host allocator may recycle the pinned table the graph copies at replay (torch >= 2.11 "
              "keeps it); fill outside the capture, or build tinit against a newer torch");
}

void check_built(cudaError_t err, const char* op) {
  TORCH_CHECK(err == cudaSuccess, op, ": the launch table was refused (", cudaGetErrorString(err),
              ") after the arguments passed their checks");
}

// Packs, copies and launches `plan` on `device`'s current stream (the caller
// holds a guard for it).
void launch_plan(GroupPlan& plan, uint64_t seed, c10::Device device, const char* op) {
  if (plan.empty()) return;
  check_capture(device, op);
  const size_t layout = plan.layout();
  check_built(layout > 0 ? cudaSuccess : cudaErrorInvalidValue, op);
  const auto bytes = static_cast<int64_t>(layout);
  at::Tensor host = at::empty({bytes}, at::TensorOptions().dtype(at::kByte).pinned_memory(true));
  check_built(plan.pack(host.data_ptr()), op);
  at::Tensor table = at::empty({bytes}, at::TensorOptions().dtype(at::kByte).device(device));
  table.copy_(host, /*non_blocking=*/true);
  const cudaStream_t stream = current_stream(device);
  const auto* base = static_cast<const char*>(table.const_data_ptr());
  plan.for_each([&](const auto& group) {
    if (group.empty()) return;
    C10_CUDA_CHECK(launch_grouped(group, base + group.table_offset, seed, stream));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

void trunc_normal_grouped_cuda(at::TensorList tensors, int64_t seed, at::IntArrayRef streams, at::IntArrayRef offsets,
                               at::ArrayRef<double> transforms) {
  const char* op = "tinit::trunc_normal_grouped_";
  const auto n = static_cast<int64_t>(tensors.size());
  check_grouped_lists(n, streams, offsets, transforms, op);
  if (n == 0) return;
  const c10::Device device = tensors[0].device();
  GroupPlan plan;
  for (int64_t t = 0; t < n; ++t) {
    const at::Tensor& x = tensors[t];
    const Where where{op, t};
    check_target(x, c10::DeviceType::CUDA, where);
    TORCH_CHECK(x.device() == device, where, " is on ", x.device(), " but tensor 0 on ", device,
                " (one device per call)");
    check_offset(offsets[t], x.numel(), where);
    const double* packed = transforms.data() + t * kParamCount;
    check_record(packed, where);
    check_dtype(x, where);
    TINIT_DISPATCH_DTYPES(x.scalar_type(), "tinit::trunc_normal_grouped_", [&] {
      check_built(
          plan.group<device_t<scalar_t>>().add(x.data_ptr(), x.numel(), bits(streams[t]), bits(offsets[t]), packed),
          op);
    });
  }
  const c10::cuda::CUDAGuard guard(device);
  launch_plan(plan, bits(seed), device, op);
}

template <typename out_t>
void runs_fill(const at::Tensor& self, int64_t seed, int64_t stream, int64_t offset, int64_t run,
               at::IntArrayRef outer_sizes, at::IntArrayRef outer_starts, const double* packed, const char* op) {
  const int64_t rows = check_runs(self, offset, run, outer_sizes, outer_starts, op);
  GroupPlan plan;
  check_built(plan.group<out_t>().add_runs(self.data_ptr(), rows, bits(stream), bits(offset), run, outer_sizes.data(),
                                           static_cast<int64_t>(outer_sizes.size()), outer_starts.data(), packed),
              op);
  const c10::cuda::CUDAGuard guard(self.device());
  launch_plan(plan, bits(seed), self.device(), op);
}

void trunc_normal_runs_cuda(at::Tensor self, int64_t seed, int64_t stream, int64_t offset, int64_t run,
                            at::IntArrayRef outer_sizes, at::IntArrayRef outer_starts, at::ArrayRef<double> transform) {
  const char* op = "tinit::trunc_normal_runs_";
  const Where where{op};
  check_target(self, c10::DeviceType::CUDA, where);
  check_transform(transform, where);
  check_dtype(self, where);
  if (self.numel() == 0) return;
  TINIT_DISPATCH_DTYPES(self.scalar_type(), "tinit::trunc_normal_runs_", [&] {
    runs_fill<device_t<scalar_t>>(self, seed, stream, offset, run, outer_sizes, outer_starts, transform.data(), op);
  });
}

void philox_runs_cuda(at::Tensor self, int64_t seed, int64_t stream, int64_t offset, int64_t run,
                      at::IntArrayRef outer_sizes, at::IntArrayRef outer_starts) {
  const char* op = "tinit::philox_runs_";
  const Where where{op};
  check_target(self, c10::DeviceType::CUDA, where);
  check_words(self, where);
  if (self.numel() == 0) return;
  runs_fill<uint32_t>(self, seed, stream, offset, run, outer_sizes, outer_starts, nullptr, op);
}

#undef TINIT_DISPATCH_DTYPES

}  // namespace

TORCH_LIBRARY_IMPL(tinit, CUDA, m) {
  m.impl("trunc_normal_", &trunc_normal_cuda);
  m.impl("philox_", &philox_cuda);
  m.impl("trunc_normal_grouped_", &trunc_normal_grouped_cuda);
  m.impl("trunc_normal_runs_", &trunc_normal_runs_cuda);
  m.impl("philox_runs_", &philox_runs_cuda);
}

TORCH_LIBRARY_IMPL(tinit_bench, CUDA, m) { m.impl("trunc_normal_compute_only_", &trunc_normal_compute_only_cuda); }

}  // namespace cuda
}  // namespace tinit
