// The CPU transform (tinit::trunc_normal_value) over a chunk of words, one compiled
// entry per (dtype, mode), picked once per tensor. Type-erased so the fill,
// shard and grouped kernels share one set of SIMD clones.
#pragma once

#include "tinit/fp_contract.h"
// (first: contraction off)

#include <torch/headeronly/core/ScalarType.h>

#include <cstdint>
#include <string>

#include "isa.h"

#include "tinit/transform.h"

namespace tinit {
namespace cpu {

using ScalarType = torch::headeronly::ScalarType;

// Writes n values of the tensor's dtype to out from words w[0..n).
using ChunkFn = void (*)(void* out, const uint32_t* w, int64_t n, const void* params);

struct ChunkTransform {
  ChunkFn fn = nullptr;
  int64_t elem_size = 0;
  bool is_double = false;
  TruncNormalParams<float> pf;   // read by float-compute dtypes
  TruncNormalParams<double> pd;  // read by float64

  void run(void* out, const uint32_t* w, int64_t n) const {
    fn(out, w, n, is_double ? static_cast<const void*>(&pd) : &pf);
  }
};

// The transform for a tensor of `dtype` with the kParamCount packed
// constants of tinit.params.transform_constants. TINIT_CHECK-fails for other dtypes.
ChunkTransform make_chunk_transform(ScalarType dtype, const double* packed, const char* op);

// The engine of this process (isa.h), checked once by self_test_failure:
// TINIT_CHECK-fails, naming `op` and the cause, for a bad TINIT_CPU_ISA or a
// failed self-test (at this and every later call). make_chunk_transform calls it.
void require_cpu_engine(const char* op);

// Empty, or why the engine computes wrong values: the known answers of
// known_answers.h through its fp32 entries, and a subnormal product, under a
// DenormalGuard (as every fill runs).
std::string self_test_failure(Isa isa);

}  // namespace cpu
}  // namespace tinit
