// CUDA implementation of tinit::trunc_normal_ and tinit::philox_ (schemas in
// TORCH_LIBRARY(tinit, m)): argument checks, device guard and current stream around the
// torch-free launchers of trunc_normal_kernel.cu. Every launch is checked.
// No host synchronisation, so a fill can be captured in a CUDA graph.
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>

#include "binding_checks.h"
#include "trunc_normal_kernel.h"

namespace tinit {
namespace {

using cuda::check_offset;
using cuda::check_target;
using cuda::check_transform;
using cuda::dtype_of;

void fill(at::Tensor& self, int64_t seed, int64_t stream, int64_t offset, at::ArrayRef<double> transform,
          unsigned flags, const char* op) {
  check_target(self, op);
  check_transform(transform, op);
  check_offset(offset, self.numel(), op);
  const TinitDtype dtype = dtype_of(self, op);
  if (self.numel() == 0) return;
  TinitTransformParams params;
  std::copy(transform.begin(), transform.end(), params.packed);
  const c10::cuda::CUDAGuard guard(self.device());
  C10_CUDA_CHECK(tinit_trunc_normal_cuda(self.data_ptr(), self.numel(), dtype, static_cast<uint64_t>(seed),
                                         static_cast<uint64_t>(stream), static_cast<uint64_t>(offset), &params, flags,
                                         c10::cuda::getCurrentCUDAStream(self.device().index()).stream()));
}

void trunc_normal_cuda(at::Tensor self, int64_t seed, int64_t stream, int64_t offset, at::ArrayRef<double> transform) {
  fill(self, seed, stream, offset, transform, 0u, "tinit::trunc_normal_");
}

void trunc_normal_compute_only_cuda(at::Tensor self, int64_t seed, int64_t stream, int64_t offset,
                                    at::ArrayRef<double> transform) {
  fill(self, seed, stream, offset, transform, TINIT_FLAG_COMPUTE_ONLY, "tinit_bench::trunc_normal_compute_only_");
}

void philox_cuda(at::Tensor self, int64_t seed, int64_t stream, int64_t offset) {
  check_target(self, "tinit::philox_");
  TORCH_CHECK(self.scalar_type() == at::kInt, "tinit::philox_: expected an int32 tensor for the uint32 words");
  check_offset(offset, self.numel(), "tinit::philox_");
  if (self.numel() == 0) return;
  const c10::cuda::CUDAGuard guard(self.device());
  C10_CUDA_CHECK(tinit_philox_cuda(reinterpret_cast<uint32_t*>(self.data_ptr<int32_t>()), self.numel(),
                                   static_cast<uint64_t>(seed), static_cast<uint64_t>(stream),
                                   static_cast<uint64_t>(offset),
                                   c10::cuda::getCurrentCUDAStream(self.device().index()).stream()));
}

}  // namespace

TORCH_LIBRARY_IMPL(tinit, CUDA, m) {
  m.impl("trunc_normal_", &trunc_normal_cuda);
  m.impl("philox_", &philox_cuda);
}

TORCH_LIBRARY_IMPL(tinit_bench, CUDA, m) { m.impl("trunc_normal_compute_only_", &trunc_normal_compute_only_cuda); }

}  // namespace tinit
