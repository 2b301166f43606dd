// Prototype, not the stream: the shipped single-tensor CUDA kernel
// (trunc_normal_kernel, included whole below, so its loop is the one
// bench/sass_budget.py counts) instantiated for three more modes whose
// values come from ndtri_mantissa.h. Compiled beside the shipped modes in
// one cubin by mantissa_sass.py, which counts both the same way.
#include "../../csrc/cuda/trunc_normal_kernel.cu"
// (the shipped kernel first: the prototype's modes specialise its templates)
#include "ndtri_mantissa.h"

namespace tinit {

// Past every shipped mode (kModeCount, kTwoSidedUnclamped).
constexpr int kMantissaTwoSided = 8;
constexpr int kMantissaUnclamped = 9;
constexpr int kMantissaPrecise = 10;

template <>
TINIT_HD float trunc_normal_value<float, kMantissaTwoSided>(uint32_t w, const TruncNormalParams<float>& P) {
  return proto::two_sided_value<true>(w, P);
}
template <>
TINIT_HD float trunc_normal_value<float, kMantissaUnclamped>(uint32_t w, const TruncNormalParams<float>& P) {
  return proto::two_sided_value<false>(w, P);
}
template <>
TINIT_HD float trunc_normal_value<float, kMantissaPrecise>(uint32_t w, const TruncNormalParams<float>& P) {
  return proto::two_sided_precise_value(w, P);
}

namespace cuda {

// launch_fill for the prototype's modes (float compute, two-sided records only).
template <typename out_t>
cudaError_t launch_mantissa(const FillLaunch<out_t>& launch, cudaStream_t cuda_stream) {
  if (launch.numel == 0) return cudaSuccess;
  switch (kernel_mode(launch.params)) {
    case kTwoSided:
      return launch_mode<out_t, kMantissaTwoSided>(launch, cuda_stream);
    case kTwoSidedUnclamped:
      return launch_mode<out_t, kMantissaUnclamped>(launch, cuda_stream);
    case kTwoSidedPrecise:
      return launch_mode<out_t, kMantissaPrecise>(launch, cuda_stream);
    default:
      return cudaErrorInvalidValue;
  }
}

template cudaError_t launch_mantissa<float>(const FillLaunch<float>&, cudaStream_t);
template cudaError_t launch_mantissa<__nv_bfloat16>(const FillLaunch<__nv_bfloat16>&, cudaStream_t);
template cudaError_t launch_mantissa<__half>(const FillLaunch<__half>&, cudaStream_t);

}  // namespace cuda
}  // namespace tinit
