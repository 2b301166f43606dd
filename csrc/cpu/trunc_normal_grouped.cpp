// CPU implementation of tinit::trunc_normal_grouped_: many tensors of one
// dtype in one call, each from its own (stream, offset) and constants.
// Its other backends, callers, tests and benchmarks: CONTRIBUTING.md, "Where each op lives".
//
// The tensors' elements are laid end to end and at::parallel_for splits that
// range, so a model's thousands of small tensors share the threads and pay
// one dispatch, not one each. Each element's value is the one
// tinit::trunc_normal_ gives it alone: the word of element j of tensor t is
// the stream word offsets[t] + j of (seed, streams[t]).
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "../checks.h"
#include "stream_words.h"
#include "transform_kernels.h"

namespace tinit {
namespace cpu {
namespace {

struct Entry {
  char* out;
  RunMap map;
  ChunkTransform tf;
};

void trunc_normal_grouped_cpu(at::TensorList tensors, int64_t seed, at::IntArrayRef streams, at::IntArrayRef offsets,
                              at::ArrayRef<double> transforms) {
  const char* op = "tinit::trunc_normal_grouped_";
  const auto n = static_cast<int64_t>(tensors.size());
  check_grouped_lists(n, streams, offsets, transforms, op);
  std::vector<Entry> entries;
  std::vector<int64_t> first{0};  // first[t]: position of tensor t's element 0
  entries.reserve(n);
  for (int64_t t = 0; t < n; ++t) {
    const at::Tensor& x = tensors[t];
    const Where where{op, t};
    const double* packed = transforms.data() + t * kParamCount;
    check_target(x, c10::DeviceType::CPU, where);
    check_offset(offsets[t], x.numel(), where);
    check_record(packed, where);
    check_dtype(x, where);
    entries.push_back({static_cast<char*>(x.data_ptr()),
                       RunMap::contiguous(static_cast<uint64_t>(offsets[t]), x.numel()),
                       make_chunk_transform(x.scalar_type(), packed, op)});
    first.push_back(first.back() + x.numel());
  }
  const auto seed_u = static_cast<uint64_t>(seed);
  at::parallel_for(0, first.back(), kGrain, [&](int64_t begin, int64_t end) {
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
        e.tf.run(out, gather_words(e.map, j, m, seed_u, stream, buf, scratch), m);
      }
      begin = stop;
    }
  });
}

}  // namespace

TORCH_LIBRARY_IMPL(tinit, CPU, m) { m.impl("trunc_normal_grouped_", &trunc_normal_grouped_cpu); }

}  // namespace cpu
}  // namespace tinit
