// Every tinit op schema, defined once; backend files only add implementations.
// Python registers the fake (meta) kernels in tinit/ops.py.
#include <Python.h>
#include <torch/csrc/autograd/VariableTypeUtils.h>
#include <torch/library.h>

// An importable module so `import tinit._C` loads the op registrations.
PyMODINIT_FUNC PyInit__C(void) {
  static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1,
                                      nullptr};
  return PyModule_Create(&module);
}

TORCH_LIBRARY(tinit, m) {
  // Fills `self` in place with the truncated normal of tinit/transform.h.
  // Element j of `self` (row-major) takes stream index offset + j.
  // `transform` holds the kParamCount constants produced by tinit/params.py.
  m.def(
      "trunc_normal_(Tensor(a!) self, int seed, int stream, int offset, "
      "float[] transform) -> ()");
  // trunc_normal_ computing every value but storing none (the contents of
  // `self` are then unspecified): benchmarks time it to tell compute-bound
  // from memory-bound fills. Implemented for CUDA only.
  m.def(
      "_trunc_normal_compute_only_(Tensor(a!) self, int seed, int stream, "
      "int offset, float[] transform) -> ()");
  // Raw uint32 stream words (stored in an int32 tensor) for tests and tools.
  m.def("philox_(Tensor(a!) self, int seed, int stream, int offset) -> ()");
  // One raw Philox4x32-10 call on explicit counter and key words (each a
  // uint32 in an int), for the known-answer test of the engine itself.
  m.def("philox4x32_10(int[] counter, int[] key) -> int[]");
}

namespace {

// In-place ops must bump the version counter of the tensor they write, as
// every ATen in-place op does, so autograd refuses a backward through values
// that were overwritten (instead of silently computing wrong gradients).
void write_self_then_bump_version(const c10::OperatorHandle& op,
                                  c10::DispatchKeySet keys,
                                  torch::jit::Stack* stack) {
  const at::Tensor self = (*stack)[0].toTensor();
  op.redispatchBoxed(keys & c10::after_ADInplaceOrView_keyset, stack);
  torch::autograd::increment_version(self);
}

}  // namespace

TORCH_LIBRARY_IMPL(tinit, ADInplaceOrView, m) {
  for (const char* name :
       {"trunc_normal_", "_trunc_normal_compute_only_", "philox_"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<
                     &write_self_then_bump_version>());
  }
}
