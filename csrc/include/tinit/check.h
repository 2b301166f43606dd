// TINIT_CHECK(cond, parts...): the check of every native source, CPU and CUDA
// bindings and CPU kernels alike. A failed check throws std::runtime_error
// whose message is `parts` streamed in order, so a Python caller sees
// RuntimeError("tinit::op: ...") (torch turns a C++ exception thrown by a
// kernel into a RuntimeError with its what()). Torch-free, host code only:
// the CPU kernel sources that use it build without torch (the portability
// check), and a stable-ABI build may not throw c10::Error (TORCH_CHECK). Not
// torch's STD_TORCH_CHECK either: it puts the C++ function, file and line
// before the message, and each message starts with the op (tinit::Where).
#pragma once

#include "tinit/fp_contract.h"
// (first: contraction off)

#include <sstream>
#include <stdexcept>
#include <string>

namespace tinit {

template <typename... Parts>
[[noreturn]] void check_failed(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  throw std::runtime_error(os.str());
}

}  // namespace tinit

#define TINIT_CHECK(cond, ...)                       \
  do {                                               \
    if (!(cond)) ::tinit::check_failed(__VA_ARGS__); \
  } while (false)
