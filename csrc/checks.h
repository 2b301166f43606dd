// The argument checks of every native binding, CPU and CUDA alike: the same
// bad input is refused with the same words on every device, before anything
// is written. Each message starts with the op, and with the tensor's position
// for the list op (Where). The Python layer (tinit.ops, tinit.fill) checks
// first and says more; these are what a direct torch.ops.tinit call meets,
// and what keeps the kernels inside their memory.
#pragma once

#include "tinit/fp_contract.h"
// (first: contraction off)

#include <ATen/core/Tensor.h>
#include <c10/core/DeviceType.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdint>
#include <ostream>

#include "tinit/transform.h"

namespace tinit {

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

// A contiguous tensor of the binding's device type (kCPU, kCUDA).
inline void check_target(const at::Tensor& self, c10::DeviceType device, const Where& where) {
  TORCH_CHECK(self.device().type() == device, where, " is on ", self.device(), "; expected a ",
              c10::DeviceTypeName(device), " tensor");
  TORCH_CHECK(self.is_contiguous(), where, " is not contiguous (tinit.ops copies views)");
}

// Stream indices offset .. offset + numel - 1 must fit in 63 bits: offset + numel <= 2^63, as
// tinit.fill and the Triton launchers allow.
inline void check_offset(int64_t offset, int64_t numel, const Where& where) {
  TORCH_CHECK(offset >= 0, where, ": offset must be >= 0, got ", offset);
  TORCH_CHECK(numel == 0 || numel - 1 <= INT64_MAX - offset, where, ": offset + numel must not exceed 2^63");
}

// What the kernels need of a record for memory safety (tinit::valid_params):
// a known mode (an unknown one would index past the mode table) and, in the
// two-sided modes, constants that keep every word's probability inside the
// ndtri table.
inline void check_record(const double* packed, const Where& where) {
  TORCH_CHECK(valid_mode(packed[kPackedMode]), where, ": transform mode must be 0..", kModeCount - 1,
              " (tinit.params.Mode), got ", packed[kPackedMode]);
  TORCH_CHECK(valid_params(packed), where,
              ": two-sided constants outside their range (tinit.params.transform_constants)");
}

inline void check_transform(c10::ArrayRef<double> transform, const Where& where) {
  TORCH_CHECK(static_cast<int64_t>(transform.size()) == kParamCount, where, ": expected ", kParamCount,
              " transform constants (tinit.params.TruncNormalParams), got ", transform.size());
  check_record(transform.data(), where);
}

// The dtypes the kernels are built for; the bindings dispatch on the same four.
inline void check_dtype(const at::Tensor& self, const Where& where) {
  const at::ScalarType t = self.scalar_type();
  TORCH_CHECK(t == at::kFloat || t == at::kDouble || t == at::kBFloat16 || t == at::kHalf, where,
              ": unsupported dtype ", t, " (expected float32, float64, bfloat16 or float16)");
}

inline void check_words(const at::Tensor& self, const Where& where) {
  TORCH_CHECK(self.scalar_type() == at::kInt, where, ": expected an int32 tensor for the uint32 words, got ",
              self.scalar_type());
}

// The list arguments of tinit::trunc_normal_grouped_: one stream, one offset
// and one record per tensor.
inline void check_grouped_lists(int64_t n, c10::ArrayRef<int64_t> streams, c10::ArrayRef<int64_t> offsets,
                                c10::ArrayRef<double> transforms, const char* op) {
  TORCH_CHECK(static_cast<int64_t>(streams.size()) == n && static_cast<int64_t>(offsets.size()) == n, op,
              ": expected one stream and one offset per tensor, got ", n, " tensors, ", streams.size(), " streams and ",
              offsets.size(), " offsets");
  TORCH_CHECK(static_cast<int64_t>(transforms.size()) == n * kParamCount, op, ": expected ", kParamCount,
              " transform constants per tensor (tinit.params.TruncNormalParams), ", n * kParamCount, " in all, got ",
              transforms.size());
}

// The runs layout of tinit::trunc_normal_runs_ / philox_runs_ (prod(outer_sizes)
// rows of `run` elements; outer_starts holds, dim after dim, one stream index
// contribution per position of each outer dim), plus what the stream index
// needs: its last index, offset + the largest start of every outer dim +
// run - 1, must fit in 63 bits (the sum without the - 1 may reach 2^63).
// Returns the number of rows.
inline int64_t check_runs(const at::Tensor& self, int64_t offset, int64_t run, c10::ArrayRef<int64_t> outer_sizes,
                          c10::ArrayRef<int64_t> outer_starts, const char* op) {
  TORCH_CHECK(offset >= 0, op, ": offset must be >= 0, got ", offset);
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
    TORCH_CHECK(top <= INT64_MAX - last, op, ": offset + outer starts + run must not exceed 2^63");
    last += top;
  }
  TORCH_CHECK(run - 1 <= INT64_MAX - last, op, ": offset + outer starts + run must not exceed 2^63");
  return rows;
}

}  // namespace tinit
