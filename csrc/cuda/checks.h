// The argument checks of the CUDA bindings (bindings.cpp): every CUDA op
// refuses the same bad input with the same words, before anything is
// written. Each message starts with the op, and with the tensor's position
// for the list op (Where).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/Exception.h>

#include <cstdint>
#include <ostream>

#include "tinit/transform.h"

namespace tinit {
namespace cuda {

// The op being checked and, for tinit::trunc_normal_grouped_, the position
// of the tensor in its list: streams as "op" or "op: tensor t".
struct Where {
  const char* op;
  int64_t tensor = -1;
};

inline std::ostream& operator<<(std::ostream& os, const Where& where) {
  os << where.op;
  if (where.tensor >= 0) os << ": tensor " << where.tensor;
  return os;
}

inline void check_target(const at::Tensor& self, const char* op) {
  TORCH_CHECK(self.is_cuda(), op, ": expected a CUDA tensor, got ", self.device());
  TORCH_CHECK(self.is_contiguous(), op, ": expected a contiguous tensor (tinit.ops copies views)");
}

// Stream indices offset .. offset + numel - 1 must fit in 63 bits.
inline void check_offset(int64_t offset, int64_t numel, const Where& where) {
  TORCH_CHECK(offset >= 0, where, ": offset must be >= 0, got ", offset);
  TORCH_CHECK(numel <= INT64_MAX - offset, where, ": offset + numel must not exceed 2^63 - 1");
}

// What the kernels need of a record for memory safety (tinit::valid_params):
// a known mode and, in the two-sided modes, constants that keep every word's
// probability inside the ndtri table.
inline void check_record(const double* packed, const Where& where) {
  TORCH_CHECK(valid_mode(packed[kPackedMode]), where, ": transform mode must be 0..", kModeCount - 1,
              " (tinit.params.Mode), got ", packed[kPackedMode]);
  TORCH_CHECK(valid_params(packed), where,
              ": two-sided constants outside their range (tinit.params.transform_constants)");
}

inline void check_transform(c10::ArrayRef<double> transform, const char* op) {
  TORCH_CHECK(static_cast<int64_t>(transform.size()) == kParamCount, op, ": expected ", kParamCount,
              " transform constants (tinit.params.TruncNormalParams), got ", transform.size());
  check_record(transform.data(), Where{op});
}

// The dtypes the kernels are built for; the bindings dispatch on the same four.
inline void check_dtype(const at::Tensor& self, const Where& where) {
  const at::ScalarType t = self.scalar_type();
  TORCH_CHECK(t == at::kFloat || t == at::kDouble || t == at::kBFloat16 || t == at::kHalf, where,
              ": unsupported dtype ", t, " (expected float32, float64, bfloat16 or float16)");
}

inline void check_words(const at::Tensor& self, const char* op) {
  TORCH_CHECK(self.scalar_type() == at::kInt, op, ": expected an int32 tensor for the uint32 words, got ",
              self.scalar_type());
}

}  // namespace cuda
}  // namespace tinit
