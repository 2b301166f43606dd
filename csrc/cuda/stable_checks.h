// The argument checks of checks.h (tinit::Where, check_target, ..., check_runs)
// over torch's stable ABI: torch::stable::Tensor, torch::headeronly::HeaderOnlyArrayRef
// and STD_TORCH_CHECK, for the CUDA bindings, whose built object imports no
// at::, c10:: or torch:: symbol. Same names, same arguments, same words, so
// that the same bad input is refused alike on every device
// (tests/test_native_refusals.py); the day checks.h itself moves to the stable
// API, this header is replaced by it.
#pragma once

#include "tinit/fp_contract.h"
// (first: contraction off)

#include <torch/csrc/stable/device.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/DeviceType.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>
#include <torch/headeronly/util/HeaderOnlyArrayRef.h>

#include <algorithm>
#include <cstdint>
#include <ostream>

#include "tinit/transform.h"

namespace tinit {

template <typename T>
using ArrayRef = torch::headeronly::HeaderOnlyArrayRef<T>;
using torch::headeronly::DeviceType;
using torch::headeronly::ScalarType;

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

// c10::DeviceTypeName's words for the device types a tensor handed to tinit
// may have; the stable ABI has no such function.
inline const char* device_type_name(DeviceType type, bool lower_case) {
  switch (type) {
    case DeviceType::CPU:
      return lower_case ? "cpu" : "CPU";
    case DeviceType::CUDA:
      return lower_case ? "cuda" : "CUDA";
    case DeviceType::HIP:
      return lower_case ? "hip" : "HIP";
    case DeviceType::XPU:
      return lower_case ? "xpu" : "XPU";
    case DeviceType::MPS:
      return lower_case ? "mps" : "MPS";
    case DeviceType::Meta:
      return lower_case ? "meta" : "META";
    case DeviceType::PrivateUse1:
      return lower_case ? "privateuseone" : "PRIVATEUSEONE";
    default:
      return lower_case ? "other" : "OTHER";
  }
}

// A device as at::Device streams it: "cpu", "cuda:1". (Its fields, not a
// torch::stable::Device, whose namespace has hidden visibility.)
struct DeviceName {
  explicit DeviceName(const torch::stable::Device& device)
      : type(device.type()), index(device.has_index() ? device.index() : -1) {}
  DeviceType type;
  int index;
};

inline std::ostream& operator<<(std::ostream& os, const DeviceName& name) {
  os << device_type_name(name.type, true);
  if (name.index >= 0) os << ':' << name.index;
  return os;
}

// A contiguous tensor of the binding's device type (kCPU, kCUDA).
inline void check_target(const torch::stable::Tensor& self, DeviceType device, const Where& where) {
  const torch::stable::Device on = self.device();
  STD_TORCH_CHECK(on.type() == device, where, " is on ", DeviceName{on}, "; expected a ",
                  device_type_name(device, false), " tensor");
  STD_TORCH_CHECK(self.is_contiguous(), where, " is not contiguous (tinit.ops copies views)");
}

// Stream indices offset .. offset + numel - 1 must fit in 63 bits: offset + numel <= 2^63, as
// tinit.fill and the Triton launchers allow.
inline void check_offset(int64_t offset, int64_t numel, const Where& where) {
  STD_TORCH_CHECK(offset >= 0, where, ": offset must be >= 0, got ", offset);
  STD_TORCH_CHECK(numel == 0 || numel - 1 <= INT64_MAX - offset, where, ": offset + numel must not exceed 2^63");
}

// What the kernels need of a record for memory safety (tinit::valid_params):
// a known mode (an unknown one would index past the mode table) and, in the
// two-sided modes, constants that keep every word's probability inside the
// ndtri table.
inline void check_record(const double* packed, const Where& where) {
  STD_TORCH_CHECK(valid_mode(packed[kPackedMode]), where, ": transform mode must be 0..", kModeCount - 1,
                  " (tinit.params.Mode), got ", packed[kPackedMode]);
  STD_TORCH_CHECK(valid_params(packed), where,
                  ": two-sided constants outside their range (tinit.params.transform_constants)");
}

inline void check_transform(ArrayRef<double> transform, const Where& where) {
  STD_TORCH_CHECK(static_cast<int64_t>(transform.size()) == kParamCount, where, ": expected ", kParamCount,
                  " transform constants (tinit.params.TruncNormalParams), got ", transform.size());
  check_record(transform.data(), where);
}

// The dtypes the kernels are built for; the bindings dispatch on the same four.
inline void check_dtype(const torch::stable::Tensor& self, const Where& where) {
  const ScalarType t = self.scalar_type();
  STD_TORCH_CHECK(
      t == ScalarType::Float || t == ScalarType::Double || t == ScalarType::BFloat16 || t == ScalarType::Half, where,
      ": unsupported dtype ", t, " (expected float32, float64, bfloat16 or float16)");
}

inline void check_words(const torch::stable::Tensor& self, const Where& where) {
  STD_TORCH_CHECK(self.scalar_type() == ScalarType::Int, where, ": expected an int32 tensor for the uint32 words, got ",
                  self.scalar_type());
}

// The list arguments of tinit::trunc_normal_grouped_: one stream, one offset
// and one record per tensor.
inline void check_grouped_lists(int64_t n, ArrayRef<int64_t> streams, ArrayRef<int64_t> offsets,
                                ArrayRef<double> transforms, const char* op) {
  STD_TORCH_CHECK(static_cast<int64_t>(streams.size()) == n && static_cast<int64_t>(offsets.size()) == n, op,
                  ": expected one stream and one offset per tensor, got ", n, " tensors, ", streams.size(),
                  " streams and ", offsets.size(), " offsets");
  STD_TORCH_CHECK(static_cast<int64_t>(transforms.size()) == n * kParamCount, op, ": expected ", kParamCount,
                  " transform constants per tensor (tinit.params.TruncNormalParams), ", n * kParamCount,
                  " in all, got ", transforms.size());
}

// The runs layout of tinit::trunc_normal_runs_ / philox_runs_ (prod(outer_sizes)
// rows of `run` elements; outer_starts holds, dim after dim, one stream index
// contribution per position of each outer dim), plus what the stream index
// needs: its last index, offset + the largest start of every outer dim +
// run - 1, must fit in 63 bits (the sum without the - 1 may reach 2^63).
// Returns the number of rows.
inline int64_t check_runs(const torch::stable::Tensor& self, int64_t offset, int64_t run, ArrayRef<int64_t> outer_sizes,
                          ArrayRef<int64_t> outer_starts, const char* op) {
  STD_TORCH_CHECK(offset >= 0, op, ": offset must be >= 0, got ", offset);
  STD_TORCH_CHECK(run > 0, op, ": run must be > 0");
  int64_t rows = 1, entries = 0;
  for (const int64_t size : outer_sizes) {
    STD_TORCH_CHECK(size > 0, op, ": outer sizes must be > 0");
    STD_TORCH_CHECK(rows <= INT64_MAX / size, op, ": the outer sizes' product overflows int64");
    rows *= size;
    entries += size;
  }
  STD_TORCH_CHECK(rows <= INT64_MAX / run && rows * run == self.numel(), op, ": ", rows, " runs of ", run,
                  " elements do not cover the ", self.numel(), " of the tensor");
  STD_TORCH_CHECK(entries == static_cast<int64_t>(outer_starts.size()), op, ": expected ", entries,
                  " outer starts, got ", outer_starts.size());
  int64_t last = offset;
  const int64_t* start = outer_starts.data();
  for (const int64_t size : outer_sizes) {
    int64_t top = 0;
    for (int64_t i = 0; i < size; ++i, ++start) {
      STD_TORCH_CHECK(*start >= 0, op, ": outer starts must be >= 0");
      top = std::max(top, *start);
    }
    STD_TORCH_CHECK(top <= INT64_MAX - last, op, ": offset + outer starts + run must not exceed 2^63");
    last += top;
  }
  STD_TORCH_CHECK(run - 1 <= INT64_MAX - last, op, ": offset + outer starts + run must not exceed 2^63");
  return rows;
}

}  // namespace tinit
