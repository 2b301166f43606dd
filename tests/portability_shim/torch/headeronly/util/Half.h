// Torch-free stand-in for torch/headeronly's Half (c10::Half, also named
// torch::headeronly::Half), for the portability harness: the float -> half
// conversion as torch's, bit for bit. torch converts through the
// native float16_t on aarch64, and elsewhere (host code not compiled with
// -mf16c, as the extension is) with fp16_ieee_from_fp32_value, copied below
// from torch's Half.h (Maratyszcza's FP16 library, MIT licence).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace c10 {
namespace shim {

inline uint32_t fp32_to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

inline float fp32_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

inline uint16_t fp16_ieee_from_fp32_value(float f) {
  const float scale_to_inf = fp32_from_bits(uint32_t{239} << 23);  // 0x1.0p+112f
  const float scale_to_zero = fp32_from_bits(uint32_t{17} << 23);  // 0x1.0p-110f
  float base = (std::fabs(f) * scale_to_inf) * scale_to_zero;
  const uint32_t w = fp32_to_bits(f);
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & UINT32_C(0x80000000);
  uint32_t bias = shl1_w & UINT32_C(0xFF000000);
  if (bias < UINT32_C(0x71000000)) bias = UINT32_C(0x71000000);
  base = fp32_from_bits((bias >> 1) + UINT32_C(0x07800000)) + base;
  const uint32_t bits = fp32_to_bits(base);
  const uint32_t exp_bits = (bits >> 13) & UINT32_C(0x00007C00);
  const uint32_t mantissa_bits = bits & UINT32_C(0x00000FFF);
  const uint32_t nonsign = exp_bits + mantissa_bits;
  return static_cast<uint16_t>((sign >> 16) | (shl1_w > UINT32_C(0xFF000000) ? UINT16_C(0x7E00) : nonsign));
}

}  // namespace shim

struct alignas(2) Half {
  uint16_t x;
  Half() = default;
#if defined(__aarch64__)
  Half(float value) {  // NOLINT(google-explicit-constructor): c10's is implicit
    const __fp16 h = static_cast<__fp16>(value);
    std::memcpy(&x, &h, sizeof(x));
  }
#else
  Half(float value) : x(shim::fp16_ieee_from_fp32_value(value)) {}  // NOLINT(google-explicit-constructor)
#endif
};

}  // namespace c10

namespace torch {
namespace headeronly {
using c10::Half;
}  // namespace headeronly
}  // namespace torch
