// The run map of a shard laid out as rows of `run` elements (the layout of
// tinit::trunc_normal_runs_, philox_runs_ and each tensor of
// trunc_normal_grouped_runs_), checked by check_runs.
#pragma once

#include "tinit/fp_contract.h"
// (first: contraction off)

#include <cstdint>

#include "../checks.h"
#include "stream_words.h"

namespace tinit {
namespace cpu {

// `outer_starts` holds, dim after dim, one stream index contribution per
// position of each outer dim.
template <typename Tensor>
RunMap runs_map(const Tensor& self, int64_t offset, int64_t run,
                torch::headeronly::HeaderOnlyArrayRef<int64_t> outer_sizes,
                torch::headeronly::HeaderOnlyArrayRef<int64_t> outer_starts, const char* op) {
  check_runs(self, offset, run, outer_sizes, outer_starts, op);
  RunMap map;
  map.base = static_cast<uint64_t>(offset);
  map.run = run;
  int64_t entries = 0;
  for (const int64_t size : outer_sizes) {
    map.sizes.push_back(size);
    map.table_begin.push_back(entries);
    entries += size;
  }
  map.starts.assign(outer_starts.begin(), outer_starts.end());
  return map;
}

}  // namespace cpu
}  // namespace tinit
