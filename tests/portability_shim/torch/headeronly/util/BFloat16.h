// Torch-free stand-in for torch/headeronly's BFloat16 (c10::BFloat16, also
// named torch::headeronly::BFloat16), for the portability harness: the storage
// and the from_bits constructor, the only parts the CPU kernel sources use
// (they round with tinit::float_to_bf16_bits themselves).
#pragma once

#include <cstdint>

namespace c10 {

struct alignas(2) BFloat16 {
  uint16_t x;
  struct from_bits_t {};
  static constexpr from_bits_t from_bits() { return from_bits_t(); }
  BFloat16() = default;
  constexpr BFloat16(uint16_t bits, from_bits_t) : x(bits) {}
};

}  // namespace c10

namespace torch {
namespace headeronly {
using c10::BFloat16;
}  // namespace headeronly
}  // namespace torch
