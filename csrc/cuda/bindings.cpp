// CUDA implementations of tinit::trunc_normal_, philox_, trunc_normal_grouped_,
// trunc_normal_runs_, philox_runs_ and tinit_bench::trunc_normal_compute_only_
// (schemas in TORCH_LIBRARY(tinit, m) and TORCH_LIBRARY(tinit_bench, m)).
// Its other backends, callers, tests and benchmarks: CONTRIBUTING.md, "Where each op lives".
//
// On torch's stable ABI only (torch::stable, torch::headeronly and the C
// shims; TORCH_TARGET_VERSION 2.10 or later), so that the built object
// imports no at::, c10:: or torch:: symbol and one build serves every torch
// from 2.10 on (test_stable_bindings_import_no_torch_cpp_symbols).
//
// Each op checks its arguments (the checks every binding shares, tinit::Where) before anything is written, picks
// the kernels' element type (dispatch_dtype), fills the launch struct of
// launch.h and calls its launcher under a device guard on the current
// stream; every launch is checked (check_cuda(cudaGetLastError())). Nothing
// synchronises the host, so a fill can be captured in a CUDA graph.
//
// The grouped and runs ops turn a model's thousands of tensors, or a
// row-parallel shard's thousands of rows, into the outputs of one table
// (GroupPlan), packed in a pinned host buffer of tinit's own (TableStaging:
// how it stays alive, eagerly and under CUDA-graph capture), copied on the
// current stream into a device tensor (torch's caching allocator, the graph's
// pool under capture) and walked by one launch per element type.
#include "tinit/fp_contract.h"
// (first: contraction off)

// The CUDA shim's declaration (aoti_torch_get_current_cuda_stream, whose type
// current_stream_shim names) is only under USE_CUDA, which
// torch.utils.cpp_extension passes to nvcc but not to the host compiler.
#ifndef USE_CUDA
#define USE_CUDA
#endif

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/device.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/macros.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/csrc/stable/version.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>
#include <torch/headeronly/util/HeaderOnlyArrayRef.h>

#include <cstdint>
#include <optional>

#if TORCH_FEATURE_VERSION < TORCH_VERSION_2_10_0
#error "tinit's CUDA bindings need torch's stable ABI of 2.10 or later (TORCH_TARGET_VERSION)"
#endif

#include "launch.h"
#include "../checks.h"
#include "table_staging.h"

namespace tinit {
namespace cuda {
namespace {

using torch::headeronly::DeviceType;
using torch::headeronly::ScalarType;
using torch::stable::Tensor;
template <typename T>
using ArrayRef = torch::headeronly::HeaderOnlyArrayRef<T>;

// A device as torch prints one (checks.h's DeviceName).
DeviceName device_name(const torch::stable::Device& device) {
  return {device.type(), device.has_index() ? device.index() : -1};
}

// The kernels' element type for each dtype check_dtype accepts: f(Kind<T>{}).
template <typename T>
struct Kind {
  using type = T;
};

template <typename F>
void dispatch_dtype(ScalarType dtype, const char* op, F&& f) {
  switch (dtype) {
    case ScalarType::Float:
      return f(Kind<float>{});
    case ScalarType::Double:
      return f(Kind<double>{});
    case ScalarType::BFloat16:
      return f(Kind<__nv_bfloat16>{});
    case ScalarType::Half:
      return f(Kind<__half>{});
    default:
      TINIT_CHECK(false, op, ": no kernel for dtype ", dtype);
  }
}

uint64_t bits(int64_t x) { return static_cast<uint64_t>(x); }

// torch's C shim of the current CUDA stream, looked up in the libtorch_cuda.so
// that a CUDA torch has already loaded. Not linked: the extension builds
// against a CPU torch (whose libtorch_cpu has no CUDA shims) and names only
// libtorch_cpu among its dependencies, and torch loads its libraries
// RTLD_LOCAL, so an import of the symbol would fail to bind at load time.
// Under a CPU torch there is no CUDA tensor to reach this code with.
using CurrentStreamShim = AOTITorchError (*)(int32_t, void**);

CurrentStreamShim current_stream_shim() {
  static const CurrentStreamShim shim = [] {
    void* lib = dlopen("libtorch_cuda.so", RTLD_NOW | RTLD_NOLOAD);
    return lib == nullptr ? nullptr
                          : reinterpret_cast<CurrentStreamShim>(dlsym(lib, "aoti_torch_get_current_cuda_stream"));
  }();
  return shim;
}

cudaStream_t current_stream(torch::stable::accelerator::DeviceIndex device) {
  const CurrentStreamShim shim = current_stream_shim();
  TINIT_CHECK(shim != nullptr,
              "tinit: torch's CUDA library (libtorch_cuda.so) is not loaded: a CUDA op needs a CUDA torch");
  void* stream = nullptr;
  TINIT_CHECK(shim(device, &stream) == AOTI_TORCH_SUCCESS,
              "tinit: torch could not give the current CUDA stream of device ", static_cast<int>(device));
  return static_cast<cudaStream_t>(stream);
}

// A CUDA runtime error as a RuntimeError (STD_CUDA_CHECK's words; its shims live in
// libtorch_cuda, which the extension does not link: current_stream_shim).
void check_cuda(cudaError_t err) { TINIT_CHECK(err == cudaSuccess, "CUDA error: ", cudaGetErrorString(err)); }

template <typename out_t>
void run_fill(const Tensor& self, const FillLaunch<out_t>& launch) {
  const torch::stable::accelerator::DeviceGuard guard(self.get_device_index());
  check_cuda(launch_fill(launch, current_stream(self.get_device_index())));
  check_cuda(cudaGetLastError());
}

void fill(const Tensor& self, int64_t seed, int64_t stream, int64_t offset, ArrayRef<double> transform,
          bool compute_only, const char* op) {
  const Where where{op};
  check_target(self, DeviceType::CUDA, where);
  check_transform(transform, where);
  check_offset(offset, self.numel(), where);
  check_dtype(self, where);
  if (self.numel() == 0) return;
  dispatch_dtype(self.scalar_type(), op, [&](auto kind) {
    using out_t = typename decltype(kind)::type;
    run_fill<out_t>(self,
                    {static_cast<out_t*>(self.mutable_data_ptr()), self.numel(), bits(seed), bits(stream), bits(offset),
                     TruncNormalParams<compute_t<out_t>>::from_packed(transform.data()), compute_only});
  });
}

void trunc_normal_cuda(Tensor self, int64_t seed, int64_t stream, int64_t offset, ArrayRef<double> transform) {
  fill(self, seed, stream, offset, transform, false, "tinit::trunc_normal_");
}

void trunc_normal_compute_only_cuda(Tensor self, int64_t seed, int64_t stream, int64_t offset,
                                    ArrayRef<double> transform) {
  fill(self, seed, stream, offset, transform, true, "tinit_bench::trunc_normal_compute_only_");
}

void philox_cuda(Tensor self, int64_t seed, int64_t stream, int64_t offset) {
  const Where where{"tinit::philox_"};
  check_target(self, DeviceType::CUDA, where);
  check_words(self, where);
  check_offset(offset, self.numel(), where);
  if (self.numel() == 0) return;
  run_fill<uint32_t>(self, {static_cast<uint32_t*>(self.mutable_data_ptr()),
                            self.numel(),
                            bits(seed),
                            bits(stream),
                            bits(offset),
                            {},
                            false});
}

// ------------------------------------------------------------ grouped, runs

void check_built(cudaError_t err, const char* op) {
  TINIT_CHECK(err == cudaSuccess, op, ": the launch table was refused (", cudaGetErrorString(err),
              ") after the arguments passed their checks");
}

// Packs, copies and launches `plan` on `device`'s current stream (the caller
// holds a guard for it).
void launch_plan(GroupPlan& plan, uint64_t seed, const torch::stable::Device& device, const char* op) {
  if (plan.empty()) return;
  const size_t layout = plan.layout();
  check_built(layout > 0 ? cudaSuccess : cudaErrorInvalidValue, op);
  const cudaStream_t stream = current_stream(device.index());
  TableStaging staging;
  check_cuda(staging.take(layout, device.index(), stream));
  check_built(plan.pack(staging.host()), op);
  const Tensor table = torch::stable::empty(static_cast<int64_t>(layout), ScalarType::Byte, std::nullopt, device);
  check_cuda(staging.copy_to(table.mutable_data_ptr()));
  const auto* base = static_cast<const char*>(table.const_data_ptr());
  plan.for_each([&](const auto& group) {
    if (group.empty()) return;
    check_cuda(launch_grouped(group, base + group.table_offset, seed, stream));
    check_cuda(cudaGetLastError());
  });
}

void trunc_normal_grouped_cuda(ArrayRef<Tensor> tensors, int64_t seed, ArrayRef<int64_t> streams,
                               ArrayRef<int64_t> offsets, ArrayRef<double> transforms) {
  const char* op = "tinit::trunc_normal_grouped_";
  const auto n = static_cast<int64_t>(tensors.size());
  check_grouped_lists(n, streams, offsets, transforms, op);
  if (n == 0) return;
  const torch::stable::Device device = tensors[0].device();
  GroupPlan plan;
  for (int64_t t = 0; t < n; ++t) {
    const Tensor& x = tensors[t];
    const Where where{op, t};
    check_target(x, DeviceType::CUDA, where);
    TINIT_CHECK(x.device() == device, where, " is on ", device_name(x.device()), " but tensor 0 on ",
                device_name(device), " (one device per call)");
    check_offset(offsets[t], x.numel(), where);
    const double* packed = transforms.data() + t * kParamCount;
    check_record(packed, where);
    check_dtype(x, where);
    dispatch_dtype(x.scalar_type(), op, [&](auto kind) {
      using out_t = typename decltype(kind)::type;
      check_built(plan.group<out_t>().add(x.mutable_data_ptr(), x.numel(), bits(streams[t]), bits(offsets[t]), packed),
                  op);
    });
  }
  const torch::stable::accelerator::DeviceGuard guard(device.index());
  launch_plan(plan, bits(seed), device, op);
}

template <typename out_t>
void runs_fill(const Tensor& self, int64_t seed, int64_t stream, int64_t offset, int64_t run,
               ArrayRef<int64_t> outer_sizes, ArrayRef<int64_t> outer_starts, const double* packed, const char* op) {
  const int64_t rows = check_runs(self, offset, run, outer_sizes, outer_starts, op);
  GroupPlan plan;
  check_built(
      plan.group<out_t>().add_runs(self.mutable_data_ptr(), rows, bits(stream), bits(offset), run, outer_sizes.data(),
                                   static_cast<int64_t>(outer_sizes.size()), outer_starts.data(), packed),
      op);
  const torch::stable::Device device = self.device();
  const torch::stable::accelerator::DeviceGuard guard(device.index());
  launch_plan(plan, bits(seed), device, op);
}

void trunc_normal_runs_cuda(Tensor self, int64_t seed, int64_t stream, int64_t offset, int64_t run,
                            ArrayRef<int64_t> outer_sizes, ArrayRef<int64_t> outer_starts, ArrayRef<double> transform) {
  const char* op = "tinit::trunc_normal_runs_";
  const Where where{op};
  check_target(self, DeviceType::CUDA, where);
  check_transform(transform, where);
  check_dtype(self, where);
  if (self.numel() == 0) return;
  dispatch_dtype(self.scalar_type(), op, [&](auto kind) {
    runs_fill<typename decltype(kind)::type>(self, seed, stream, offset, run, outer_sizes, outer_starts,
                                             transform.data(), op);
  });
}

void philox_runs_cuda(Tensor self, int64_t seed, int64_t stream, int64_t offset, int64_t run,
                      ArrayRef<int64_t> outer_sizes, ArrayRef<int64_t> outer_starts) {
  const char* op = "tinit::philox_runs_";
  const Where where{op};
  check_target(self, DeviceType::CUDA, where);
  check_words(self, where);
  if (self.numel() == 0) return;
  runs_fill<uint32_t>(self, seed, stream, offset, run, outer_sizes, outer_starts, nullptr, op);
}

}  // namespace

STABLE_TORCH_LIBRARY_IMPL(tinit, CUDA, m) {
  m.impl("trunc_normal_", TORCH_BOX(&trunc_normal_cuda));
  m.impl("philox_", TORCH_BOX(&philox_cuda));
  m.impl("trunc_normal_grouped_", TORCH_BOX(&trunc_normal_grouped_cuda));
  m.impl("trunc_normal_runs_", TORCH_BOX(&trunc_normal_runs_cuda));
  m.impl("philox_runs_", TORCH_BOX(&philox_runs_cuda));
}

STABLE_TORCH_LIBRARY_IMPL(tinit_bench, CUDA, m) {
  m.impl("trunc_normal_compute_only_", TORCH_BOX(&trunc_normal_compute_only_cuda));
}

}  // namespace cuda
}  // namespace tinit
