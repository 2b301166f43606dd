// How a grouped launch's table (GroupPlan) reaches the device without the
// host waiting and without torch's allocators for host memory: packed into a
// pinned host buffer that tinit owns, copied by cudaMemcpyAsync on the
// launch's stream into device memory the caller allocates.
//
// Who keeps the buffer until nothing reads it:
// - Eager: the buffer goes back to a per-device pool as soon as the copy is
//   enqueued, with an event recorded after the copy; the pool hands it out
//   again only once cudaEventQuery says the event completed (never a wait).
//   When every buffer is still in flight, a new one is cudaHostAlloc'd: the
//   pool grows to the tables in flight at once and keeps them for the process.
// - Captured in a CUDA graph (cudaStreamGetCaptureInfo on the stream): the copy
//   becomes a memcpy node that reads the buffer at every replay, so the graph
//   owns it: a CUDA user object, retained by the capturing graph, whose
//   destructor CUDA runs once the graph, every executable graph made from it
//   and their pending launches are gone; only then may the pool hand the
//   buffer out again. Other calls between capture and replay get other
//   buffers, so a replay copies the table of its capture.
// torch's caching host allocator offered the same through at::empty(pinned)
// only from torch 2.11 on (it recycled a block a graph still read before),
// and the stable ABI reaches neither it nor its capture pools; owning the
// buffers here makes capture safe on every torch the stable ABI supports.
// Not chosen: refusing a capture (graph replay of a model's init, and
// torch.compile's CUDA graphs, would lose the grouped op); freeing from a
// cudaLaunchHostFunc callback (a host round trip that stalls the stream each
// call, and a host node run at every replay once captured); cudaFreeHost
// (it synchronises the device).
//
// Free of torch, like launch.h. Not for the kernels' .cu files. Its life
// cycle runs on the host over a CUDA stand-in in
// test_pinned_buffers_live_as_long_as_their_copies; on a GPU in
// test_grouped_tables_of_destroyed_graphs_serve_later_calls.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace tinit {
namespace cuda {

// Relaxed stream-capture mode for this thread while it lives: a capture in
// progress on the thread in torch's default mode (cudaStreamCaptureModeGlobal)
// forbids calls that enqueue no stream work, such as cudaHostAlloc; torch's
// own allocators switch the same way around theirs during a capture. The
// stream work (the copy) is captured all the same.
class RelaxedCaptureMode {
 public:
  RelaxedCaptureMode() : err_(cudaThreadExchangeStreamCaptureMode(&mode_)) {}
  ~RelaxedCaptureMode() {
    if (err_ == cudaSuccess) cudaThreadExchangeStreamCaptureMode(&mode_);
  }
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;
  cudaError_t error() const { return err_; }

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;  // before err_: the exchange sets it
  cudaError_t err_;
};

// One pinned host buffer of the pool.
struct PinnedBlock {
  enum State : int { kFree, kHeld, kGraph, kLost };
  void* host = nullptr;
  size_t bytes = 0;
  int device = -1;
  cudaEvent_t copied = nullptr;  // recorded after the last eager copy from `host`
  bool pending = false;          // `copied` recorded, not yet seen complete
  // kHeld: by the call packing it; kGraph: by a CUDA graph, until its user
  // object's destructor (a CUDA thread) stores kFree; kLost: a copy from it
  // may run at an unknown time (an error after it was enqueued), never reused.
  std::atomic<int> state{kHeld};
};

// Every pinned block of the process, never freed: a graph may hand one back
// during exit, and cudaFreeHost would synchronise the device.
class PinnedPool {
 public:
  static PinnedPool& instance() {
    static PinnedPool* pool = new PinnedPool;
    return *pool;
  }

  // A block of at least `bytes` bytes for `device` (the current device),
  // held by the caller. While the caller's stream is being captured
  // (`capturing`), no event is queried (torch's CUDA caching allocator, too,
  // defers its event queries until no capture is under way): only blocks
  // known to be free serve, else a new one.
  cudaError_t take(size_t bytes, int device, bool capturing, PinnedBlock** out) {
    const RelaxedCaptureMode relaxed;
    if (relaxed.error() != cudaSuccess) return relaxed.error();
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      for (const auto& block : blocks_) {
        if (block->device != device || block->bytes < bytes) continue;
        if (block->state.load(std::memory_order_acquire) != PinnedBlock::kFree) continue;
        if (block->pending) {
          if (capturing) continue;
          const cudaError_t err = cudaEventQuery(block->copied);
          if (err == cudaErrorNotReady) continue;
          if (err != cudaSuccess) return err;
          block->pending = false;
        }
        block->state.store(PinnedBlock::kHeld, std::memory_order_relaxed);
        *out = block.get();
        return cudaSuccess;
      }
    }
    auto block = std::make_unique<PinnedBlock>();
    block->bytes = rounded(bytes);
    block->device = device;
    const cudaError_t err = cudaHostAlloc(&block->host, block->bytes, cudaHostAllocDefault);
    if (err != cudaSuccess) return err;
    const std::lock_guard<std::mutex> lock(mutex_);
    blocks_.push_back(std::move(block));
    *out = blocks_.back().get();
    return cudaSuccess;
  }

 private:
  // Powers of two from 4 KiB: tables of similar size share blocks.
  static size_t rounded(size_t bytes) {
    size_t size = 4096;
    while (size < bytes) size *= 2;
    return size;
  }

  std::mutex mutex_;
  std::vector<std::unique_ptr<PinnedBlock>> blocks_;
};

// The user object's destructor: no CUDA call and no lock (CUDA runs it on a
// shared internal thread), only the state the pool reads.
inline void CUDART_CB release_to_pool(void* block) {
  static_cast<PinnedBlock*>(block)->state.store(PinnedBlock::kFree, std::memory_order_release);
}

// One table's trip: take() a pinned buffer for the current device and
// `stream`, pack into host(), then copy_to() device memory. A buffer never
// copied goes back to the pool with the object.
class TableStaging {
 public:
  TableStaging() = default;
  TableStaging(const TableStaging&) = delete;
  TableStaging& operator=(const TableStaging&) = delete;
  ~TableStaging() {
    if (block_ != nullptr) block_->state.store(PinnedBlock::kFree, std::memory_order_release);
  }

  cudaError_t take(size_t bytes, int device, cudaStream_t stream) {
    stream_ = stream;
    bytes_ = bytes;
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    cudaError_t err = cudaStreamGetCaptureInfo(stream, &status, nullptr, &graph_);
    if (err != cudaSuccess) return err;
    if (status == cudaStreamCaptureStatusInvalidated) return cudaErrorStreamCaptureInvalidated;
    capturing_ = status == cudaStreamCaptureStatusActive;
    return PinnedPool::instance().take(bytes, device, capturing_, &block_);
  }

  void* host() const { return block_->host; }

  // Copies the packed bytes to `device_table` on the stream and hands the
  // buffer to its next keeper: the pool behind an event, or the capturing graph.
  cudaError_t copy_to(void* device_table) {
    PinnedBlock* block = block_;
    block_ = nullptr;
    if (capturing_) {
      const cudaError_t err = graph_owns(block);
      if (err != cudaSuccess) return err;
      // A memcpy node: it reads the buffer at every replay.
      return cudaMemcpyAsync(device_table, block->host, bytes_, cudaMemcpyHostToDevice, stream_);
    }
    const cudaError_t err = event_for(block);
    if (err != cudaSuccess) return err;
    return copy_eagerly(block, device_table);
  }

 private:
  // Stream work (the copy, the event record) is enqueued or captured in the
  // thread's capture mode; the calls around it, in relaxed mode.
  static cudaError_t event_for(PinnedBlock* block) {
    if (block->copied != nullptr) return cudaSuccess;
    const RelaxedCaptureMode relaxed;
    cudaError_t err = relaxed.error();
    if (err == cudaSuccess) err = cudaEventCreateWithFlags(&block->copied, cudaEventDisableTiming);
    if (err != cudaSuccess) block->state.store(PinnedBlock::kFree, std::memory_order_release);
    return err;
  }

  cudaError_t copy_eagerly(PinnedBlock* block, void* device_table) const {
    cudaError_t err = cudaMemcpyAsync(device_table, block->host, bytes_, cudaMemcpyHostToDevice, stream_);
    if (err == cudaSuccess) err = cudaEventRecord(block->copied, stream_);
    if (err != cudaSuccess) {
      block->state.store(PinnedBlock::kLost, std::memory_order_release);
      return err;
    }
    block->pending = true;
    block->state.store(PinnedBlock::kFree, std::memory_order_release);
    return cudaSuccess;
  }

  // The graph owns the buffer before the copy is captured: whatever fails
  // after, the graph still returns it when it is destroyed.
  cudaError_t graph_owns(PinnedBlock* block) const {
    const RelaxedCaptureMode relaxed;
    if (relaxed.error() != cudaSuccess) {
      block->state.store(PinnedBlock::kFree, std::memory_order_release);
      return relaxed.error();
    }
    block->state.store(PinnedBlock::kGraph, std::memory_order_release);
    cudaUserObject_t owner = nullptr;
    cudaError_t err = cudaUserObjectCreate(&owner, block, release_to_pool, 1, cudaUserObjectNoDestructorSync);
    if (err != cudaSuccess) {
      block->state.store(PinnedBlock::kFree, std::memory_order_release);
      return err;
    }
    err = cudaGraphRetainUserObject(graph_, owner, 1, cudaGraphUserObjectMove);
    if (err != cudaSuccess) cudaUserObjectRelease(owner, 1);  // runs release_to_pool
    return err;
  }

  PinnedBlock* block_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaGraph_t graph_ = nullptr;
  size_t bytes_ = 0;
  bool capturing_ = false;
};

}  // namespace cuda
}  // namespace tinit
