// C-style launchers for the CUDA kernels of tinit (trunc_normal_kernel.cu).
//
// Free of torch: the torch binding (trunc_normal.cpp) and any plain CUDA
// program can call these. Every launcher runs asynchronously on `cuda_stream`
// on the current device, never synchronises the host (so it can be captured
// in a CUDA graph), and returns the error of its launch (cudaGetLastError
// right after it), or cudaErrorInvalidValue for bad arguments before any
// launch. The stream layout is defined once in tinit/philox.h.
#pragma once

#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Element type of the output buffer.
typedef enum TinitDtype {
  TINIT_FLOAT32 = 0,
  TINIT_FLOAT64 = 1,
  TINIT_BFLOAT16 = 2,
  TINIT_FLOAT16 = 3,
} TinitDtype;

// The packed transform constants of tinit/params.py, in the order of
// TruncNormalParams (tinit/transform.h): kParamCount doubles.
#define TINIT_PARAM_COUNT 24
typedef struct TinitTransformParams {
  double packed[TINIT_PARAM_COUNT];
} TinitTransformParams;

// Flags of tinit_trunc_normal_cuda.
// Compute every value but skip the stores (a data dependency keeps the
// arithmetic alive): the contents of `data` are then unspecified. For
// benchmarks only, to tell compute-bound from memory-bound cases.
#define TINIT_FLAG_COMPUTE_ONLY 1u

// Fill data[0 .. numel) with the truncated normal: element j takes stream
// index offset + j of (seed, stream). `data` is a device pointer to a
// contiguous buffer of `dtype` (any alignment of the element type);
// numel >= 0; offset + numel <= 2^63.
cudaError_t tinit_trunc_normal_cuda(void* data, int64_t numel, TinitDtype dtype, uint64_t seed, uint64_t stream,
                                    uint64_t offset, const TinitTransformParams* params, unsigned flags,
                                    cudaStream_t cuda_stream);

// Raw stream words: data[j] = word of stream index offset + j.
cudaError_t tinit_philox_cuda(uint32_t* data, int64_t numel, uint64_t seed, uint64_t stream, uint64_t offset,
                              cudaStream_t cuda_stream);

#ifdef __cplusplus
}  // extern "C"
#endif
