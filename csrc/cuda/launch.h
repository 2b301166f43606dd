// What a tinit CUDA launch needs, as C++ structs (flash-attention's
// Flash_fwd_params is the model), and the launchers the kernels' .cu files
// define for them.
//
// Free of torch: the bindings (csrc/cuda/bindings.cpp) fill these structs
// from checked tensors; the host emulation harnesses under tests/ build the
// same structs over host buffers. The element type is a template parameter:
// float, double, __nv_bfloat16, __half, or uint32_t for the raw stream words
// (tinit::philox_block). The transform record is tinit::TruncNormalParams in
// the compute type of the element type (compute_t), converted once on the
// host with TruncNormalParams::from_packed.
//
// The launchers run asynchronously on `cuda_stream` on the current device and
// never synchronise the host, so a fill can be captured in a CUDA graph. They
// trust their arguments (the bindings check them first); what they return is
// the error of a host-side query before the launch, and the caller checks the
// launch itself (C10_CUDA_KERNEL_LAUNCH_CHECK).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <vector>

#include "tinit/transform.h"

namespace tinit {
namespace cuda {

// The type the transform computes in for an element type: double for fp64
// tensors, float for every other (the raw words ignore it).
template <typename out_t>
using compute_t = std::conditional_t<std::is_same<out_t, double>::value, double, float>;

template <typename out_t>
constexpr bool is_words = std::is_same<out_t, uint32_t>::value;

// The element types the .cu files instantiate their launchers for: any other
// would compile here and fail only at link time (ATen's c10::BFloat16 for
// __nv_bfloat16, say), so the launch structs refuse it.
template <typename out_t>
constexpr bool is_element =
    std::is_same<out_t, float>::value || std::is_same<out_t, double>::value ||
    std::is_same<out_t, __nv_bfloat16>::value || std::is_same<out_t, __half>::value || is_words<out_t>;

// Whether an output may be written from stream index `offset` on: the
// indices offset .. offset + numel - 1 must fit in 63 bits.
inline bool valid_range(const void* data, int64_t numel, uint64_t offset) {
  if (numel < 0 || offset > (uint64_t{1} << 63)) return false;
  if (numel > 0 && data == nullptr) return false;
  return static_cast<uint64_t>(numel) <= (uint64_t{1} << 63) - offset;
}

// One contiguous output: out[j] takes stream index offset + j of
// (seed, stream), for j in [0, numel). `out` may have any alignment of out_t.
template <typename out_t>
struct FillLaunch {
  static_assert(is_element<out_t>, "FillLaunch: float, double, __nv_bfloat16, __half or uint32_t");
  out_t* out;
  int64_t numel;
  uint64_t seed;
  uint64_t stream;
  uint64_t offset;
  TruncNormalParams<compute_t<out_t>> params;  // ignored for words
  // Compute every value but store none (a data dependency keeps the
  // arithmetic alive; the contents of `out` are then unspecified): for the
  // benchmarks' tinit_bench::trunc_normal_compute_only_. Ignored for words.
  bool compute_only = false;
};

// Launches the fill (one kernel, one wave of resident blocks at most).
// Defined in trunc_normal_kernel.cu for the five element types.
template <typename out_t>
cudaError_t launch_fill(const FillLaunch<out_t>& launch, cudaStream_t cuda_stream);

// One output of a grouped launch: `numel` contiguous elements at `data`, from
// stream index `offset` of `stream`, with the record params[params_index] of
// its group (ignored for words).
struct GroupOutput {
  void* data;
  int64_t numel;
  uint64_t stream;
  uint64_t offset;
  int64_t params_index;
};

// Many outputs of one element type in one launch (trunc_normal_grouped_kernel.cu).
// The outputs and their records are packed into one table in host memory
// (pinned, for an asynchronous copy), copied to the device on the launch's
// stream and walked by the kernel: the table holds O(outputs) bytes whatever
// the element count. Output e's element j takes stream index offset + j of
// (seed, stream): its values are those of launch_fill on that output alone.
template <typename out_t>
struct GroupedLaunch {
  static_assert(is_element<out_t>, "GroupedLaunch: float, double, __nv_bfloat16, __half or uint32_t");
  using out_type = out_t;
  using Params = TruncNormalParams<compute_t<out_t>>;

  std::vector<GroupOutput> outputs;
  std::vector<Params> params;  // none for words
  size_t table_offset = 0;     // in a buffer shared by several groups (GroupPlan::layout)
  int64_t chunks = 0;          // set by pack_grouped

  // `numel` elements at `data`, with the kParamCount packed constants at
  // `packed` (nullptr for words). Zero-element outputs need no entry.
  // cudaErrorInvalidValue when the constants fail tinit::valid_params (the
  // kernel would read outside the ndtri table).
  cudaError_t add(void* data, int64_t numel, uint64_t stream, uint64_t offset, const double* packed) {
    if (numel == 0) return cudaSuccess;
    int64_t index = 0;
    if (!params_index(packed, &index)) return cudaErrorInvalidValue;
    outputs.push_back({data, numel, stream, offset, index});
    return cudaSuccess;
  }

  // The `rows` rows of a shard laid out as runs (runs_outputs), all with the
  // constants at `packed` (nullptr for words).
  cudaError_t add_runs(void* data, int64_t rows, uint64_t stream, uint64_t offset, int64_t run,
                       const int64_t* outer_sizes, int64_t dims, const int64_t* outer_starts, const double* packed);

  bool empty() const { return outputs.empty(); }

 private:
  // A model's consecutive tensors mostly share their constants: reusing the
  // last record keeps the table (and its copy) small without a lookup. The
  // packed constants are compared, not the record (whose padding is not
  // value-initialised).
  bool params_index(const double* packed, int64_t* index) {
    if (is_words<out_t> || packed == nullptr) return true;
    if (params.empty() || std::memcmp(last_.data(), packed, sizeof(last_)) != 0) {
      if (!valid_params(packed)) return false;
      std::memcpy(last_.data(), packed, sizeof(last_));
      params.push_back(Params::from_packed(packed));
    }
    *index = static_cast<int64_t>(params.size()) - 1;
    return true;
  }
  std::array<double, kParamCount> last_{};
};

// Bytes of `group`'s table: a multiple of 64, so that tables can be laid end
// to end; 0 for absurd counts (more than 2^40 outputs or 2^31 records).
template <typename out_t>
size_t grouped_table_bytes(const GroupedLaunch<out_t>& group);

// Writes `group`'s table into host memory `table` (8-byte aligned, of
// grouped_table_bytes bytes) and sets group.chunks. cudaErrorInvalidValue,
// with nothing promised about `table`, when an output has numel < 0, a null
// pointer or offset + numel > 2^63, or a params index outside the records.
template <typename out_t>
cudaError_t pack_grouped(GroupedLaunch<out_t>& group, void* table);

// Fills every output of `group` from its table, copied to device memory
// `device_table` (8-byte aligned), in one launch on `cuda_stream`. Nothing to
// do (no launch) when the group has no chunks. Returns the error of the
// occupancy query before the launch.
template <typename out_t>
cudaError_t launch_grouped(const GroupedLaunch<out_t>& group, const void* device_table, uint64_t seed,
                           cudaStream_t cuda_stream);

// The rows of a shard laid out as runs (the schema of tinit::trunc_normal_runs_):
// rows = prod(outer_sizes[0 .. dims)) outputs of `run` elements, row r at
// data + r * run * elem_size, from stream index
// offset + sum_k outer_starts[k-th block][i_k], all with record `params_index`.
// cudaErrorInvalidValue (outputs then unspecified) when a size or run is < 1,
// rows differs from the product, or a row start exceeds 2^63 - 1.
cudaError_t runs_outputs(GroupOutput* outputs, int64_t rows, void* data, size_t elem_size, uint64_t stream,
                         uint64_t offset, int64_t run, const int64_t* outer_sizes, int64_t dims,
                         const int64_t* outer_starts, int64_t params_index);

template <typename out_t>
cudaError_t GroupedLaunch<out_t>::add_runs(void* data, int64_t rows, uint64_t stream, uint64_t offset, int64_t run,
                                           const int64_t* outer_sizes, int64_t dims, const int64_t* outer_starts,
                                           const double* packed) {
  if (rows == 0) return cudaSuccess;
  int64_t index = 0;
  if (!params_index(packed, &index)) return cudaErrorInvalidValue;
  const size_t first = outputs.size();
  outputs.resize(first + static_cast<size_t>(rows));
  return runs_outputs(outputs.data() + first, rows, data, sizeof(out_t), stream, offset, run, outer_sizes, dims,
                      outer_starts, index);
}

// The groups of one grouped call: one launch per element type present, in
// the order of the tuple, all from one table buffer.
class GroupPlan {
 public:
  template <typename out_t>
  GroupedLaunch<out_t>& group() {
    return std::get<GroupedLaunch<out_t>>(groups_);
  }

  // f(group) for every group, empty ones included, in launch order.
  template <typename F>
  void for_each(F&& f) {
    std::apply([&](auto&... g) { (f(g), ...); }, groups_);
  }

  bool empty() {
    bool none = true;
    for_each([&](const auto& g) { none = none && g.empty(); });
    return none;
  }

  // Places the non-empty groups' tables end to end; returns the buffer's
  // size in bytes (0 when a group's counts are absurd).
  size_t layout() {
    size_t bytes = 0;
    bool ok = true;
    for_each([&](auto& g) {
      if (g.empty()) return;
      const size_t size = grouped_table_bytes(g);
      ok = ok && size > 0;
      g.table_offset = bytes;
      bytes += size;
    });
    return ok ? bytes : 0;
  }

  // Packs every non-empty group into `buffer` (layout()'s size, 8-byte aligned).
  cudaError_t pack(void* buffer) {
    cudaError_t err = cudaSuccess;
    for_each([&](auto& g) {
      if (g.empty() || err != cudaSuccess) return;
      err = pack_grouped(g, static_cast<char*>(buffer) + g.table_offset);
    });
    return err;
  }

 private:
  std::tuple<GroupedLaunch<float>, GroupedLaunch<double>, GroupedLaunch<__nv_bfloat16>, GroupedLaunch<__half>,
             GroupedLaunch<uint32_t>>
      groups_;
};

}  // namespace cuda
}  // namespace tinit
