// The life of the grouped table's pinned buffers (TableStaging, PinnedPool),
// run on the host over the CUDA runtime stand-in of tests/cuda_runtime_shim:
// an eager buffer comes back only once its copy's event completed; a buffer
// captured in a graph stays the graph's, whatever other calls take, until the
// graph is destroyed; a buffer whose copy failed after it was enqueued never
// comes back; one never copied comes back at once; nothing the capture
// forbids is called in the capturing thread's mode, no event is queried while
// a capture runs, and the copies are issued in the caller's mode. Prints what
// failed; exits 1 then. Built and run by tests/test_cuda_compile.py.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "table_staging.h"

namespace {

using tinit::cuda::TableStaging;

int failures = 0;

void expect(bool ok, const char* what) {
  if (!ok) {
    std::printf("FAILED: %s\n", what);
    ++failures;
  }
}

// Every eager copy's event completes (the stream caught up).
void finish_copies() {
  for (shim::Event* e : shim::rt().events) e->done = true;
}

// Holds a staged table: take, then fill as the pack would.
std::unique_ptr<TableStaging> staged(size_t bytes, int device, shim::Stream* stream) {
  auto table = std::make_unique<TableStaging>();
  expect(table->take(bytes, device, stream) == cudaSuccess, "take");
  std::memset(table->host(), 0x5a, bytes);
  return table;
}

void* copied(size_t bytes, shim::Stream* stream, std::vector<char>& device_table) {
  auto table = staged(bytes, 0, stream);
  void* host = table->host();
  expect(table->copy_to(device_table.data()) == cudaSuccess, "copy_to");
  return host;
}

// The hosts of the blocks the pool hands out, taken and held until it has to
// allocate a new one: every free block of the device that fits `bytes`.
std::vector<void*> free_blocks(size_t bytes, shim::Stream* stream) {
  std::vector<std::unique_ptr<TableStaging>> held;
  std::vector<void*> hosts;
  for (;;) {
    const int allocs = shim::rt().host_allocs;
    held.push_back(staged(bytes, 0, stream));
    if (shim::rt().host_allocs != allocs) return hosts;
    hosts.push_back(held.back()->host());
  }
}

bool contains(const std::vector<void*>& hosts, void* host) {
  for (void* h : hosts) {
    if (h == host) return true;
  }
  return false;
}

void eager_buffers_wait_for_their_copy(shim::Stream& stream, std::vector<char>& device_table) {
  void* first = copied(100, &stream, device_table);
  expect(stream.copies_from.back() == first, "the eager copy reads the staged buffer");
  void* second = copied(100, &stream, device_table);
  expect(second != first, "a buffer whose copy is in flight is handed out again");
  finish_copies();
  expect(copied(100, &stream, device_table) == first, "a buffer whose copy completed is not reused");
  auto other_device = staged(100, 1, &stream);
  expect(other_device->host() != first && other_device->host() != second, "a block serves another device");
  finish_copies();
  auto large = staged(5000, 0, &stream);
  expect(large->host() != first && large->host() != second, "a 4 KiB block serves 5000 bytes");
}

void unused_buffers_come_back_at_once(shim::Stream& stream) {
  finish_copies();
  void* host = nullptr;
  {
    auto table = staged(100, 0, &stream);  // the pack refused: no copy_to
    host = table->host();
  }
  expect(contains(free_blocks(100, &stream), host), "a buffer never copied does not come back");
}

void captured_buffers_are_the_graphs(shim::Stream& stream, std::vector<char>& device_table) {
  void* pending = copied(100, &stream, device_table);
  finish_copies();  // done, but not yet seen done: the capture must not query it
  shim::Graph graph;
  stream.capture = &graph;
  shim::rt().capturing = true;
  const int queries = shim::rt().event_queries;
  auto table = staged(100, 0, &stream);
  void* host = table->host();
  expect(table->copy_to(device_table.data()) == cudaSuccess, "captured copy_to");
  expect(shim::rt().event_queries == queries, "events queried during the capture");
  expect(host != pending, "the capture took a buffer whose copy it could not see completed");
  expect(graph.copies_from.size() == 1 && graph.copies_from[0] == host, "the captured copy reads the buffer");
  expect(graph.objects.size() == 1, "the graph does not own the buffer");
  void* second = copied(100, &stream, device_table);  // a second call in the same capture
  expect(second != host, "one capture's two tables share a buffer");
  stream.capture = nullptr;
  shim::rt().capturing = false;
  for (int k = 0; k < 3; ++k) {
    copied(100, &stream, device_table);
    finish_copies();
  }
  const std::vector<void*> before = free_blocks(100, &stream);
  expect(!contains(before, host) && !contains(before, second), "a live graph's buffer is handed out");
  shim::destroy(&graph);
  const std::vector<void*> after = free_blocks(100, &stream);
  expect(contains(after, host) && contains(after, second), "a destroyed graph's buffers do not come back");
}

void failed_copies_lose_their_buffer(shim::Stream& stream, std::vector<char>& device_table) {
  finish_copies();
  auto table = staged(100, 0, &stream);
  void* host = table->host();
  stream.fail_copy = cudaErrorInvalidValue;
  expect(table->copy_to(device_table.data()) == cudaErrorInvalidValue, "a failed copy is not reported");
  stream.fail_copy = cudaSuccess;
  expect(!contains(free_blocks(100, &stream), host), "a buffer whose copy failed is handed out again");
}

}  // namespace

int main() {
  shim::Stream stream;
  std::vector<char> device_table(1 << 16);
  eager_buffers_wait_for_their_copy(stream, device_table);
  unused_buffers_come_back_at_once(stream);
  captured_buffers_are_the_graphs(stream, device_table);
  failed_copies_lose_their_buffer(stream, device_table);
  expect(shim::rt().mode == cudaStreamCaptureModeGlobal, "the thread's capture mode is not restored");
  for (const std::string& v : shim::rt().violations) std::printf("FAILED: %s\n", v.c_str());
  failures += static_cast<int>(shim::rt().violations.size());
  std::printf("%d failures, %d host allocations\n", failures, shim::rt().host_allocs);
  return failures == 0 ? 0 : 1;
}
