// Gradual underflow for the CPU fill, whatever the caller set: FTZ/DAZ
// (torch.set_flush_denormal(True), -ffast-math's crtfastmath, a library
// that sets MXCSR) flushes subnormal operands and results to zero and would
// change the values of windows near zero. One guard per worker thread's
// chunk (torch::stable::parallel_for body): it saves the thread's control register,
// clears the flush bits and restores the register on exit.
//   x86: MXCSR FTZ (bit 15) and DAZ (bit 6).
//   aarch64: FPCR FZ (bit 24) and FZ16 (bit 19).
// Other targets: nothing to do (no flush mode is set by torch there).
#pragma once

#include "tinit/fp_contract.h"
// (first: contraction off)

#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace tinit {
namespace cpu {

class DenormalGuard {
 public:
#if defined(__x86_64__) || defined(__i386__)
  static constexpr unsigned kFlushBits = (1u << 15) | (1u << 6);
  DenormalGuard() : saved_(_mm_getcsr()) {
    if (saved_ & kFlushBits) _mm_setcsr(saved_ & ~kFlushBits);
  }
  ~DenormalGuard() {
    if (saved_ & kFlushBits) _mm_setcsr(saved_);
  }

 private:
  unsigned saved_;
#elif defined(__aarch64__)
  static constexpr uint64_t kFlushBits = (uint64_t{1} << 24) | (uint64_t{1} << 19);
  DenormalGuard() {
    asm volatile("mrs %0, fpcr" : "=r"(saved_));
    if (saved_ & kFlushBits) set(saved_ & ~kFlushBits);
  }
  ~DenormalGuard() {
    if (saved_ & kFlushBits) set(saved_);
  }

 private:
  static void set(uint64_t fpcr) { asm volatile("msr fpcr, %0" : : "r"(fpcr)); }
  uint64_t saved_;
#else
  DenormalGuard() {}
#endif
  DenormalGuard(const DenormalGuard&) = delete;
  DenormalGuard& operator=(const DenormalGuard&) = delete;
};

}  // namespace cpu
}  // namespace tinit
