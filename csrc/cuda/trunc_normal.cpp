// CUDA implementation of tinit::trunc_normal_ and tinit::philox_ (schemas in
// csrc/ops.cpp): argument checks, device guard and current stream around the
// torch-free launchers of trunc_normal_kernel.cu. Every launch is checked.
// No host synchronisation, so a fill can be captured in a CUDA graph.
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>

#include "trunc_normal_kernel.h"

namespace tinit {
namespace {

void check_target(const at::Tensor& self, const char* op) {
  TORCH_CHECK(self.is_cuda(), op, ": expected a CUDA tensor, got ", self.device());
  TORCH_CHECK(self.is_contiguous(), op,
              ": expected a contiguous tensor (tinit.ops copies views)");
}

void check_offset(int64_t offset, int64_t numel, const char* op) {
  TORCH_CHECK(offset >= 0, op, ": offset must be >= 0");
  TORCH_CHECK(numel <= INT64_MAX - offset, op, ": offset + numel must not exceed 2^63 - 1");
}

TinitDtype dtype_of(const at::Tensor& self) {
  switch (self.scalar_type()) {
    case at::kFloat:
      return TINIT_FLOAT32;
    case at::kDouble:
      return TINIT_FLOAT64;
    case at::kBFloat16:
      return TINIT_BFLOAT16;
    case at::kHalf:
      return TINIT_FLOAT16;
    default:
      break;
  }
  TORCH_CHECK(false, "tinit::trunc_normal_: unsupported dtype ", self.scalar_type(),
              " (expected float32, float64, bfloat16 or float16)");
  return TINIT_FLOAT32;
}

void fill(at::Tensor& self, int64_t seed, int64_t stream, int64_t offset,
          at::ArrayRef<double> transform, unsigned flags, const char* op) {
  check_target(self, op);
  TORCH_CHECK(static_cast<int64_t>(transform.size()) == TINIT_PARAM_COUNT, op, ": expected ",
              TINIT_PARAM_COUNT, " transform constants (tinit/params.py), got ",
              transform.size());
  check_offset(offset, self.numel(), op);
  const double mode = transform[0];
  TORCH_CHECK(mode == 0.0 || mode == 1.0 || mode == 2.0 || mode == 3.0, op,
              ": transform mode must be 0..3 (tinit/params.py), got ", mode);
  const TinitDtype dtype = dtype_of(self);
  if (self.numel() == 0) return;
  TinitTransformParams params;
  std::copy(transform.begin(), transform.end(), params.packed);
  const c10::cuda::CUDAGuard guard(self.device());
  C10_CUDA_CHECK(tinit_trunc_normal_cuda(
      self.data_ptr(), self.numel(), dtype, static_cast<uint64_t>(seed),
      static_cast<uint64_t>(stream), static_cast<uint64_t>(offset), &params, flags,
      c10::cuda::getCurrentCUDAStream(self.device().index()).stream()));
}

void trunc_normal_cuda(at::Tensor self, int64_t seed, int64_t stream, int64_t offset,
                       at::ArrayRef<double> transform) {
  fill(self, seed, stream, offset, transform, 0u, "tinit::trunc_normal_");
}

void trunc_normal_compute_only_cuda(at::Tensor self, int64_t seed, int64_t stream,
                                    int64_t offset, at::ArrayRef<double> transform) {
  fill(self, seed, stream, offset, transform, TINIT_FLAG_COMPUTE_ONLY,
       "tinit::_trunc_normal_compute_only_");
}

void philox_cuda(at::Tensor self, int64_t seed, int64_t stream, int64_t offset) {
  check_target(self, "tinit::philox_");
  TORCH_CHECK(self.scalar_type() == at::kInt,
              "tinit::philox_: expected an int32 tensor for the uint32 words");
  check_offset(offset, self.numel(), "tinit::philox_");
  if (self.numel() == 0) return;
  const c10::cuda::CUDAGuard guard(self.device());
  C10_CUDA_CHECK(tinit_philox_cuda(
      reinterpret_cast<uint32_t*>(self.data_ptr<int32_t>()), self.numel(),
      static_cast<uint64_t>(seed), static_cast<uint64_t>(stream),
      static_cast<uint64_t>(offset),
      c10::cuda::getCurrentCUDAStream(self.device().index()).stream()));
}

}  // namespace

TORCH_LIBRARY_IMPL(tinit, CUDA, m) {
  m.impl("trunc_normal_", &trunc_normal_cuda);
  m.impl("_trunc_normal_compute_only_", &trunc_normal_compute_only_cuda);
  m.impl("philox_", &philox_cuda);
}

}  // namespace tinit
