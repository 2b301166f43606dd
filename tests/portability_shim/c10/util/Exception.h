// Torch-free stand-in for TORCH_CHECK, for the portability harness: the
// message is built as c10 builds it and thrown as std::runtime_error.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace c10 {
namespace shim {

template <typename... Args>
[[noreturn]] void check_fail(const char* cond, const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  if (sizeof...(Args) == 0) os << "check failed: " << cond;
  throw std::runtime_error(os.str());
}

}  // namespace shim
}  // namespace c10

#define TORCH_CHECK(cond, ...) \
  if (!(cond)) ::c10::shim::check_fail(#cond, ##__VA_ARGS__)
