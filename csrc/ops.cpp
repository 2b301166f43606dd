// Every tinit op schema, defined once; backend files only add implementations.
// The public ops are the `tinit` library; ops only the benchmarks call are the
// separate `tinit_bench` library, so they are not part of the public schema.
// Python registers the fake (meta) kernels in tinit.ops.
#include "tinit/fp_contract.h"
// (first: contraction off)

#include <Python.h>
#include <torch/csrc/autograd/VariableTypeUtils.h>
#include <torch/library.h>

// An importable module so `import tinit._C` loads the op registrations.
PyMODINIT_FUNC PyInit__C(void) {
  static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, nullptr};
  return PyModule_Create(&module);
}

TORCH_LIBRARY(tinit, m) {
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

TORCH_LIBRARY(tinit_bench, m) {
  // trunc_normal_ computing every value but storing none (the contents of
  // `self` are then unspecified): benchmarks time it to tell compute-bound
  // from memory-bound fills. Implemented for CUDA only.
  m.def(
      "trunc_normal_compute_only_(Tensor(a!) self, int seed, int stream, "
      "int offset, float[] transform) -> ()");
}

namespace {

// In-place ops must bump the version counter of the tensor they write, as
// every ATen in-place op does, so autograd refuses a backward through values
// that were overwritten (instead of silently computing wrong gradients).
void write_self_then_bump_version(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  const at::Tensor self = (*stack)[0].toTensor();
  op.redispatchBoxed(keys & c10::after_ADInplaceOrView_keyset, stack);
  torch::autograd::increment_version(self);
}

void write_list_then_bump_versions(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  const std::vector<at::Tensor> tensors = (*stack)[0].toTensorVector();
  op.redispatchBoxed(keys & c10::after_ADInplaceOrView_keyset, stack);
  for (const at::Tensor& t : tensors) torch::autograd::increment_version(t);
}

}  // namespace

TORCH_LIBRARY_IMPL(tinit, ADInplaceOrView, m) {
  for (const char* name : {"trunc_normal_", "philox_", "trunc_normal_runs_", "philox_runs_"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&write_self_then_bump_version>());
  }
  for (const char* name : {"trunc_normal_grouped_", "trunc_normal_grouped_runs_"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&write_list_then_bump_versions>());
  }
}

TORCH_LIBRARY_IMPL(tinit_bench, ADInplaceOrView, m) {
  m.impl("trunc_normal_compute_only_", torch::CppFunction::makeFromBoxedFunction<&write_self_then_bump_version>());
}
