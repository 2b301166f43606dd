// Hand-vectorised AVX2 (+FMA, F16C) entries of the two-sided transform modes
// for float-compute dtypes (fp32, bf16, fp16), bit-identical to the portable
// entries of transform_kernels.cpp. Compiled with a target attribute, chosen
// by the avx2 engine of isa.h (hand_two_sided in transform_kernels.cpp).
#pragma once

#include "tinit/fp_contract.h"
// (first: contraction off)

#include "transform_kernels.h"

namespace tinit {
namespace cpu {

// The entry for `dtype` (Float, BFloat16, Half) in kTwoSided
// (precise = false) or kTwoSidedPrecise; nullptr for other dtypes.
ChunkFn two_sided_avx2(ScalarType dtype, bool precise);

}  // namespace cpu
}  // namespace tinit
