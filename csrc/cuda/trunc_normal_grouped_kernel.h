// C-style launchers for the grouped CUDA kernels of tinit
// (trunc_normal_grouped_kernel.cu): many tensors, or many rows of one shard,
// in one launch per output kind.
//
// Free of torch, like trunc_normal_kernel.h. The caller describes the outputs
// as entries, asks for the table's size, packs it into host memory (pinned,
// for an asynchronous copy), copies it to the device on its stream and
// launches over the device copy: nothing synchronises the host, and the table
// holds O(entries) bytes whatever the element count. Entry e's element j
// takes stream index offset + j of (seed, stream): the values are those of
// tinit_trunc_normal_cuda (or tinit_philox_cuda) on that entry alone.
#pragma once

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "trunc_normal_kernel.h"

#ifdef __cplusplus
extern "C" {
#endif

// What one launch writes: the values of a TinitDtype, or raw uint32 words.
typedef enum TinitGroupKind {
  TINIT_GROUP_FLOAT32 = TINIT_FLOAT32,
  TINIT_GROUP_FLOAT64 = TINIT_FLOAT64,
  TINIT_GROUP_BFLOAT16 = TINIT_BFLOAT16,
  TINIT_GROUP_FLOAT16 = TINIT_FLOAT16,
  TINIT_GROUP_WORDS = 4,
} TinitGroupKind;
#define TINIT_GROUP_KINDS 5

// One output: `numel` contiguous elements of the group's kind at device
// pointer `data`, from stream index `offset` of `stream`, with the constants
// params[params_index] of the group (ignored for words).
typedef struct TinitGroupEntry {
  void* data;
  int64_t numel;
  uint64_t stream;
  uint64_t offset;
  int64_t params_index;
} TinitGroupEntry;

// Bytes of the table for `entries` entries and `params` constant sets of
// `kind` (a multiple of 64, so tables can be laid end to end); 0 for
// negative or absurd counts.
size_t tinit_grouped_table_bytes(TinitGroupKind kind, int64_t entries, int64_t params);

// Writes the table into host memory `table` (8-byte aligned, of
// tinit_grouped_table_bytes bytes) and its number of work chunks into
// *chunks. cudaErrorInvalidValue, with nothing promised about `table`, when
// an entry has numel < 0, a null pointer, offset + numel > 2^63 or a params
// index outside [0, params), or a constant set has a mode outside 0..3.
cudaError_t tinit_grouped_pack(void* table, TinitGroupKind kind, const TinitGroupEntry* entries, int64_t n_entries,
                               const TinitTransformParams* params, int64_t n_params, int64_t* chunks);

// Fills every entry of a packed table, copied to device memory
// `device_table` (8-byte aligned), in one launch on `cuda_stream`; the counts
// are those given to tinit_grouped_pack and the chunks it returned.
cudaError_t tinit_grouped_cuda(const void* device_table, TinitGroupKind kind, int64_t n_entries, int64_t n_params,
                               int64_t chunks, uint64_t seed, cudaStream_t cuda_stream);

// The rows of a shard laid out as runs (the schema of tinit::trunc_normal_runs_):
// rows = prod(outer_sizes[0 .. dims)) entries of `run` elements, row r at
// data + r * run * elem_size, from stream index
// offset + sum_k outer_starts[k-th block][i_k], all with constant set
// `params_index`. cudaErrorInvalidValue (entries then unspecified) when a
// size or run is < 1, rows differs from the product, or a row start exceeds
// 2^63 - 1.
cudaError_t tinit_runs_entries(TinitGroupEntry* entries, int64_t rows, void* data, size_t elem_size, uint64_t stream,
                               uint64_t offset, int64_t run, const int64_t* outer_sizes, int64_t dims,
                               const int64_t* outer_starts, int64_t params_index);

#ifdef __cplusplus
}  // extern "C"
#endif
