// Prototype, not the stream: the CPU entries of the two-sided modes with
// ndtri_mantissa.h's inverse (proto_avx512.cpp, proto_avx2.cpp), the shape
// of two_sided_avx512 and two_sided_avx2; fp32 and bf16.
#pragma once

#include "tinit/fp_contract.h"
// (first: contraction off)

#include <c10/core/ScalarType.h>

#include "cpu/transform_kernels.h"

namespace tinit {
namespace proto {

// The entry for `dtype` (kFloat, kBFloat16) in kTwoSided (precise = false)
// or kTwoSidedPrecise; nullptr for other dtypes or without the ISA's build.
cpu::ChunkFn two_sided_mantissa_avx512(c10::ScalarType dtype, bool precise);
cpu::ChunkFn two_sided_mantissa_avx2(c10::ScalarType dtype, bool precise);

}  // namespace proto
}  // namespace tinit
