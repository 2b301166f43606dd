// CUDA implementations of tinit::trunc_normal_grouped_, trunc_normal_runs_
// and philox_runs_ (schemas and the runs layout in TORCH_LIBRARY(tinit, m)).
//
// A model's thousands of tensors, or a row-parallel shard's thousands of
// rows, would cost one launch each through trunc_normal_; here every output
// becomes an entry of one table (grouped_plan.h), packed in pinned host
// memory, copied on the current stream and walked by one launch per output
// dtype (trunc_normal_grouped_kernel.cu). Nothing synchronises the host: the
// caching host allocator keeps the pinned buffer until the copy has run, and
// the device copy is freed in stream order. Every argument is checked before
// anything is written; every launch is checked.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>

#include "binding_checks.h"
#include "grouped_plan.h"
#include "trunc_normal_grouped_kernel.h"

namespace tinit {
namespace {

using cuda::check_target;
using cuda::check_transform;
using cuda::dtype_of;
using cuda::GroupPlan;

void check_built(cudaError_t err, const char* op) {
  TORCH_CHECK(err == cudaSuccess, op, ": the launch table was refused (", cudaGetErrorString(err),
              ") after the arguments passed their checks");
}

// Packs, copies and launches `plan` on `device`'s current stream (the caller
// holds a guard for it).
void launch(GroupPlan& plan, uint64_t seed, c10::Device device, const char* op) {
  if (plan.empty()) return;
  const auto bytes = static_cast<int64_t>(plan.layout());
  at::Tensor host = at::empty({bytes}, at::TensorOptions().dtype(at::kByte).pinned_memory(true));
  check_built(plan.pack(host.data_ptr()), op);
  at::Tensor table = at::empty({bytes}, at::TensorOptions().dtype(at::kByte).device(device));
  table.copy_(host, /*non_blocking=*/true);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device.index()).stream();
  auto* base = static_cast<const char*>(table.const_data_ptr());
  for (int k = 0; k < TINIT_GROUP_KINDS; ++k) {
    const GroupPlan::Group& g = plan.groups[k];
    if (g.entries.empty()) continue;
    C10_CUDA_CHECK(tinit_grouped_cuda(base + g.table_offset, static_cast<TinitGroupKind>(k),
                                      static_cast<int64_t>(g.entries.size()), static_cast<int64_t>(g.params.size()),
                                      g.chunks, seed, stream));
  }
}

void trunc_normal_grouped_cuda(at::TensorList tensors, int64_t seed, at::IntArrayRef streams, at::IntArrayRef offsets,
                               at::ArrayRef<double> transforms) {
  const char* op = "tinit::trunc_normal_grouped_";
  const auto n = static_cast<int64_t>(tensors.size());
  TORCH_CHECK(static_cast<int64_t>(streams.size()) == n && static_cast<int64_t>(offsets.size()) == n, op,
              ": expected one stream and one offset per tensor, got ", n, " tensors, ", streams.size(), " streams and ",
              offsets.size(), " offsets");
  TORCH_CHECK(static_cast<int64_t>(transforms.size()) == n * TINIT_PARAM_COUNT, op, ": expected ", TINIT_PARAM_COUNT,
              " transform constants per tensor (", n * TINIT_PARAM_COUNT, "), got ", transforms.size());
  if (n == 0) return;
  const c10::Device device = tensors[0].device();
  GroupPlan plan;
  for (int64_t t = 0; t < n; ++t) {
    const at::Tensor& x = tensors[t];
    TORCH_CHECK(x.is_cuda(), op, ": tensor ", t, " is on ", x.device(), "; expected CUDA tensors");
    TORCH_CHECK(x.device() == device, op, ": tensor ", t, " is on ", x.device(), " but tensor 0 on ", device,
                " (one device per call)");
    TORCH_CHECK(x.is_contiguous(), op, ": tensor ", t, " is not contiguous (tinit.ops copies views)");
    TORCH_CHECK(offsets[t] >= 0, op, ": tensor ", t, ": offset must be >= 0, got ", offsets[t]);
    TORCH_CHECK(x.numel() <= INT64_MAX - offsets[t], op, ": tensor ", t, ": offset + numel must not exceed 2^63 - 1");
    const double* packed = transforms.data() + t * TINIT_PARAM_COUNT;
    TORCH_CHECK(valid_mode(packed[kPackedMode]), op, ": tensor ", t, ": transform mode must be 0..", kModeCount - 1,
                " (tinit.params.Mode), got ", packed[kPackedMode]);
    plan.add(static_cast<TinitGroupKind>(dtype_of(x, op)), x.data_ptr(), x.numel(), static_cast<uint64_t>(streams[t]),
             static_cast<uint64_t>(offsets[t]), packed);
  }
  const c10::cuda::CUDAGuard guard(device);
  launch(plan, static_cast<uint64_t>(seed), device, op);
}

// The runs layout's rows (tinit::trunc_normal_runs_'s schema), as the CPU ops check it, plus what
// the stream index needs: its last index, offset + the largest start of
// every outer dim + run - 1, must fit in 63 bits.
int64_t checked_rows(const at::Tensor& self, int64_t offset, int64_t run, at::IntArrayRef outer_sizes,
                     at::IntArrayRef outer_starts, const char* op) {
  TORCH_CHECK(offset >= 0, op, ": offset must be >= 0");
  TORCH_CHECK(run > 0, op, ": run must be > 0");
  int64_t rows = 1, entries = 0;
  for (const int64_t size : outer_sizes) {
    TORCH_CHECK(size > 0, op, ": outer sizes must be > 0");
    TORCH_CHECK(rows <= INT64_MAX / size, op, ": the outer sizes' product overflows int64");
    rows *= size;
    entries += size;
  }
  TORCH_CHECK(rows <= INT64_MAX / run && rows * run == self.numel(), op, ": ", rows, " runs of ", run,
              " elements do not cover the ", self.numel(), " of the tensor");
  TORCH_CHECK(entries == static_cast<int64_t>(outer_starts.size()), op, ": expected ", entries, " outer starts, got ",
              outer_starts.size());
  int64_t last = offset;
  const int64_t* start = outer_starts.data();
  for (const int64_t size : outer_sizes) {
    int64_t top = 0;
    for (int64_t i = 0; i < size; ++i, ++start) {
      TORCH_CHECK(*start >= 0, op, ": outer starts must be >= 0");
      top = std::max(top, *start);
    }
    TORCH_CHECK(top <= INT64_MAX - last, op, ": offset + outer starts + run must not exceed 2^63 - 1");
    last += top;
  }
  TORCH_CHECK(run <= INT64_MAX - last, op, ": offset + outer starts + run must not exceed 2^63 - 1");
  return rows;
}

void runs_fill(const at::Tensor& self, TinitGroupKind kind, int64_t seed, int64_t stream, int64_t offset, int64_t run,
               at::IntArrayRef outer_sizes, at::IntArrayRef outer_starts, const double* packed, const char* op) {
  const int64_t rows = checked_rows(self, offset, run, outer_sizes, outer_starts, op);
  GroupPlan plan;
  check_built(plan.add_runs(kind, self.data_ptr(), static_cast<size_t>(self.element_size()), rows,
                            static_cast<uint64_t>(stream), static_cast<uint64_t>(offset), run, outer_sizes.data(),
                            static_cast<int64_t>(outer_sizes.size()), outer_starts.data(), packed),
              op);
  const c10::cuda::CUDAGuard guard(self.device());
  launch(plan, static_cast<uint64_t>(seed), self.device(), op);
}

void trunc_normal_runs_cuda(at::Tensor self, int64_t seed, int64_t stream, int64_t offset, int64_t run,
                            at::IntArrayRef outer_sizes, at::IntArrayRef outer_starts, at::ArrayRef<double> transform) {
  const char* op = "tinit::trunc_normal_runs_";
  check_target(self, op);
  check_transform(transform, op);
  const auto kind = static_cast<TinitGroupKind>(dtype_of(self, op));
  if (self.numel() == 0) return;
  runs_fill(self, kind, seed, stream, offset, run, outer_sizes, outer_starts, transform.data(), op);
}

void philox_runs_cuda(at::Tensor self, int64_t seed, int64_t stream, int64_t offset, int64_t run,
                      at::IntArrayRef outer_sizes, at::IntArrayRef outer_starts) {
  const char* op = "tinit::philox_runs_";
  check_target(self, op);
  TORCH_CHECK(self.scalar_type() == at::kInt, op, ": expected an int32 tensor for the uint32 words, got ",
              self.scalar_type());
  if (self.numel() == 0) return;
  runs_fill(self, TINIT_GROUP_WORDS, seed, stream, offset, run, outer_sizes, outer_starts, nullptr, op);
}

}  // namespace

TORCH_LIBRARY_IMPL(tinit, CUDA, m) {
  m.impl("trunc_normal_grouped_", &trunc_normal_grouped_cuda);
  m.impl("trunc_normal_runs_", &trunc_normal_runs_cuda);
  m.impl("philox_runs_", &philox_runs_cuda);
}

}  // namespace tinit
