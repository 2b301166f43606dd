// Runs the grouped CUDA kernels' code (csrc/cuda/trunc_normal_grouped_kernel.cu)
// on the host: the table is built by the binding's own GroupPlan
// (csrc/cuda/grouped_plan.h) over host buffers, then every thread of an
// emulated grid, blocks and threads in reverse order, runs grouped_thread.
// Built and driven by tests/test_cuda_compile.py, which compares the bytes
// with the CPU ops; the device arithmetic itself needs a GPU (tests/test_gpu.py).
//
//   cuda_grouped_host_harness GRID < SPEC
//
// GRID: emulated CUDA blocks per launch (0: as many as the launcher starts).
// SPEC (whitespace-separated), a seed then one output per record:
//   SEED
//   T KIND NUMEL STREAM OFFSET SHIFT P0..P13            a tensor of a grouped fill
//   R KIND NUMEL STREAM OFFSET SHIFT RUN DIMS SIZES... NSTARTS STARTS... [P0..P13]
//                                                       a runs layout (no P for words)
// KIND is a TinitGroupKind (4: raw words); SHIFT misaligns the output by that
// many elements from a 64-byte boundary. Writes every output's bytes to stdout
// in record order and "table_bytes B chunks C" to stderr. Exits 1 on a bad
// spec, 2 if a guard byte around an output changed, 3 if the pack refused the
// table.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "grouped_plan.h"
#include "trunc_normal_grouped_kernel.cu"

namespace {

constexpr size_t kGuard = 64;  // bytes each side of an output
constexpr unsigned char kPoison = 0xA5;

size_t elem_size(int kind) {
  return kind == TINIT_GROUP_FLOAT64 ? 8 : kind == TINIT_GROUP_FLOAT32 || kind == TINIT_GROUP_WORDS ? 4 : 2;
}

struct Output {
  std::vector<double> storage;  // 8-byte aligned; the output sits 64-aligned + shift inside
  unsigned char* base = nullptr;
  unsigned char* data = nullptr;
  size_t bytes = 0, total = 0;

  Output(size_t size, int64_t numel, int64_t shift) {
    bytes = size * static_cast<size_t>(numel);
    total = 2 * kGuard + size * static_cast<size_t>(shift) + bytes;
    storage.resize(total / sizeof(double) + 16);
    base = reinterpret_cast<unsigned char*>(storage.data());
    base += (64 - reinterpret_cast<uintptr_t>(base) % 64) % 64;
    std::memset(base, kPoison, total);
    data = base + kGuard + size * static_cast<size_t>(shift);
  }
  bool guards_intact() const {
    for (size_t i = 0; i < total; ++i) {
      const bool inside = base + i >= data && base + i < data + bytes;
      if (!inside && base[i] != kPoison) return false;
    }
    return true;
  }
};

template <typename out_t>
void emulate(const void* table, const tinit::cuda::GroupPlan::Group& g, int kind, uint64_t seed, int64_t grid) {
  using namespace tinit::cuda;
  Sections s;
  sections(static_cast<TinitGroupKind>(kind), static_cast<int64_t>(g.entries.size()),
           static_cast<int64_t>(g.params.size()), &s);
  const GroupView t = view_of(table, s, static_cast<int64_t>(g.entries.size()), g.chunks);
  if (grid <= 0) grid = (g.chunks + kWarps - 1) / kWarps;
  for (int64_t b = grid - 1; b >= 0; --b) {
    for (int th = kThreads - 1; th >= 0; --th) grouped_thread<out_t>(t, tinit::philox_keys(seed), b, th, grid);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 1;
  const int64_t grid = std::strtoll(argv[1], nullptr, 10);
  std::string token;
  auto next = [&]() -> std::string {
    if (!(std::cin >> token)) std::exit(1);
    return token;
  };
  auto next_i = [&]() { return std::strtoll(next().c_str(), nullptr, 10); };
  auto next_u = [&]() { return std::strtoull(next().c_str(), nullptr, 10); };
  const uint64_t seed = next_u();
  tinit::cuda::GroupPlan plan;
  std::vector<std::unique_ptr<Output>> outputs;
  std::vector<std::vector<double>> constants;  // kept alive until the pack
  while (std::cin >> token) {
    const bool runs = token == "R";
    if (!runs && token != "T") return 1;
    const int kind = static_cast<int>(next_i());
    if (kind < 0 || kind >= TINIT_GROUP_KINDS) return 1;
    const int64_t numel = next_i();
    const uint64_t stream = next_u(), offset = next_u();
    const int64_t shift = next_i();
    int64_t run = 0;
    std::vector<int64_t> sizes, starts;
    if (runs) {
      run = next_i();
      for (int64_t k = next_i(); k > 0; --k) sizes.push_back(next_i());
      for (int64_t k = next_i(); k > 0; --k) starts.push_back(next_i());
    }
    const double* packed = nullptr;
    if (kind != TINIT_GROUP_WORDS) {
      constants.emplace_back(TINIT_PARAM_COUNT);
      for (double& c : constants.back()) c = std::strtod(next().c_str(), nullptr);
      packed = constants.back().data();
    }
    outputs.push_back(std::make_unique<Output>(elem_size(kind), numel, shift));
    void* data = outputs.back()->data;
    const auto k = static_cast<TinitGroupKind>(kind);
    if (!runs) {
      plan.add(k, data, numel, stream, offset, packed);
    } else if (numel > 0) {
      const int64_t rows = numel / run;
      if (plan.add_runs(k, data, elem_size(kind), rows, stream, offset, run, sizes.data(),
                        static_cast<int64_t>(sizes.size()), starts.data(), packed) != cudaSuccess) {
        return 3;
      }
    }
  }
  const size_t bytes = plan.layout();
  std::vector<double> table(bytes / sizeof(double) + 1);
  if (!plan.empty() && plan.pack(table.data()) != cudaSuccess) return 3;
  int64_t chunks = 0;
  for (int k = 0; k < TINIT_GROUP_KINDS; ++k) {
    const auto& g = plan.groups[k];
    if (g.entries.empty()) continue;
    chunks += g.chunks;
    const char* at = reinterpret_cast<const char*>(table.data()) + g.table_offset;
    switch (k) {
      case TINIT_GROUP_FLOAT32:
        emulate<float>(at, g, k, seed, grid);
        break;
      case TINIT_GROUP_FLOAT64:
        emulate<double>(at, g, k, seed, grid);
        break;
      case TINIT_GROUP_BFLOAT16:
        emulate<__nv_bfloat16>(at, g, k, seed, grid);
        break;
      case TINIT_GROUP_FLOAT16:
        emulate<__half>(at, g, k, seed, grid);
        break;
      default:
        emulate<uint32_t>(at, g, k, seed, grid);
        break;
    }
  }
  for (const auto& out : outputs) {
    if (!out->guards_intact()) return 2;
  }
  for (const auto& out : outputs) std::fwrite(out->data, 1, out->bytes, stdout);
  std::fprintf(stderr, "table_bytes %zu chunks %lld\n", bytes, static_cast<long long>(chunks));
  return 0;
}
