// CPU implementations of tinit::trunc_normal_grouped_ and
// trunc_normal_grouped_runs_: many tensors in one call, each from its own
// (stream, offset) and constants, and for the runs op each laid out as
// trunc_normal_runs_ lays out one tensor (a shard split along an inner dim).
// Its other backends, callers, tests and benchmarks: CONTRIBUTING.md, "Where each op lives".
//
// The tensors' elements are laid end to end and torch::stable::parallel_for splits that
// range, so a model's thousands of small tensors share the threads and pay
// one dispatch, not one each. Each element's value is the one
// tinit::trunc_normal_ gives it alone: the word of element j of tensor t is
// the stream word offsets[t] + j of (seed, streams[t]).
#include "tinit/fp_contract.h"
// (first: contraction off)

#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/util/HeaderOnlyArrayRef.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "tinit/check.h"
#include "../checks.h"
#include "denormal_guard.h"
#include "run_map.h"
#include "stream_words.h"
#include "transform_kernels.h"

namespace tinit {
namespace cpu {
namespace {

using torch::headeronly::HeaderOnlyArrayRef;
using torch::stable::Tensor;

struct Entry {
  char* out;
  RunMap map;
  ChunkTransform tf;
};

// Writes every entry; first[t] is where tensor t's element 0 sits in the
// elements laid end to end (first.back(): all of them).
void fill_entries(const std::vector<Entry>& entries, const std::vector<int64_t>& first,
                  HeaderOnlyArrayRef<int64_t> streams, uint64_t seed) {
  torch::stable::parallel_for(0, first.back(), kGrain, [&](int64_t begin, int64_t end) {
    const DenormalGuard gradual_underflow;  // this worker's FTZ/DAZ off, restored on exit
    alignas(64) uint32_t storage[kWordBuffer];
    alignas(64) uint32_t scratch[kScratch];
    // The last tensor starting at or before `begin`.
    auto t = std::upper_bound(first.begin(), first.end() - 1, begin) - first.begin() - 1;
    for (; begin < end; ++t) {
      const Entry& e = entries[t];
      const int64_t stop = std::min(end, first[t + 1]);
      const auto stream = static_cast<uint64_t>(streams[t]);
      for (int64_t j = begin - first[t]; j < stop - first[t]; j += kChunk) {
        const int64_t m = std::min(kChunk, stop - first[t] - j);
        char* out = e.out + j * e.tf.elem_size;
        uint32_t* buf = storage + word_shift_from(storage, out);
        e.tf.run(out, gather_words(e.map, j, m, seed, stream, buf, scratch), m);
      }
      begin = stop;
    }
  });
}

void trunc_normal_grouped_cpu(const std::vector<Tensor>& tensors, int64_t seed, HeaderOnlyArrayRef<int64_t> streams,
                              HeaderOnlyArrayRef<int64_t> offsets, HeaderOnlyArrayRef<double> transforms) {
  // The record's checks and its fp32 conversion (subnormal bounds, scale) on this thread too.
  const DenormalGuard gradual_underflow;
  const char* op = "tinit::trunc_normal_grouped_";
  const auto n = static_cast<int64_t>(tensors.size());
  check_grouped_lists(n, streams, offsets, transforms, op);
  std::vector<Entry> entries;
  std::vector<int64_t> first{0};  // first[t]: position of tensor t's element 0
  entries.reserve(n);
  for (int64_t t = 0; t < n; ++t) {
    const Tensor& x = tensors[t];
    const Where where{op, t};
    const double* packed = transforms.data() + t * kParamCount;
    check_target(x, torch::headeronly::DeviceType::CPU, where);
    check_offset(offsets[t], x.numel(), where);
    check_record(packed, where);
    check_dtype(x, where);
    entries.push_back({static_cast<char*>(x.mutable_data_ptr()),
                       RunMap::contiguous(static_cast<uint64_t>(offsets[t]), x.numel()),
                       make_chunk_transform(x.scalar_type(), packed, op)});
    first.push_back(first.back() + x.numel());
  }
  fill_entries(entries, first, streams, static_cast<uint64_t>(seed));
}

// Tensor t: rows of runs[t] elements from stream index offsets[t], its
// outer_dims[t] outer sizes the next ones of outer_sizes, their starts the
// next ones of outer_starts (trunc_normal_runs_'s layout, lists concatenated).
void trunc_normal_grouped_runs_cpu(const std::vector<Tensor>& tensors, int64_t seed,
                                   HeaderOnlyArrayRef<int64_t> streams, HeaderOnlyArrayRef<int64_t> offsets,
                                   HeaderOnlyArrayRef<int64_t> runs, HeaderOnlyArrayRef<int64_t> outer_dims,
                                   HeaderOnlyArrayRef<int64_t> outer_sizes, HeaderOnlyArrayRef<int64_t> outer_starts,
                                   HeaderOnlyArrayRef<double> transforms) {
  // The record's checks and its fp32 conversion (subnormal bounds, scale) on this thread too.
  const DenormalGuard gradual_underflow;
  const char* op = "tinit::trunc_normal_grouped_runs_";
  const auto n = static_cast<int64_t>(tensors.size());
  check_grouped_lists(n, streams, offsets, transforms, op);
  TINIT_CHECK(static_cast<int64_t>(runs.size()) == n && static_cast<int64_t>(outer_dims.size()) == n, op,
              ": expected one run and one outer dim count per tensor, got ", n, " tensors, ", runs.size(), " runs and ",
              outer_dims.size(), " outer dim counts");
  std::vector<Entry> entries;
  std::vector<int64_t> first{0};
  entries.reserve(n);
  size_t dim_at = 0, start_at = 0;
  for (int64_t t = 0; t < n; ++t) {
    const Tensor& x = tensors[t];
    const Where where{op, t};
    const double* packed = transforms.data() + t * kParamCount;
    check_target(x, torch::headeronly::DeviceType::CPU, where);
    check_record(packed, where);
    check_dtype(x, where);
    TINIT_CHECK(outer_dims[t] >= 0 && static_cast<size_t>(outer_dims[t]) <= outer_sizes.size() - dim_at, op,
                ": tensor ", t, ": ", outer_dims[t], " outer dims, ", outer_sizes.size() - dim_at, " sizes left");
    const HeaderOnlyArrayRef<int64_t> sizes = outer_sizes.slice(dim_at, outer_dims[t]);
    dim_at += sizes.size();
    size_t count = 0;
    for (const int64_t size : sizes) {
      TINIT_CHECK(size > 0 && static_cast<size_t>(size) <= outer_starts.size() - start_at - count, op, ": tensor ", t,
                  ": outer size ", size, " is not > 0 or exceeds the starts left");
      count += static_cast<size_t>(size);
    }
    const HeaderOnlyArrayRef<int64_t> starts = outer_starts.slice(start_at, count);
    start_at += count;
    if (x.numel() == 0) {
      entries.push_back({nullptr, RunMap::contiguous(0, 0), make_chunk_transform(x.scalar_type(), packed, op)});
    } else {
      entries.push_back({static_cast<char*>(x.mutable_data_ptr()), runs_map(x, offsets[t], runs[t], sizes, starts, op),
                         make_chunk_transform(x.scalar_type(), packed, op)});
    }
    first.push_back(first.back() + x.numel());
  }
  TINIT_CHECK(dim_at == outer_sizes.size() && start_at == outer_starts.size(), op, ": ", outer_sizes.size() - dim_at,
              " outer sizes and ", outer_starts.size() - start_at, " outer starts belong to no tensor");
  fill_entries(entries, first, streams, static_cast<uint64_t>(seed));
}

}  // namespace

STABLE_TORCH_LIBRARY_IMPL(tinit, CPU, m) {
  m.impl("trunc_normal_grouped_", TORCH_BOX(&trunc_normal_grouped_cpu));
  m.impl("trunc_normal_grouped_runs_", TORCH_BOX(&trunc_normal_grouped_runs_cpu));
}

}  // namespace cpu
}  // namespace tinit
