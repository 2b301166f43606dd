// Per-block code shared by the CUDA kernels (trunc_normal_kernel.cu,
// trunc_normal_grouped_kernel.cu) and run on the host by the emulation
// harnesses under tests/: one copy of the indexing, so a kernel that fills one
// tensor and one that fills many cannot drift apart.
//
// Work unit g of a tensor is one Philox counter block, blk = offset / 4 + g,
// whose four words are the stream indices 4 blk .. 4 blk + 3, i.e. the tensor
// elements 4 g - offset % 4 .. + 3 (the stream itself: tinit::philox_block). A
// unit's four values are written with one vector store when its elements are
// aligned (always for offset % 4 == 0 and a 16-byte aligned tensor); when
// every unit straddles two vectors (a view or shard starting mid-vector),
// runs of consecutive units are realigned in registers (fill_runs_shifted);
// units that straddle the tensor's start or end store only their elements
// inside it. Free of torch headers; 64-bit indices.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <cstring>

#include "launch.h"
#include "tinit/philox.h"
#include "tinit/transform.h"

namespace tinit {
namespace cuda {
namespace {
constexpr int kThreads = 256;  // per CUDA block, every tinit kernel
constexpr int kMaxDevices = 64;

// Per output dtype: the compute type T (compute_t: fp32, or fp64 for fp64
// tensors), the rounding on store and the aligned store of one block's four
// values.
template <typename out_t>
struct Out;

template <>
struct Out<float> {
  using T = compute_t<float>;
  static TINIT_HD float cvt(float x) { return x; }
  static TINIT_HD void store4(float* p, const float v[4]) {
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
  }
};

template <>
struct Out<double> {
  using T = compute_t<double>;
  static TINIT_HD double cvt(double x) { return x; }
  static TINIT_HD void store4(double* p, const double v[4]) {
    reinterpret_cast<double2*>(p)[0] = make_double2(v[0], v[1]);
    reinterpret_cast<double2*>(p)[1] = make_double2(v[2], v[3]);
  }
};

template <>
struct Out<__nv_bfloat16> {
  using T = compute_t<__nv_bfloat16>;
  // Round to nearest even, as float_to_bf16_bits (transform.h) on the CPU.
  static TINIT_HD __nv_bfloat16 cvt(float x) { return __float2bfloat16_rn(x); }
  static TINIT_HD void store4(__nv_bfloat16* p, const float v[4]) {
    const __nv_bfloat162 lo = __floats2bfloat162_rn(v[0], v[1]);
    const __nv_bfloat162 hi = __floats2bfloat162_rn(v[2], v[3]);
    uint2 bits;
    bits.x = *reinterpret_cast<const uint32_t*>(&lo);
    bits.y = *reinterpret_cast<const uint32_t*>(&hi);
    *reinterpret_cast<uint2*>(p) = bits;
  }
};

template <>
struct Out<__half> {
  using T = compute_t<__half>;
  // Round to nearest even, as c10::Half(float) on the CPU.
  static TINIT_HD __half cvt(float x) { return __float2half_rn(x); }
  static TINIT_HD void store4(__half* p, const float v[4]) {
    const __half2 lo = __floats2half2_rn(v[0], v[1]);
    const __half2 hi = __floats2half2_rn(v[2], v[3]);
    uint2 bits;
    bits.x = *reinterpret_cast<const uint32_t*>(&lo);
    bits.y = *reinterpret_cast<const uint32_t*>(&hi);
    *reinterpret_cast<uint2*>(p) = bits;
  }
};

// Whether every block's four elements are aligned for a vector store: they
// start at out - offset % 4 + 4 g, which needs min(4 elements, 16 bytes).
template <typename out_t>
inline bool vector_ok(const out_t* out, uint64_t offset) {
  constexpr uintptr_t align = 4 * sizeof(out_t) < 16 ? 4 * sizeof(out_t) : 16;
  return (reinterpret_cast<uintptr_t>(out) - (offset & 3u) * sizeof(out_t)) % align == 0;
}

// 32 bits that depend on every bit of x (compute-only runs).
TINIT_HD uint32_t fold_bits(float x) { return float_as_bits(x); }
TINIT_HD uint32_t fold_bits(double x) {
#if defined(__CUDA_ARCH__)
  const auto u = static_cast<uint64_t>(__double_as_longlong(x));
#else
  uint64_t u;
  std::memcpy(&u, &x, sizeof(u));
#endif
  return static_cast<uint32_t>(u) ^ static_cast<uint32_t>(u >> 32);
}

// The grid of a launch of `kernel` that needs `needed` CUDA blocks: at most
// the blocks resident on the current device at once (one wave; the kernels'
// loops stride past it), cached per kernel and device. The occupancy query is
// host-only, so it is also safe while a CUDA graph is being captured.
template <typename Kernel>
inline cudaError_t grid_size(Kernel kernel, std::atomic<int>* cache, int64_t needed, int* grid) {
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  int resident = device < kMaxDevices ? cache[device].load(std::memory_order_relaxed) : 0;
  if (resident <= 0) {
    int sms = 0, per_sm = 0;
    err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    if (err != cudaSuccess) return err;
    err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, 0);
    if (err != cudaSuccess) return err;
    resident = sms * (per_sm > 0 ? per_sm : 1);
    if (device < kMaxDevices) cache[device].store(resident, std::memory_order_relaxed);
  }
  *grid = static_cast<int>(needed < resident ? needed : resident);
  return cudaSuccess;
}

// The round keys as register values: a kernel argument would otherwise be
// re-read from the constant bank inside the loop (ptxas rematerialises it
// there, an LDC or ULDC per key pair and trip), where the registers that the
// launch bounds leave free hold it for nothing. Values are unchanged.
TINIT_HD PhiloxKeys keys_in_registers(PhiloxKeys keys) {
#if defined(__CUDA_ARCH__)
#pragma unroll
  for (int round = 0; round < 10; ++round)
    asm volatile("prmt.b32 %0, %0, 0, 0x3210; prmt.b32 %1, %1, 0, 0x3210;"
                 : "+r"(keys.k0[round]), "+r"(keys.k1[round]));
#endif
  return keys;
}

// Number of Philox blocks that cover tensor elements [0, numel) starting at
// stream index offset.
TINIT_HD int64_t block_count(int64_t numel, uint64_t offset) {
  return (static_cast<int64_t>(offset & 3u) + numel + 3) >> 2;
}

// The four values of counter block `blk` (stream indices 4 blk .. 4 blk + 3).
template <typename out_t, int Mode>
TINIT_HD void block_values(const PhiloxKeys& keys, uint64_t stream, uint64_t blk,
                           const TruncNormalParams<typename Out<out_t>::T>& P, typename Out<out_t>::T v[4]) {
  using T = typename Out<out_t>::T;
  uint32_t w[4];
  philox_block(keys, stream, blk, w);
#pragma unroll
  for (int k = 0; k < 4; ++k) v[k] = trunc_normal_value<T, Mode>(w[k], P);
}

// Store the values of the block whose word 0 is tensor element `first`
// (negative, or past the end, for the blocks at the edges of the tensor).
template <typename out_t>
TINIT_HD void store_values(out_t* out, int64_t numel, int64_t first, bool vec_ok, const typename Out<out_t>::T v[4]) {
  if (vec_ok && first >= 0 && first + 4 <= numel) {
    Out<out_t>::store4(out + first, v);
    return;
  }
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const int64_t i = first + k;
    if (i >= 0 && i < numel) out[i] = Out<out_t>::cvt(v[k]);
  }
}

TINIT_HD void store_words(uint32_t* out, int64_t numel, int64_t first, bool vec_ok, const uint32_t w[4]) {
  if (vec_ok && first >= 0 && first + 4 <= numel) {
    *reinterpret_cast<uint4*>(out + first) = make_uint4(w[0], w[1], w[2], w[3]);
    return;
  }
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const int64_t i = first + k;
    if (i >= 0 && i < numel) out[i] = w[k];
  }
}

// Elements from the start of every unit to the next vector-store boundary
// when units are not aligned themselves (vec_ok false): 1..3 for 2- and 4-byte
// types, whose four-element vector (Out<out_t>::store4) the units straddle
// at a fixed shift; 0 where no shifted store applies (fp64, whose 16-byte
// store holds two elements, or a pointer that is not element-aligned).
template <typename out_t>
TINIT_HD int unit_shift(const out_t* out, uint64_t offset) {
  if (sizeof(out_t) > 4) return 0;
  const uintptr_t first = reinterpret_cast<uintptr_t>(out) - (offset & 3u) * sizeof(out_t);
  if (first % sizeof(out_t) != 0) return 0;
  const int mis = static_cast<int>((first % (4 * sizeof(out_t))) / sizeof(out_t));
  return mis == 0 ? 0 : 4 - mis;
}

// Units per run of the shifted path: a run of kRunUnits consecutive units
// is one thread's, so kRunUnits - 1 of its vectors straddle two of its own
// units; only the first A and last 4 - A elements of a run are stored one
// by one (kRunUnits + 3 stores per 4 kRunUnits elements instead of
// 4 kRunUnits).
constexpr int64_t kRunUnits = 4;

// Runs r, r + step, ... below r_end of units u0 + kRunUnits r ..., all
// interior, when every unit starts A elements before a vector boundary: a
// vector takes the last 4 - A values of one unit and the first A of the next.
template <typename out_t, int Mode, int A>
TINIT_HD void fill_runs_shifted(out_t* out, const PhiloxKeys& keys, uint64_t stream, uint64_t blk0, int64_t skip,
                                const TruncNormalParams<typename Out<out_t>::T>& P, int64_t u0, int64_t r,
                                int64_t r_end, int64_t step) {
  using T = typename Out<out_t>::T;
  for (; r < r_end; r += step) {
    const int64_t g = u0 + kRunUnits * r;
    out_t* run = out + (4 * g - skip);
    T v[4];
    block_values<out_t, Mode>(keys, stream, blk0 + static_cast<uint64_t>(g), P, v);
#pragma unroll
    for (int k = 0; k < A; ++k) run[k] = Out<out_t>::cvt(v[k]);
    T carry[4 - A];
#pragma unroll
    for (int k = 0; k < 4 - A; ++k) carry[k] = v[A + k];
#pragma unroll
    for (int64_t m = 1; m < kRunUnits; ++m) {
      block_values<out_t, Mode>(keys, stream, blk0 + static_cast<uint64_t>(g + m), P, v);
      T joined[4];
#pragma unroll
      for (int k = 0; k < 4 - A; ++k) joined[k] = carry[k];
#pragma unroll
      for (int k = 0; k < A; ++k) joined[4 - A + k] = v[k];
      Out<out_t>::store4(run + A + 4 * (m - 1), joined);
#pragma unroll
      for (int k = 0; k < 4 - A; ++k) carry[k] = v[A + k];
    }
#pragma unroll
    for (int k = 0; k < 4 - A; ++k) run[A + 4 * (kRunUnits - 1) + k] = Out<out_t>::cvt(carry[k]);
  }
}

// One thread's share of units [begin, end) of a tensor: begin + lane,
// begin + lane + step, ... (the whole tensor is [0, block_count(numel,
// offset)); a grouped kernel's chunk is a part of it). Returns the fold of
// the values it computed when compute_only (nothing is stored then), else 0.
// Interior units (all four elements inside the tensor) of a vector-aligned
// tensor take a loop with one unconditional vector store. Interior units of
// a tensor whose units straddle vector boundaries (unit_shift > 0) are taken
// in runs of kRunUnits by fill_runs_shifted. The at most two edge units, the
// units left over from whole runs, and fp64 tensors that are not aligned
// take store_values.
template <typename out_t, int Mode>
TINIT_HD uint32_t fill_blocks(out_t* out, int64_t numel, const PhiloxKeys& keys, uint64_t stream, uint64_t offset,
                              const TruncNormalParams<typename Out<out_t>::T>& P, bool vec_ok, bool compute_only,
                              int64_t begin, int64_t end, int64_t lane, int64_t step) {
  using T = typename Out<out_t>::T;
  const int64_t skip = static_cast<int64_t>(offset & 3u);
  const uint64_t blk0 = offset >> 2;
  uint32_t sink = 0;
  int64_t g = begin + lane;
  if (compute_only) {
    for (; g < end; g += step) {
      T v[4];
      block_values<out_t, Mode>(keys, stream, blk0 + static_cast<uint64_t>(g), P, v);
#pragma unroll
      for (int k = 0; k < 4; ++k) sink = (sink ^ fold_bits(v[k])) * 0x9E3779B1u;
    }
    return sink;
  }
  // Units [skip > 0, (numel + skip) / 4) hold four elements of the tensor.
  const int64_t interior_begin = skip > 0 ? 1 : 0;
  const int64_t interior_end = (numel + skip) >> 2;
  const int shift = vec_ok ? 0 : unit_shift(out, offset);
  if (!vec_ok && shift > 0) {
    // Runs cover [lo, lo + kRunUnits runs) of the interior part of this range;
    // the units before and after it take store_values below.
    const int64_t lo = begin > interior_begin ? begin : interior_begin;
    const int64_t hi = end < interior_end ? end : interior_end;
    const int64_t runs = hi > lo ? (hi - lo) / kRunUnits : 0;
    if (runs > 0) {
      if (shift == 1) {
        fill_runs_shifted<out_t, Mode, 1>(out, keys, stream, blk0, skip, P, lo, lane, runs, step);
      } else if (shift == 2) {
        fill_runs_shifted<out_t, Mode, 2>(out, keys, stream, blk0, skip, P, lo, lane, runs, step);
      } else {
        fill_runs_shifted<out_t, Mode, 3>(out, keys, stream, blk0, skip, P, lo, lane, runs, step);
      }
      const int64_t covered = lo + kRunUnits * runs;
      for (; g < lo; g += step) {
        T v[4];
        block_values<out_t, Mode>(keys, stream, blk0 + static_cast<uint64_t>(g), P, v);
        store_values<out_t>(out, numel, 4 * g - skip, false, v);
      }
      // This thread's first unit at or after `covered`.
      g += (covered - g + step - 1) / step * step;
    }
  }
  for (; g < end && g < interior_begin; g += step) {
    T v[4];
    block_values<out_t, Mode>(keys, stream, blk0 + static_cast<uint64_t>(g), P, v);
    store_values<out_t>(out, numel, 4 * g - skip, false, v);
  }
  if (vec_ok) {
    const int64_t stop = end < interior_end ? end : interior_end;
    if (g < stop) {
      // One induction variable, the counter block itself: the element offset
      // 4 g - skip = 4 blk - bias (mod 2^64, so an offset near 2^64 wraps
      // back exactly) folds into one address computation from blk, and the
      // loop test reads blk too: one instruction a trip fewer than carrying
      // g, blk0 + g and the element offset (sm_90 two-sided 41.75 -> 41.50
      // an element, bench/sass_budget.py).
      uint64_t blk = blk0 + static_cast<uint64_t>(g);
      const uint64_t blk_stop = blk0 + static_cast<uint64_t>(stop);
      const uint64_t bias = 4 * blk0 + static_cast<uint64_t>(skip);
      for (; blk < blk_stop; blk += static_cast<uint64_t>(step)) {
        T v[4];
        block_values<out_t, Mode>(keys, stream, blk, P, v);
        Out<out_t>::store4(out + static_cast<int64_t>(4 * blk - bias), v);
      }
      g = static_cast<int64_t>(blk - blk0);
    }
  }
  for (; g < end; g += step) {
    T v[4];
    block_values<out_t, Mode>(keys, stream, blk0 + static_cast<uint64_t>(g), P, v);
    store_values<out_t>(out, numel, 4 * g - skip, vec_ok, v);
  }
  return sink;
}

// The raw words of this thread's units of [begin, end), as fill_blocks (the
// interior of an aligned output with one unconditional vector store; no
// shifted runs: the words are for tests and benchmarks).
TINIT_HD void philox_fill_blocks(uint32_t* out, int64_t numel, const PhiloxKeys& keys, uint64_t stream, uint64_t offset,
                                 bool vec_ok, int64_t begin, int64_t end, int64_t lane, int64_t step) {
  int64_t g = begin + lane;
  const int64_t skip = static_cast<int64_t>(offset & 3u);
  const uint64_t blk0 = offset >> 2;
  const int64_t interior_begin = skip > 0 ? 1 : 0;
  const int64_t interior_end = (numel + skip) >> 2;
  for (; g < end && g < interior_begin; g += step) {
    uint32_t w[4];
    philox_block(keys, stream, blk0 + static_cast<uint64_t>(g), w);
    store_words(out, numel, 4 * g - skip, false, w);
  }
  if (vec_ok) {
    const int64_t stop = end < interior_end ? end : interior_end;
    for (; g < stop; g += step) {
      uint32_t w[4];
      philox_block(keys, stream, blk0 + static_cast<uint64_t>(g), w);
      *reinterpret_cast<uint4*>(out + (4 * g - skip)) = make_uint4(w[0], w[1], w[2], w[3]);
    }
  }
  for (; g < end; g += step) {
    uint32_t w[4];
    philox_block(keys, stream, blk0 + static_cast<uint64_t>(g), w);
    store_words(out, numel, 4 * g - skip, vec_ok, w);
  }
}

}  // namespace
}  // namespace cuda
}  // namespace tinit
