// Torch-free stand-in for torch/headeronly's ScalarType (c10::ScalarType, also
// named torch::headeronly::ScalarType), for the portability harness: just the
// dtypes the CPU kernel sources use (make_chunk_transform, two_sided_avx512),
// with torch's values, and the stream output of their messages.
#pragma once

#include <cstdint>
#include <ostream>

namespace c10 {

enum class ScalarType : int8_t { Half = 5, Float = 6, Double = 7, BFloat16 = 15 };

inline std::ostream& operator<<(std::ostream& os, ScalarType t) {
  switch (t) {
    case ScalarType::Half:
      return os << "Half";
    case ScalarType::Float:
      return os << "Float";
    case ScalarType::Double:
      return os << "Double";
    case ScalarType::BFloat16:
      return os << "BFloat16";
  }
  return os << "ScalarType(" << static_cast<int>(t) << ")";
}

}  // namespace c10

namespace torch {
namespace headeronly {
using c10::ScalarType;
}  // namespace headeronly
}  // namespace torch
