// Every tinit op schema, defined once; backend files only add implementations.
// The public ops are the `tinit` library; ops only the benchmarks call are the
// separate `tinit_bench` library, so they are not part of the public schema.
// Python registers the fake (meta) kernels and, for the ops that write their
// first argument, the ADInplaceOrView kernels that bump its version counter
// (tinit.ops: torch's stable ABI has no ADInplaceOrView kernel).
//
// Built on torch's stable ABI only (STABLE_TORCH_LIBRARY, header-only torch
// and the C shim): the extension imports no at::, c10:: or torch:: symbol, so
// one build serves every torch from the floor of setup.py's
// TORCH_TARGET_VERSION on, and every Python from 3.10 (Py_LIMITED_API).
#include "tinit/fp_contract.h"
// (first: contraction off)

#include <Python.h>
#include <torch/csrc/stable/library.h>

// An importable module so `import tinit._C` loads the op registrations.
PyMODINIT_FUNC PyInit__C(void) {
  static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, nullptr};
  return PyModule_Create(&module);
}

STABLE_TORCH_LIBRARY(tinit, m) {
  // Fills `self` in place with the truncated normal of tinit::trunc_normal_value.
  // Element j of `self` (row-major) takes stream index offset + j.
  // `transform` holds the kParamCount constants of tinit.params.TruncNormalParams
  // (the C++ record tinit::TruncNormalParams, in its field order).
  m.def(
      "trunc_normal_(Tensor(a!) self, int seed, int stream, int offset, "
      "float[] transform) -> ()");
  // trunc_normal_ for a tensor laid out as rows of `run` elements, each row a
  // contiguous range of the stream (a shard of a larger logical tensor):
  // element j takes stream index offset + sum_k outer_starts[k][i_k] + j % run,
  // where (i_0, ...) is the row j / run over `outer_sizes` (row-major) and
  // outer_starts lists dim k's contributions one dim after another.
  m.def(
      "trunc_normal_runs_(Tensor(a!) self, int seed, int stream, int offset, "
      "int run, int[] outer_sizes, int[] outer_starts, float[] transform) -> ()");
  // trunc_normal_ for many tensors in one call: tensor t from stream
  // streams[t] at offsets[t], with the kParamCount constants at
  // transforms[t * kParamCount]. Values as from one trunc_normal_ per tensor.
  m.def(
      "trunc_normal_grouped_(Tensor(a!)[] tensors, int seed, int[] streams, "
      "int[] offsets, float[] transform) -> ()");
  // trunc_normal_grouped_ whose tensor t is laid out as trunc_normal_runs_
  // lays out one tensor: rows of runs[t] elements from offsets[t], its
  // outer_dims[t] outer sizes the next ones of outer_sizes and their starts
  // the next ones of outer_starts (a contiguous tensor: run = numel, 0 outer
  // dims). Shards split along an inner dim join a model's one call.
  m.def(
      "trunc_normal_grouped_runs_(Tensor(a!)[] tensors, int seed, int[] streams, int[] offsets, int[] runs, "
      "int[] outer_dims, int[] outer_sizes, int[] outer_starts, float[] transform) -> ()");
  // Raw uint32 stream words (stored in an int32 tensor) for tests and tools.
  m.def("philox_(Tensor(a!) self, int seed, int stream, int offset) -> ()");
  // philox_ with the layout of trunc_normal_runs_.
  m.def(
      "philox_runs_(Tensor(a!) self, int seed, int stream, int offset, int run, "
      "int[] outer_sizes, int[] outer_starts) -> ()");
  // One raw Philox4x32-10 call on explicit counter and key words (each a
  // uint32 in an int), for the known-answer test of the engine itself.
  m.def("philox4x32_10(int[] counter, int[] key) -> int[]");
  // tinit::log_pos(double) of each value (finite, >= 0), for the accuracy test
  // of the fp64 transform's logarithm.
  m.def("log_f64(float[] x) -> float[]");
  // The CPU engine of this process (csrc/cpu/isa.h: "scalar", "avx2" or
  // "avx512"), chosen once: TINIT_CPU_ISA or the best this CPU runs.
  m.def("cpu_isa() -> str");
  // The CPU engines this CPU runs, scalar first.
  m.def("cpu_isas() -> str[]");
}

STABLE_TORCH_LIBRARY(tinit_bench, m) {
  // trunc_normal_ computing every value but storing none (the contents of
  // `self` are then unspecified): benchmarks time it to tell compute-bound
  // from memory-bound fills. Implemented for CUDA only.
  m.def(
      "trunc_normal_compute_only_(Tensor(a!) self, int seed, int stream, "
      "int offset, float[] transform) -> ()");
}
