// Torch-free stand-in for c10::ScalarType, for the portability harness: just
// the dtypes and helpers the CPU kernel sources use (make_chunk_transform, two_sided_avx512), with c10's values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>

namespace c10 {

enum class ScalarType : int8_t { Half = 5, Float = 6, Double = 7, BFloat16 = 15 };
constexpr ScalarType kHalf = ScalarType::Half;
constexpr ScalarType kFloat = ScalarType::Float;
constexpr ScalarType kDouble = ScalarType::Double;
constexpr ScalarType kBFloat16 = ScalarType::BFloat16;

inline size_t elementSize(ScalarType t) {
  switch (t) {
    case kFloat:
      return 4;
    case kDouble:
      return 8;
    default:
      return 2;
  }
}

inline std::ostream& operator<<(std::ostream& os, ScalarType t) {
  switch (t) {
    case kHalf:
      return os << "Half";
    case kFloat:
      return os << "Float";
    case kDouble:
      return os << "Double";
    case kBFloat16:
      return os << "BFloat16";
  }
  return os << "ScalarType(" << static_cast<int>(t) << ")";
}

}  // namespace c10
