// Hand-vectorised AVX-512 entries of the two-sided transform modes for
// float-compute dtypes (fp32, bf16, fp16), bit-identical to the portable
// entries of transform_kernels.cpp. Compiled with a target attribute and used
// by the avx512 engine only (isa.h), so the default build stays portable.
#pragma once

#include "tinit/fp_contract.h"
// (first: contraction off)

#include "transform_kernels.h"

namespace tinit {
namespace cpu {

// The entry for `dtype` (Float, BFloat16, Half) in kTwoSided
// (precise = false) or kTwoSidedPrecise; nullptr for other dtypes.
ChunkFn two_sided_avx512(ScalarType dtype, bool precise);

}  // namespace cpu
}  // namespace tinit
