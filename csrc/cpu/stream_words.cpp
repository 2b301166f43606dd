// Philox words for the CPU kernels (see stream_words.h): the engine of
// isa.h, and the run map of shards.
#include "tinit/fp_contract.h"
// (first: contraction off)

#include "stream_words.h"

#include <algorithm>

#include "isa.h"
#include "philox_x86.h"
#include "tinit/philox.h"

namespace tinit {
namespace cpu {
namespace {

using BlocksFn = void (*)(uint32_t*, uint64_t, int64_t, uint64_t, uint64_t);

void philox_blocks_scalar(uint32_t* out, uint64_t blk0, int64_t nblk, uint64_t seed, uint64_t stream) {
  for (int64_t b = 0; b < nblk; ++b) {
    philox_block(seed, stream, blk0 + static_cast<uint64_t>(b), out + 4 * b);
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
template <int Lanes, void (*Groups)(uint32_t*, uint64_t, int64_t, uint64_t, uint64_t)>
void philox_blocks_simd(uint32_t* out, uint64_t blk0, int64_t nblk, uint64_t seed, uint64_t stream) {
  // The vector kernels keep the high counter word fixed, so stop a group
  // short of a 2^32-block boundary and let the scalar loop cross it.
  const uint64_t to_wrap = (uint64_t{1} << 32) - (blk0 & 0xffffffffu);
  int64_t groups = nblk / Lanes;
  if (static_cast<uint64_t>(groups) * Lanes > to_wrap) groups = to_wrap / Lanes;
  Groups(out, blk0, groups, seed, stream);
  const int64_t done = groups * Lanes;
  philox_blocks_scalar(out + 4 * done, blk0 + done, nblk - done, seed, stream);
}
#endif

BlocksFn blocks_fn(Isa isa) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (isa == Isa::kAvx512) return &philox_blocks_simd<8, x86::philox_blocks_avx512>;
  if (isa == Isa::kAvx2) return &philox_blocks_simd<8, x86::philox_blocks_avx2>;
#endif
  (void)isa;
  return &philox_blocks_scalar;
}

// The engine's kernel, fixed at the first call (the ops call chosen_isa
// before any worker thread runs, so a bad TINIT_CPU_ISA is refused there).
void philox_blocks(uint32_t* out, uint64_t blk0, int64_t nblk, uint64_t seed, uint64_t stream) {
  static const BlocksFn fn = blocks_fn(chosen_isa());
  fn(out, blk0, nblk, seed, stream);
}

}  // namespace

int stream_blocks(uint32_t* buf, uint64_t first, int64_t count, uint64_t seed, uint64_t stream) {
  const int skip = static_cast<int>(first & 3u);
  philox_blocks(buf, first >> 2, (skip + count + 3) >> 2, seed, stream);
  return skip;
}

RunMap RunMap::contiguous(uint64_t offset, int64_t numel) {
  RunMap map;
  map.base = offset;
  map.run = std::max<int64_t>(numel, 1);
  return map;
}

uint64_t RunMap::run_start(int64_t r) const {
  uint64_t s = base;
  for (int64_t k = static_cast<int64_t>(sizes.size()) - 1; k >= 0; --k) {
    const int64_t i = r % sizes[k];
    r /= sizes[k];
    s += static_cast<uint64_t>(starts[table_begin[k] + i]);
  }
  return s;
}

const uint32_t* gather_words(const RunMap& map, int64_t j, int64_t m, uint64_t seed, uint64_t stream, uint32_t* buf,
                             uint32_t* scratch) {
  const int64_t r = j / map.run, t = j % map.run;
  if (t + m <= map.run) {  // one run: the words are consecutive
    return buf + stream_blocks(buf, map.run_start(r) + t, m, seed, stream);
  }
  // Runs shorter than the chunk (a shard split along an inner dim): each
  // run's words land after the previous one's.
  for (int64_t done = 0; done < m;) {
    const int64_t jr = (j + done) / map.run, jt = (j + done) % map.run;
    const int64_t seg = std::min(map.run - jt, m - done);
    const int skip = stream_blocks(scratch, map.run_start(jr) + jt, seg, seed, stream);
    std::copy(scratch + skip, scratch + skip + seg, buf + done);
    done += seg;
  }
  return buf;
}

}  // namespace cpu
}  // namespace tinit
