// Stream words for the CPU kernels: which Philox words a chunk of a tensor
// needs, for contiguous tensors and for shards of a larger logical tensor.
//
// A tensor is seen as rows of `run` elements; each run is a contiguous
// range of stream indices. The run start is `base` plus one table entry per
// outer dim (a local shard of a row-major global tensor: the entries are
// global index x global stride). A contiguous tensor is one run. So the
// word of local element j is the stream word of index
//   base + sum_k starts_k[i_k(j / run)] + j % run          (tinit::philox_block)
// whatever the thread, chunk or grouping.
#pragma once

#include "tinit/fp_contract.h"
// (first: contraction off)

#include <cstdint>
#include <vector>

namespace tinit {
namespace cpu {

constexpr int64_t kChunk = 1024;     // elements per inner step
constexpr int64_t kGrain = 1 << 15;  // torch::stable::parallel_for grain, elements

// Room gather_words needs in `buf`: a chunk, a block's worth of skipped
// words and the 4 KiB alias shift of word_shift_from.
constexpr int64_t kWordBuffer = kChunk + 64 + 4 + 1024;
constexpr int64_t kScratch = kChunk + 8;

// Words of the counter blocks covering stream indices [first, first + count)
// into buf; returns the position of word `first` in buf (0..3).
int stream_blocks(uint32_t* buf, uint64_t first, int64_t count, uint64_t seed, uint64_t stream);

struct RunMap {
  uint64_t base = 0;
  int64_t run = 1;                   // elements per run, > 0
  std::vector<int64_t> sizes;        // outer dims, row-major
  std::vector<int64_t> table_begin;  // where dim k's entries start in starts
  std::vector<int64_t> starts;       // stream-index contribution per position

  static RunMap contiguous(uint64_t offset, int64_t numel);
  uint64_t run_start(int64_t r) const;
};

// Pointer to the words of local elements [j, j + m), m <= kChunk: inside
// `buf` (kWordBuffer words); `scratch` (kScratch words) is used when the
// chunk crosses runs.
const uint32_t* gather_words(const RunMap& map, int64_t j, int64_t m, uint64_t seed, uint64_t stream, uint32_t* buf,
                             uint32_t* scratch);

// A 64-byte aligned word offset into a kWordBuffer buffer that puts it half a
// page away from `out`: a load and a store 4 KiB apart (modulo) falsely alias
// on x86 and would stall every iteration of the transform loop.
inline int64_t word_shift_from(const void* storage, const void* out) {
  const auto diff = reinterpret_cast<uintptr_t>(out) + 2048 - reinterpret_cast<uintptr_t>(storage);
  return static_cast<int64_t>((diff & 4095u) / 4) & ~int64_t{15};
}

}  // namespace cpu
}  // namespace tinit
