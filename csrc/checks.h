// The argument checks of every native binding, CPU and CUDA alike: the same
// bad input is refused with the same words on every device, before anything
// is written. Each message starts with the op, and with the tensor's position
// for the list op (Where). The Python layer (tinit.ops, tinit.fill) checks
// first and says more; these are what a direct torch.ops.tinit call meets,
// and what keeps the kernels inside their memory.
//
// Header-only torch (torch/headeronly), so the stable-ABI bindings use it: a
// check that reads a tensor is a template over its type (torch::stable::Tensor;
// an at::Tensor has the same members), list arguments are HeaderOnlyArrayRefs
// (what TORCH_BOX passes; a c10::ArrayRef is one), and a failure is a
// TINIT_CHECK (std::runtime_error).
#pragma once

#include "tinit/fp_contract.h"
// (first: contraction off)

#include <torch/headeronly/core/DeviceType.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/HeaderOnlyArrayRef.h>

#include <algorithm>
#include <cstdint>
#include <ostream>

#include "tinit/check.h"
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

// A device as torch prints one: "cpu", "cuda:0" (c10::DeviceTypeName is not header-only).
struct DeviceName {
  torch::headeronly::DeviceType type;
  int index;
  bool upper = false;  // "CPU", "CUDA": the type alone, as in "expected a CUDA tensor"
};

inline std::ostream& operator<<(std::ostream& os, const DeviceName& d) {
  using torch::headeronly::DeviceType;
  const char* lower = nullptr;
  const char* upper = nullptr;
  switch (d.type) {
    case DeviceType::CPU:
      lower = "cpu", upper = "CPU";
      break;
    case DeviceType::CUDA:
      lower = "cuda", upper = "CUDA";
      break;
    case DeviceType::HIP:
      lower = "hip", upper = "HIP";
      break;
    case DeviceType::MPS:
      lower = "mps", upper = "MPS";
      break;
    case DeviceType::XPU:
      lower = "xpu", upper = "XPU";
      break;
    case DeviceType::Meta:
      lower = "meta", upper = "META";
      break;
    default:
      return os << "device type " << static_cast<int>(d.type);
  }
  os << (d.upper ? upper : lower);
  if (!d.upper && d.index >= 0) os << ":" << d.index;
  return os;
}

// A contiguous tensor of the binding's device type (CPU, CUDA).
template <typename Tensor>
void check_target(const Tensor& self, torch::headeronly::DeviceType device, const Where& where) {
  const auto on = self.device();
  TINIT_CHECK(on.type() == device, where, " is on ", DeviceName{on.type(), static_cast<int>(on.index())},
              "; expected a ", DeviceName{device, -1, true}, " tensor");
  TINIT_CHECK(self.is_contiguous(), where, " is not contiguous (tinit.ops copies views)");
}

// Stream indices offset .. offset + numel - 1 must fit in 63 bits: offset + numel <= 2^63, as
// tinit.fill and the Triton launchers allow.
inline void check_offset(int64_t offset, int64_t numel, const Where& where) {
  TINIT_CHECK(offset >= 0, where, ": offset must be >= 0, got ", offset);
  TINIT_CHECK(numel == 0 || numel - 1 <= INT64_MAX - offset, where, ": offset + numel must not exceed 2^63");
}

// What the kernels need of a record for memory safety (tinit::valid_params):
// a known mode (an unknown one would index past the mode table) and, in the
// two-sided modes, constants that keep every word's probability inside the
// ndtri table.
inline void check_record(const double* packed, const Where& where) {
  TINIT_CHECK(valid_mode(packed[kPackedMode]), where, ": transform mode must be 0..", kModeCount - 1,
              " (tinit.params.Mode), got ", packed[kPackedMode]);
  TINIT_CHECK(valid_params(packed), where,
              ": two-sided constants outside their range (tinit.params.transform_constants)");
}

inline void check_transform(torch::headeronly::HeaderOnlyArrayRef<double> transform, const Where& where) {
  TINIT_CHECK(static_cast<int64_t>(transform.size()) == kParamCount, where, ": expected ", kParamCount,
              " transform constants (tinit.params.TruncNormalParams), got ", transform.size());
  check_record(transform.data(), where);
}

// The dtypes the kernels are built for; the bindings dispatch on the same four.
template <typename Tensor>
void check_dtype(const Tensor& self, const Where& where) {
  using torch::headeronly::ScalarType;
  const ScalarType t = self.scalar_type();
  TINIT_CHECK(t == ScalarType::Float || t == ScalarType::Double || t == ScalarType::BFloat16 || t == ScalarType::Half,
              where, ": unsupported dtype ", t, " (expected float32, float64, bfloat16 or float16)");
}

template <typename Tensor>
void check_words(const Tensor& self, const Where& where) {
  TINIT_CHECK(self.scalar_type() == torch::headeronly::ScalarType::Int, where,
              ": expected an int32 tensor for the uint32 words, got ", self.scalar_type());
}

// The list arguments of tinit::trunc_normal_grouped_: one stream, one offset
// and one record per tensor.
inline void check_grouped_lists(int64_t n, torch::headeronly::HeaderOnlyArrayRef<int64_t> streams,
                                torch::headeronly::HeaderOnlyArrayRef<int64_t> offsets,
                                torch::headeronly::HeaderOnlyArrayRef<double> transforms, const char* op) {
  TINIT_CHECK(static_cast<int64_t>(streams.size()) == n && static_cast<int64_t>(offsets.size()) == n, op,
              ": expected one stream and one offset per tensor, got ", n, " tensors, ", streams.size(), " streams and ",
              offsets.size(), " offsets");
  TINIT_CHECK(static_cast<int64_t>(transforms.size()) == n * kParamCount, op, ": expected ", kParamCount,
              " transform constants per tensor (tinit.params.TruncNormalParams), ", n * kParamCount, " in all, got ",
              transforms.size());
}

// The runs layout of tinit::trunc_normal_runs_ / philox_runs_ (prod(outer_sizes)
// rows of `run` elements; outer_starts holds, dim after dim, one stream index
// contribution per position of each outer dim), plus what the stream index
// needs: its last index, offset + the largest start of every outer dim +
// run - 1, must fit in 63 bits (the sum without the - 1 may reach 2^63).
// Returns the number of rows.
template <typename Tensor>
int64_t check_runs(const Tensor& self, int64_t offset, int64_t run,
                   torch::headeronly::HeaderOnlyArrayRef<int64_t> outer_sizes,
                   torch::headeronly::HeaderOnlyArrayRef<int64_t> outer_starts, const char* op) {
  TINIT_CHECK(offset >= 0, op, ": offset must be >= 0, got ", offset);
  TINIT_CHECK(run > 0, op, ": run must be > 0");
  int64_t rows = 1, entries = 0;
  for (const int64_t size : outer_sizes) {
    TINIT_CHECK(size > 0, op, ": outer sizes must be > 0");
    TINIT_CHECK(rows <= INT64_MAX / size, op, ": the outer sizes' product overflows int64");
    rows *= size;
    entries += size;
  }
  TINIT_CHECK(rows <= INT64_MAX / run && rows * run == self.numel(), op, ": ", rows, " runs of ", run,
              " elements do not cover the ", self.numel(), " of the tensor");
  TINIT_CHECK(entries == static_cast<int64_t>(outer_starts.size()), op, ": expected ", entries, " outer starts, got ",
              outer_starts.size());
  int64_t last = offset;
  const int64_t* start = outer_starts.data();
  for (const int64_t size : outer_sizes) {
    int64_t top = 0;
    for (int64_t i = 0; i < size; ++i, ++start) {
      TINIT_CHECK(*start >= 0, op, ": outer starts must be >= 0");
      top = std::max(top, *start);
    }
    TINIT_CHECK(top <= INT64_MAX - last, op, ": offset + outer starts + run must not exceed 2^63");
    last += top;
  }
  TINIT_CHECK(run - 1 <= INT64_MAX - last, op, ": offset + outer starts + run must not exceed 2^63");
  return rows;
}

}  // namespace tinit
