// Grouped CUDA kernels, and the functions of GroupedLaunch (launch.h):
// grouped_table_bytes, pack_grouped, launch_grouped and runs_outputs. Many
// outputs (a model's tensors, or the rows of an inner-dim shard) in one
// launch per element type, as NVIDIA apex's multi_tensor_apply does, but with
// a table that stays O(entries) however large the tensors are (apex's
// per-block table is O(elements)).
// Its other backends, callers, tests and benchmarks: CONTRIBUTING.md, "Where each op lives".
//
// Table (one host-packed buffer, copied to the device before the launch):
//   entries[n]     GroupEntry: output pointer, numel, stream, offset, index
//                  of its constants, whether its units take vector stores
//   chunk_end[n]   inclusive prefix sums of the entries' chunk counts
//   params[m]      TruncNormalParams<T>, converted once on the host
// Each entry's units (Philox blocks, trunc_normal_device.cuh) are cut into
// chunks of kChunkUnits, numbered across the entries in table order. The
// grid's warps split the chunks into contiguous, equal ranges (sizes differ
// by at most one chunk): a warp finds its first chunk's entry by one binary
// search over chunk_end, then walks its range in order, loading an entry's
// record and switching the transform mode once per entry it meets (never per
// chunk), and its lanes walk each entry's part with stride kLanes
// (consecutive lanes, consecutive vector stores). A warp, not a CUDA block,
// is the unit of work, so a model's many small tensors do not idle most of a
// block; the dtype is the kernel's template parameter, so one launch serves
// every mode. A unit's values are those of trunc_normal_kernel.cu for the
// same element: the same block_values/store_values, fed from the element's
// stream index, never from the chunk, the range, the grid or the batching.
#include <atomic>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "launch.h"
#include "trunc_normal_device.cuh"

namespace tinit {
namespace cuda {
namespace {

constexpr int kLanes = 32;
constexpr int kWarps = kThreads / kLanes;
// 1024 elements: the grain of the warps' ranges (8 units a lane), which bounds
// how far one warp's work may exceed another's; no longer a unit of set-up
// (a warp pays its search once, an entry its record once per range).
constexpr int64_t kChunkUnits = kLanes * 8;
constexpr size_t kSectionAlign = 64;

struct GroupEntry {
  void* out;
  int64_t numel;
  uint64_t stream;
  uint64_t offset;
  int32_t params;
  int32_t vec_ok;
};

// The table as the kernels read it (device pointers there, host pointers in
// the emulation harness).
struct GroupView {
  const GroupEntry* entries;
  const int64_t* chunk_end;
  const void* params;
  int64_t n;
  int64_t chunks;
};

size_t round_up(size_t bytes) { return (bytes + kSectionAlign - 1) / kSectionAlign * kSectionAlign; }

template <typename out_t>
constexpr size_t params_size() {
  return is_words<out_t> ? 0 : sizeof(TruncNormalParams<compute_t<out_t>>);
}

// Byte offsets of the sections after entries (at 0), and the total.
struct Sections {
  size_t chunk_end, params, bytes;
};

template <typename out_t>
bool sections(int64_t n, int64_t m, Sections* s) {
  // 2^40 entries would already be terabytes of table: refuse before overflow.
  if (n < 0 || m < 0 || n > (int64_t{1} << 40) || m > INT32_MAX) return false;
  s->chunk_end = round_up(static_cast<size_t>(n) * sizeof(GroupEntry));
  s->params = s->chunk_end + round_up(static_cast<size_t>(n) * sizeof(int64_t));
  s->bytes = s->params + round_up(static_cast<size_t>(m) * params_size<out_t>());
  return true;
}

template <typename out_t>
bool sections_of(const GroupedLaunch<out_t>& g, Sections* s) {
  return sections<out_t>(static_cast<int64_t>(g.outputs.size()), static_cast<int64_t>(g.params.size()), s);
}

GroupView view_of(const void* table, const Sections& s, int64_t n, int64_t chunks) {
  const auto* base = static_cast<const char*>(table);
  return {reinterpret_cast<const GroupEntry*>(base), reinterpret_cast<const int64_t*>(base + s.chunk_end),
          base + s.params, n, chunks};
}

// The entry chunk c belongs to: the first e with chunk_end[e] > c (entries
// without chunks repeat their predecessor's end and are never chosen).
TINIT_HD int64_t entry_of(const int64_t* chunk_end, int64_t n, int64_t c) {
  int64_t lo = 0, hi = n - 1;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (chunk_end[mid] > c) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

// Units [g0, g1) of entry e, this lane's share (stride kLanes).
template <typename out_t>
TINIT_HD void values_span(const GroupView& t, const PhiloxKeys& keys, const GroupEntry& e, int64_t g0, int64_t g1,
                          int lane) {
  using T = typename Out<out_t>::T;
  const TruncNormalParams<T> P = static_cast<const TruncNormalParams<T>*>(t.params)[e.params];
  auto* out = static_cast<out_t*>(e.out);
#if defined(__CUDA_ARCH__)
  // The table's pointers are global memory (GroupedLaunch::add takes CUDA
  // tensors): said so, the stores are STG rather than generic ST, which
  // would check the address window at every store.
  __builtin_assume(__isGlobal(out));
#endif
  const bool vec = e.vec_ok != 0;
  switch (kernel_mode(P)) {
    case kUniform:
      fill_blocks<out_t, kUniform>(out, e.numel, keys, e.stream, e.offset, P, vec, false, g0, g1, lane, kLanes);
      break;
    case kTwoSided:
      fill_blocks<out_t, kTwoSided>(out, e.numel, keys, e.stream, e.offset, P, vec, false, g0, g1, lane, kLanes);
      break;
    case kTwoSidedUnclamped:  // set for float compute only
      if constexpr (std::is_same<T, float>::value) {
        fill_blocks<out_t, kTwoSidedUnclamped>(out, e.numel, keys, e.stream, e.offset, P, vec, false, g0, g1, lane,
                                               kLanes);
      }
      break;
    case kTwoSidedPrecise:
      fill_blocks<out_t, kTwoSidedPrecise>(out, e.numel, keys, e.stream, e.offset, P, vec, false, g0, g1, lane, kLanes);
      break;
    default:  // kTail: GroupedLaunch::add refuses any other mode
      fill_blocks<out_t, kTail>(out, e.numel, keys, e.stream, e.offset, P, vec, false, g0, g1, lane, kLanes);
      break;
  }
}

// What thread `thread` of CUDA block `block` in a grid of `grid` blocks
// writes: out_t values, or the raw words for out_t = uint32_t. The kernels
// are this and nothing else, so the host harness runs exactly their code.
// Warp w of W takes chunks [w q + min(w, r), (w + 1) q + min(w + 1, r)),
// q = chunks / W, r = chunks % W.
template <typename out_t>
TINIT_HD void grouped_thread(const GroupView& t, const PhiloxKeys& keys, int64_t block, int thread, int64_t grid) {
  const int lane = thread % kLanes;
  const int64_t warps = grid * kWarps;
  const int64_t warp = block * kWarps + thread / kLanes;
  const int64_t q = t.chunks / warps, r = t.chunks % warps;
  int64_t c = warp * q + (warp < r ? warp : r);
  const int64_t c_end = c + q + (warp < r ? 1 : 0);
  if (c >= c_end) return;
  int64_t e = entry_of(t.chunk_end, t.n, c);
  int64_t first = e == 0 ? 0 : t.chunk_end[e - 1];  // entry e's chunks: [first, chunk_end[e])
  for (;;) {
    const int64_t last = t.chunk_end[e];
    const int64_t stop = last < c_end ? last : c_end;
    if (stop > c) {
      const GroupEntry& entry = t.entries[e];
      const int64_t units = block_count(entry.numel, entry.offset);
      const int64_t g0 = (c - first) * kChunkUnits;
      const int64_t g1 = (stop - first) * kChunkUnits < units ? (stop - first) * kChunkUnits : units;
      if constexpr (std::is_same<out_t, uint32_t>::value) {
        philox_fill_blocks(static_cast<uint32_t*>(entry.out), entry.numel, keys, entry.stream, entry.offset,
                           entry.vec_ok != 0, g0, g1, lane, kLanes);
      } else {
        values_span<out_t>(t, keys, entry, g0, g1, lane);
      }
      c = stop;
    }
    if (c >= c_end) return;
    first = last;
    ++e;
  }
}

// Occupancy: two CUDA blocks of 256 threads an SM (at most 128 registers a
// thread; 16 warps an SM, 4 a scheduler; 2112 warps on an H200's 132 SMs).
// The loop is issue-bound (about 42 instructions an element against 4 to 8
// bytes written), its only loads are ndtri rows that stay in L1 and its
// stores need no wait, and each lane carries four independent values a trip:
// four warps a scheduler cover the FMA and L1 latencies. More warps would
// cap registers at 64 and cost instructions in the loop.
template <typename out_t>
__global__ void __launch_bounds__(kThreads, 2) grouped_kernel(const GroupView t, const PhiloxKeys keys) {
  grouped_thread<out_t>(t, keys_in_registers(keys), blockIdx.x, threadIdx.x, gridDim.x);
}

}  // namespace

template <typename out_t>
size_t grouped_table_bytes(const GroupedLaunch<out_t>& group) {
  Sections s;
  return sections_of(group, &s) ? s.bytes : 0;
}

template <typename out_t>
cudaError_t pack_grouped(GroupedLaunch<out_t>& group, void* table) {
  Sections s;
  if (!sections_of(group, &s) || table == nullptr || reinterpret_cast<uintptr_t>(table) % 8 != 0) {
    return cudaErrorInvalidValue;
  }
  auto* base = static_cast<char*>(table);
  auto* dst = reinterpret_cast<GroupEntry*>(base);
  auto* chunk_end = reinterpret_cast<int64_t*>(base + s.chunk_end);
  const auto m = static_cast<int64_t>(group.params.size());
  int64_t chunks = 0;
  for (size_t i = 0; i < group.outputs.size(); ++i) {
    const GroupOutput& e = group.outputs[i];
    if (!valid_range(e.data, e.numel, e.offset)) return cudaErrorInvalidValue;
    if (!is_words<out_t> && (e.params_index < 0 || e.params_index >= m)) return cudaErrorInvalidValue;
    dst[i] = {e.data,
              e.numel,
              e.stream,
              e.offset,
              is_words<out_t> ? 0 : static_cast<int32_t>(e.params_index),
              vector_ok(static_cast<out_t*>(e.data), e.offset) ? 1 : 0};
    chunks += (block_count(e.numel, e.offset) + kChunkUnits - 1) / kChunkUnits;
    chunk_end[i] = chunks;
  }
  if (!is_words<out_t> && m > 0) std::memcpy(base + s.params, group.params.data(), m * params_size<out_t>());
  group.chunks = chunks;
  return cudaSuccess;
}

// Grid: one wave of resident blocks (fewer when there are fewer chunks than
// warps: one chunk a warp). Every warp of the launch then runs at once on its
// own contiguous range, and the ranges differ by one chunk at most (8 units a
// lane), so the launch ends within a chunk of the ideal whether the elements
// sit in one tensor, a few large ones beside many small ones, or thousands of
// equal ones; a second wave would only add a start-up and a tail. Set-up, in
// sm_90 SASS: about 225 instructions a warp, 22 a search step and 135 an
// entry it crosses; for 2^28 elements (3968 a lane on 2112 warps) under 0.2
// an element, even over 4096 tensors.
template <typename out_t>
cudaError_t launch_grouped(const GroupedLaunch<out_t>& group, const void* device_table, uint64_t seed,
                           cudaStream_t cuda_stream) {
  static std::atomic<int> cache[kMaxDevices];
  Sections s;
  if (group.chunks <= 0 || !sections_of(group, &s)) return cudaSuccess;
  const GroupView t = view_of(device_table, s, static_cast<int64_t>(group.outputs.size()), group.chunks);
  int grid = 0;
  const cudaError_t err = grid_size(&grouped_kernel<out_t>, cache, (group.chunks + kWarps - 1) / kWarps, &grid);
  if (err != cudaSuccess) return err;
  grouped_kernel<out_t><<<grid, kThreads, 0, cuda_stream>>>(t, philox_keys(seed));
  return cudaSuccess;
}

#define TINIT_GROUPED_TYPE(out_t)                                          \
  template size_t grouped_table_bytes<out_t>(const GroupedLaunch<out_t>&); \
  template cudaError_t pack_grouped<out_t>(GroupedLaunch<out_t>&, void*);  \
  template cudaError_t launch_grouped<out_t>(const GroupedLaunch<out_t>&, const void*, uint64_t, cudaStream_t);
TINIT_GROUPED_TYPE(float)
TINIT_GROUPED_TYPE(double)
TINIT_GROUPED_TYPE(__nv_bfloat16)
TINIT_GROUPED_TYPE(__half)
TINIT_GROUPED_TYPE(uint32_t)
#undef TINIT_GROUPED_TYPE

cudaError_t runs_outputs(GroupOutput* outputs, int64_t rows, void* data, size_t elem_size, uint64_t stream,
                         uint64_t offset, int64_t run, const int64_t* outer_sizes, int64_t dims,
                         const int64_t* outer_starts, int64_t params_index) {
  constexpr uint64_t kMaxIndex = uint64_t{1} << 63;
  if (run < 1 || dims < 0 || rows < 0 || offset >= kMaxIndex || elem_size == 0 ||
      (rows > 0 && (outputs == nullptr || data == nullptr)) ||
      (dims > 0 && (outer_sizes == nullptr || outer_starts == nullptr))) {
    return cudaErrorInvalidValue;
  }
  int64_t product = 1;
  std::vector<int64_t> first(static_cast<size_t>(dims));  // dim k's block in outer_starts
  for (int64_t k = 0, at = 0; k < dims; ++k) {
    const int64_t size = outer_sizes[k];
    if (size < 1 || product > INT64_MAX / size) return cudaErrorInvalidValue;
    product *= size;
    first[k] = at;
    at += size;
  }
  if (product != rows) return cudaErrorInvalidValue;
  // Odometer over (i_0, ...), last dim fastest: row r's indices, row-major.
  std::vector<int64_t> index(static_cast<size_t>(dims), 0);
  auto* bytes = static_cast<char*>(data);
  for (int64_t r = 0; r < rows; ++r) {
    uint64_t start = offset;
    for (int64_t k = 0; k < dims; ++k) {
      const int64_t add = outer_starts[first[k] + index[k]];
      // Both terms stay below 2^63, so the sum cannot wrap before the check.
      if (add < 0 || (start += static_cast<uint64_t>(add)) >= kMaxIndex) {
        return cudaErrorInvalidValue;
      }
    }
    outputs[r] = {bytes + static_cast<size_t>(r) * static_cast<size_t>(run) * elem_size, run, stream, start,
                  params_index};
    for (int64_t k = dims - 1; k >= 0 && ++index[k] == outer_sizes[k]; --k) index[k] = 0;
  }
  return cudaSuccess;
}

}  // namespace cuda
}  // namespace tinit
