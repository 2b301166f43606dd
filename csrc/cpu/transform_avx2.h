// Hand-vectorised AVX2 (+FMA, F16C) entries of the two-sided transform modes
// for float-compute dtypes (fp32, bf16, fp16), bit-identical to the portable
// entries of transform_kernels.cpp. Compiled with a target attribute, chosen
// at run time (avx2_available) on CPUs where two_sided_avx512 is not taken.
#pragma once

#include "tinit/fp_contract.h"
// (first: contraction off)

#include <c10/core/ScalarType.h>

#include "transform_kernels.h"

namespace tinit {
namespace cpu {

// Whether this CPU runs the AVX2 entries (AVX2, FMA, F16C).
bool avx2_available();

// The entry for `dtype` (kFloat, kBFloat16, kHalf) in kTwoSided
// (precise = false) or kTwoSidedPrecise; nullptr for other dtypes.
ChunkFn two_sided_avx2(c10::ScalarType dtype, bool precise);

}  // namespace cpu
}  // namespace tinit
