// Argument checks shared by the CUDA bindings (trunc_normal.cpp,
// trunc_normal_grouped.cpp), so that every CUDA op refuses the same bad input
// with the same words, before anything is written. Each message names the op.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/Exception.h>

#include <cstdint>

#include "tinit/transform.h"
#include "trunc_normal_kernel.h"

namespace tinit {
namespace cuda {

inline void check_target(const at::Tensor& self, const char* op) {
  TORCH_CHECK(self.is_cuda(), op, ": expected a CUDA tensor, got ", self.device());
  TORCH_CHECK(self.is_contiguous(), op, ": expected a contiguous tensor (tinit.ops copies views)");
}

inline void check_offset(int64_t offset, int64_t numel, const char* op) {
  TORCH_CHECK(offset >= 0, op, ": offset must be >= 0");
  TORCH_CHECK(numel <= INT64_MAX - offset, op, ": offset + numel must not exceed 2^63 - 1");
}

inline void check_transform(c10::ArrayRef<double> transform, const char* op) {
  TORCH_CHECK(static_cast<int64_t>(transform.size()) == TINIT_PARAM_COUNT, op, ": expected ", TINIT_PARAM_COUNT,
              " transform constants (tinit/params.py), got ", transform.size());
  TORCH_CHECK(tinit::valid_mode(transform[tinit::kPackedMode]), op, ": transform mode must be 0..",
              tinit::kModeCount - 1, " (tinit.params.Mode), got ", transform[tinit::kPackedMode]);
  TORCH_CHECK(tinit::valid_params(transform.data()), op,
              ": two-sided constants outside their range (tinit.params.transform_constants)");
}

inline TinitDtype dtype_of(const at::Tensor& self, const char* op) {
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
  TORCH_CHECK(false, op, ": unsupported dtype ", self.scalar_type(),
              " (expected float32, float64, bfloat16 or float16)");
  return TINIT_FLOAT32;
}

}  // namespace cuda
}  // namespace tinit
