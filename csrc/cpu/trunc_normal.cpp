// CPU implementations of tinit::trunc_normal_, trunc_normal_runs_, philox_
// and philox_runs_.
// Its other backends, callers, tests and benchmarks: CONTRIBUTING.md, "Where each op lives".
//
// Work is split with torch::stable::parallel_for (at::parallel_for behind
// torch's stable ABI) over element ranges; each range is
// processed in chunks of kChunk elements: the Philox words of the chunk
// (stream_words.h), then the transform in the tensor's dtype
// (transform_kernels.h), then the store. The word for element j is a fixed
// stream word (tinit::philox_block), so results do not depend on the thread count
// or chunking.
#include "tinit/fp_contract.h"
// (first: contraction off)

#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/util/HeaderOnlyArrayRef.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "stream_words.h"
#include "tinit/check.h"
#include "tinit/philox.h"
#include "tinit/transform.h"
#include "../checks.h"
#include "denormal_guard.h"
#include "isa.h"
#include "run_map.h"
#include "transform_kernels.h"

namespace tinit {
namespace cpu {
namespace {

using torch::headeronly::HeaderOnlyArrayRef;
using torch::stable::Tensor;

void fill(const Tensor& self, uint64_t seed, uint64_t stream, const RunMap& map, const ChunkTransform& tf) {
  auto* base = static_cast<char*>(self.mutable_data_ptr());
  torch::stable::parallel_for(0, self.numel(), kGrain, [&](int64_t begin, int64_t end) {
    const DenormalGuard gradual_underflow;  // this worker's FTZ/DAZ off, restored on exit
    alignas(64) uint32_t storage[kWordBuffer];
    alignas(64) uint32_t scratch[kScratch];
    for (int64_t j = begin; j < end; j += kChunk) {
      const int64_t m = std::min(kChunk, end - j);
      char* out = base + j * tf.elem_size;
      uint32_t* buf = storage + word_shift_from(storage, out);
      tf.run(out, gather_words(map, j, m, seed, stream, buf, scratch), m);
    }
  });
}

void words(const Tensor& self, uint64_t seed, uint64_t stream, const RunMap& map) {
  auto* base = static_cast<uint32_t*>(self.mutable_data_ptr());  // int32, check_words
  torch::stable::parallel_for(0, self.numel(), kGrain, [&](int64_t begin, int64_t end) {
    alignas(64) uint32_t buf[kWordBuffer];
    alignas(64) uint32_t scratch[kScratch];
    for (int64_t j = begin; j < end; j += kChunk) {
      const int64_t m = std::min(kChunk, end - j);
      const uint32_t* w = gather_words(map, j, m, seed, stream, buf, scratch);
      std::copy(w, w + m, base + j);
    }
  });
}

void trunc_normal_cpu(const Tensor& self, int64_t seed, int64_t stream, int64_t offset,
                      HeaderOnlyArrayRef<double> transform) {
  // The record's checks and its fp32 conversion (subnormal bounds, scale) on this thread too.
  const DenormalGuard gradual_underflow;
  const Where where{"tinit::trunc_normal_"};
  check_target(self, torch::headeronly::DeviceType::CPU, where);
  check_transform(transform, where);
  check_offset(offset, self.numel(), where);
  check_dtype(self, where);
  const ChunkTransform tf = make_chunk_transform(self.scalar_type(), transform.data(), where.op);
  if (self.numel() == 0) return;
  fill(self, static_cast<uint64_t>(seed), static_cast<uint64_t>(stream),
       RunMap::contiguous(static_cast<uint64_t>(offset), self.numel()), tf);
}

void trunc_normal_runs_cpu(const Tensor& self, int64_t seed, int64_t stream, int64_t offset, int64_t run,
                           HeaderOnlyArrayRef<int64_t> outer_sizes, HeaderOnlyArrayRef<int64_t> outer_starts,
                           HeaderOnlyArrayRef<double> transform) {
  // The record's checks and its fp32 conversion (subnormal bounds, scale) on this thread too.
  const DenormalGuard gradual_underflow;
  const char* op = "tinit::trunc_normal_runs_";
  const Where where{op};
  check_target(self, torch::headeronly::DeviceType::CPU, where);
  check_transform(transform, where);
  check_dtype(self, where);
  const ChunkTransform tf = make_chunk_transform(self.scalar_type(), transform.data(), op);
  if (self.numel() == 0) return;
  fill(self, static_cast<uint64_t>(seed), static_cast<uint64_t>(stream),
       runs_map(self, offset, run, outer_sizes, outer_starts, op), tf);
}

void philox_cpu(const Tensor& self, int64_t seed, int64_t stream, int64_t offset) {
  const Where where{"tinit::philox_"};
  check_target(self, torch::headeronly::DeviceType::CPU, where);
  check_words(self, where);
  check_offset(offset, self.numel(), where);
  require_cpu_engine(where.op);
  if (self.numel() == 0) return;
  words(self, static_cast<uint64_t>(seed), static_cast<uint64_t>(stream),
        RunMap::contiguous(static_cast<uint64_t>(offset), self.numel()));
}

void philox_runs_cpu(const Tensor& self, int64_t seed, int64_t stream, int64_t offset, int64_t run,
                     HeaderOnlyArrayRef<int64_t> outer_sizes, HeaderOnlyArrayRef<int64_t> outer_starts) {
  const char* op = "tinit::philox_runs_";
  const Where where{op};
  check_target(self, torch::headeronly::DeviceType::CPU, where);
  check_words(self, where);
  require_cpu_engine(op);
  if (self.numel() == 0) return;
  words(self, static_cast<uint64_t>(seed), static_cast<uint64_t>(stream),
        runs_map(self, offset, run, outer_sizes, outer_starts, op));
}

std::vector<int64_t> philox_words_raw(HeaderOnlyArrayRef<int64_t> counter, HeaderOnlyArrayRef<int64_t> key) {
  TINIT_CHECK(counter.size() == 4 && key.size() == 2, "tinit::philox4x32_10: expected 4 counter and 2 key words");
  uint32_t c[4];
  for (int i = 0; i < 4; ++i) c[i] = static_cast<uint32_t>(counter[i]);
  philox4x32_10(c[0], c[1], c[2], c[3], static_cast<uint32_t>(key[0]), static_cast<uint32_t>(key[1]));
  return {c[0], c[1], c[2], c[3]};
}

std::vector<double> log_f64(HeaderOnlyArrayRef<double> x) {
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = log_pos(x[i]);
  return out;
}

std::string cpu_isa_op() {
  require_cpu_engine("tinit::cpu_isa");
  return isa_name(chosen_isa());
}

std::vector<std::string> cpu_isas_op() {
  std::vector<std::string> names;
  for (Isa isa : available_isas()) names.emplace_back(isa_name(isa));
  return names;
}

}  // namespace

// Device-independent: registered for every backend. TORCH_BOX unboxes each
// argument of the schema (int[] and float[] as a std::vector the
// HeaderOnlyArrayRef views) and boxes the int[], float[], str and str[] returns.
STABLE_TORCH_LIBRARY_IMPL(tinit, CompositeExplicitAutograd, m) {
  m.impl("philox4x32_10", TORCH_BOX(&philox_words_raw));
  m.impl("log_f64", TORCH_BOX(&log_f64));
  m.impl("cpu_isa", TORCH_BOX(&cpu_isa_op));
  m.impl("cpu_isas", TORCH_BOX(&cpu_isas_op));
}

STABLE_TORCH_LIBRARY_IMPL(tinit, CPU, m) {
  m.impl("trunc_normal_", TORCH_BOX(&trunc_normal_cpu));
  m.impl("trunc_normal_runs_", TORCH_BOX(&trunc_normal_runs_cpu));
  m.impl("philox_", TORCH_BOX(&philox_cpu));
  m.impl("philox_runs_", TORCH_BOX(&philox_runs_cpu));
}

}  // namespace cpu
}  // namespace tinit
