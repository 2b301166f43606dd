// Runs the grouped CUDA kernels' code (grouped_kernel's grouped_thread) on the
// host: the table is built by the bindings' own tinit::cuda::GroupPlan over
// host buffers, then every thread of an emulated grid, blocks and threads in
// reverse order, runs grouped_thread.
// Built and driven by tests/test_cuda_compile.py, which compares the bytes
// with the CPU ops; the device arithmetic itself needs a GPU (tests/test_gpu.py).
//
//   cuda_grouped_host_harness GRID < SPEC
//
// GRID: emulated CUDA blocks per launch (0: as many as the launcher starts).
// SPEC (whitespace-separated), a seed then one output per record:
//   SEED
//   T KIND NUMEL STREAM OFFSET SHIFT P...               a tensor of a grouped fill
//   R KIND NUMEL STREAM OFFSET SHIFT RUN DIMS SIZES... NSTARTS STARTS... [P...]
//                                                       a runs layout (no P for words)
// KIND: 0 float32, 1 float64, 2 bfloat16, 3 float16, 4 raw words; P... the
// kParamCount constants. SHIFT misaligns the output by that many elements
// from a 64-byte boundary. Writes every output's bytes to stdout in record
// order and "table_bytes B chunks C" to stderr. Exits 1 on a bad spec, 2 if a
// guard byte around an output changed, 3 if the plan (GroupedLaunch::add,
// add_runs or the pack) refused the table.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "launch.h"
#include "trunc_normal_grouped_kernel.cu"

namespace {

constexpr size_t kGuard = 64;  // bytes each side of an output
constexpr unsigned char kPoison = 0xA5;

constexpr int kWordsKind = 4;

size_t elem_size(int kind) { return kind == 1 ? 8 : kind == 0 || kind == kWordsKind ? 4 : 2; }

// f(group) on the group of a KIND.
template <typename F>
auto on_kind(tinit::cuda::GroupPlan& plan, int kind, F&& f) {
  switch (kind) {
    case 0:
      return f(plan.group<float>());
    case 1:
      return f(plan.group<double>());
    case 2:
      return f(plan.group<__nv_bfloat16>());
    case 3:
      return f(plan.group<__half>());
    default:
      return f(plan.group<uint32_t>());
  }
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
void emulate(const void* table, const tinit::cuda::GroupedLaunch<out_t>& g, uint64_t seed, int64_t grid) {
  using namespace tinit::cuda;
  Sections s;
  sections_of(g, &s);
  const GroupView t = view_of(table, s, static_cast<int64_t>(g.outputs.size()), g.chunks);
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
    if (kind < 0 || kind > kWordsKind) return 1;
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
    if (kind != kWordsKind) {
      constants.emplace_back(tinit::kParamCount);
      for (double& c : constants.back()) c = std::strtod(next().c_str(), nullptr);
      packed = constants.back().data();
    }
    outputs.push_back(std::make_unique<Output>(elem_size(kind), numel, shift));
    void* data = outputs.back()->data;
    const cudaError_t err = on_kind(plan, kind, [&](auto& g) {
      if (!runs) return g.add(data, numel, stream, offset, packed);
      if (numel == 0) return cudaSuccess;
      return g.add_runs(data, numel / run, stream, offset, run, sizes.data(), static_cast<int64_t>(sizes.size()),
                        starts.data(), packed);
    });
    if (err != cudaSuccess) return 3;
  }
  const size_t bytes = plan.layout();
  std::vector<double> table(bytes / sizeof(double) + 1);
  if (!plan.empty() && (bytes == 0 || plan.pack(table.data()) != cudaSuccess)) return 3;
  int64_t chunks = 0;
  plan.for_each([&](const auto& g) {
    if (g.empty()) return;
    chunks += g.chunks;
    emulate(reinterpret_cast<const char*>(table.data()) + g.table_offset, g, seed, grid);
  });
  for (const auto& out : outputs) {
    if (!out->guards_intact()) return 2;
  }
  for (const auto& out : outputs) std::fwrite(out->data, 1, out->bytes, stdout);
  std::fprintf(stderr, "table_bytes %zu chunks %lld\n", bytes, static_cast<long long>(chunks));
  return 0;
}
