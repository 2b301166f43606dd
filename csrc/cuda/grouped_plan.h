// Host side of a grouped CUDA fill: which launch each output goes to, and the
// one table buffer all launches share (trunc_normal_grouped_kernel.h).
//
// Torch-free C++ so that the binding (trunc_normal_grouped.cpp) and the host
// emulation harness (tests/cuda_grouped_host_harness.cu) build their tables
// with the same code; validating the arguments is the caller's job (the pack
// only refuses what would make the kernel write out of bounds).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "trunc_normal_grouped_kernel.h"

namespace tinit {
namespace cuda {

struct GroupPlan {
  struct Group {
    std::vector<TinitGroupEntry> entries;
    std::vector<TinitTransformParams> params;
    size_t table_offset = 0;  // in the shared buffer, set by layout()
    int64_t chunks = 0;       // set by pack()
  };
  // One launch per kind present, indexed by TinitGroupKind, in that order.
  Group groups[TINIT_GROUP_KINDS];

  // `numel` elements of `kind` at `data`, with the kParamCount constants at
  // `packed` (nullptr for words). Zero-element outputs need no entry.
  void add(TinitGroupKind kind, void* data, int64_t numel, uint64_t stream, uint64_t offset, const double* packed) {
    if (numel == 0) return;
    Group& g = groups[kind];
    g.entries.push_back({data, numel, stream, offset, params_index(g, packed)});
  }

  // The rows of a shard laid out as runs (tinit_runs_entries), all with the
  // constants at `packed` (nullptr for words).
  cudaError_t add_runs(TinitGroupKind kind, void* data, size_t elem_size, int64_t rows, uint64_t stream,
                       uint64_t offset, int64_t run, const int64_t* outer_sizes, int64_t dims,
                       const int64_t* outer_starts, const double* packed) {
    if (rows == 0) return cudaSuccess;
    Group& g = groups[kind];
    const int64_t index = params_index(g, packed);
    const size_t first = g.entries.size();
    g.entries.resize(first + static_cast<size_t>(rows));
    return tinit_runs_entries(g.entries.data() + first, rows, data, elem_size, stream, offset, run, outer_sizes, dims,
                              outer_starts, index);
  }

  bool empty() const {
    for (const Group& g : groups) {
      if (!g.entries.empty()) return false;
    }
    return true;
  }

  // Places the groups' tables end to end; returns the buffer's size in bytes.
  size_t layout() {
    size_t bytes = 0;
    for (int k = 0; k < TINIT_GROUP_KINDS; ++k) {
      Group& g = groups[k];
      if (g.entries.empty()) continue;
      g.table_offset = bytes;
      bytes += tinit_grouped_table_bytes(static_cast<TinitGroupKind>(k), count(g.entries), count(g.params));
    }
    return bytes;
  }

  // Packs every group into `buffer` (layout()'s size, 8-byte aligned).
  cudaError_t pack(void* buffer) {
    for (int k = 0; k < TINIT_GROUP_KINDS; ++k) {
      Group& g = groups[k];
      if (g.entries.empty()) continue;
      const cudaError_t err =
          tinit_grouped_pack(static_cast<char*>(buffer) + g.table_offset, static_cast<TinitGroupKind>(k),
                             g.entries.data(), count(g.entries), g.params.data(), count(g.params), &g.chunks);
      if (err != cudaSuccess) return err;
    }
    return cudaSuccess;
  }

 private:
  template <typename V>
  static int64_t count(const V& v) {
    return static_cast<int64_t>(v.size());
  }

  // A model's consecutive tensors mostly share their constants: reusing the
  // last set keeps the table (and its copy) small without a lookup.
  static int64_t params_index(Group& g, const double* packed) {
    if (packed == nullptr) return 0;
    if (g.params.empty() || std::memcmp(g.params.back().packed, packed, sizeof(TinitTransformParams)) != 0) {
      TinitTransformParams p;
      std::memcpy(p.packed, packed, sizeof(p.packed));
      g.params.push_back(p);
    }
    return count(g.params) - 1;
  }
};

}  // namespace cuda
}  // namespace tinit
