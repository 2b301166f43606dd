// Prototype, not the stream: tinit::ndtri_table with every row in the
// mantissa variable (bench/proto_mantissa/README.md). Host and device code,
// beside transform.h, whose helpers it uses. No central special case: no q,
// no s >= 1/4 compare, no q * q, no select of the variable and no final
// q * p (ndtri_table_pair: no multiplier m). The table is
// TINIT_PROTO_MANTISSA_COEFFICIENTS (mantissa_fit.py): rows 3..5 (s in
// [1/4, 1/2] and the few s above 1/2 a rounding reaches) refitted in r, the
// others today's.
#pragma once

#include "tinit/fp_contract.h"
// (first: contraction off)

#include "ndtri_mantissa_table.h"
#include "tinit/transform.h"

namespace tinit {
namespace proto {

alignas(16) static constexpr float kMantissaHost[kNdtriSegments * kNdtriRow] = TINIT_PROTO_MANTISSA_COEFFICIENTS;

// The rows by bits(s) >> 22, as ndtri_by_top does for today's table.
constexpr NdtriByTop mantissa_by_top() {
  NdtriByTop r{};
  for (int row = 0; row < kNdtriSegments; ++row) {
    for (int k = 0; k < kNdtriRow; ++k)
      r.c[(kNdtriSegments - 1 - row) * kNdtriRow + k] = kMantissaHost[row * kNdtriRow + k];
  }
  return r;
}
alignas(16) static constexpr NdtriByTop kMantissaByTopHost = mantissa_by_top();
#if defined(__CUDACC__)
alignas(16) static __device__ const NdtriByTop kMantissaByTopDevice = mantissa_by_top();
#endif

// ndtri_row on the prototype's table (the same shift on the device).
TINIT_HD const float* mantissa_row(float s) {
#if defined(__CUDA_ARCH__)
  uint32_t top;
  asm("shr.b32 %0, %1, 22;" : "=r"(top) : "r"(float_as_bits(s)));
  return kMantissaByTopDevice.c + static_cast<uint64_t>(top) * kNdtriRow;
#else
  return kMantissaByTopHost.c + static_cast<uint64_t>(float_as_bits(s) >> 22) * kNdtriRow;
#endif
}

// r in [-1/4, 1/4) with s = 2^(E-127) (1.25 + r) or (1.75 + r), on every row.
TINIT_HD float mantissa_variable(float s, uint32_t one_bits) {
  return bits_as_float((float_as_bits(s) & 0x003fffffu) | one_bits) - 1.25f;
}

// Phi^-1(s), s in [2^-125, 1/2 + 2^-24]: z = P(r) on every row.
TINIT_HD float ndtri_mantissa(float s, uint32_t one_bits) {
  return ndtri_poly(mantissa_row(s), mantissa_variable(s, one_bits));
}

// The same z as the pair z_hi + z_lo (precise mode): ndtri_poly's pair as it stands.
TINIT_HD float ndtri_mantissa_pair(float s, float& z_lo, uint32_t one_bits) {
  return ndtri_poly(mantissa_row(s), mantissa_variable(s, one_bits), z_lo);
}

// two_sided_value with ndtri_mantissa. two_sided_s still forms q; nothing
// reads it, and the compilers drop it (the prototype's record would drop
// a_half and b_half).
template <bool Clamp = true>
TINIT_HD float two_sided_value(uint32_t w, const TruncNormalParams<float>& P) {
  bool lower;
  float q;
  const float s = two_sided_s(w ^ P.flip, P, lower, q);
  const float zl = ndtri_mantissa(s, P.one_bits);
  const float z = lower ? zl : -zl;
  const float x = fma_rn(P.sd_hi, z, fma_rn(P.sd_lo, z, P.mean));
  return Clamp ? clamp_to<float>(x, P) : x;
}

// two_sided_precise_value with ndtri_mantissa_pair.
TINIT_HD float two_sided_precise_value(uint32_t w, const TruncNormalParams<float>& P) {
  bool lower;
  float q;
  const float s = two_sided_s(w ^ P.flip, P, lower, q);
  float zl_lo;
  const float zl_hi = ndtri_mantissa_pair(s, zl_lo, P.one_bits);
  const float z_hi = lower ? zl_hi : -zl_hi;
  const float z_lo = lower ? zl_lo : -zl_lo;
  const float main = fma_rn(P.sd_hi, z_hi, P.mean);
  const float small = fma_rn(P.sd_hi, z_lo, P.sd_lo * z_hi);
  return clamp_to<float>(rescale<float>(main + small, P.scale), P);
}

}  // namespace proto
}  // namespace tinit
