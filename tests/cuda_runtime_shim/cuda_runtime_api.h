// A host-only stand-in for the CUDA runtime calls TableStaging (table_staging.h)
// makes, for tests/table_staging_harness.cpp: streams that capture into fake
// graphs, events the harness completes by hand, user objects whose destructor
// runs when the harness destroys the graph holding them, and a record of what
// was called in which capture mode. Only the names table_staging.h uses.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define CUDART_CB

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorNotReady = 600,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901,
};
enum cudaStreamCaptureStatus {
  cudaStreamCaptureStatusNone = 0,
  cudaStreamCaptureStatusActive = 1,
  cudaStreamCaptureStatusInvalidated = 2,
};
enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2,
};
enum cudaMemcpyKind { cudaMemcpyHostToDevice = 1 };
constexpr unsigned cudaEventDisableTiming = 2;
constexpr unsigned cudaHostAllocDefault = 0;
constexpr unsigned cudaUserObjectNoDestructorSync = 1;
constexpr unsigned cudaGraphUserObjectMove = 1;

typedef void (*cudaHostFn_t)(void*);

namespace shim {

struct Graph;
struct UserObject {
  void* ptr;
  cudaHostFn_t destroy;
  unsigned refs;
};
struct Graph {
  std::vector<UserObject*> objects;
  std::vector<const void*> copies_from;  // the host buffer of each memcpy node
};
struct Stream {
  Graph* capture = nullptr;  // set while captured
  cudaError_t fail_copy = cudaSuccess;
  std::vector<const void*> copies_from;  // eager copies, in order
};
struct Event {
  bool recorded = false;
  bool done = false;
};

struct Runtime {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
  bool capturing = false;  // any stream of the (one) thread
  std::vector<std::string> violations;
  std::vector<Event*> events;  // every one created, for the harness to complete
  int host_allocs = 0;
  int event_queries = 0;
  void prohibited(const char* call) {
    if (capturing && mode != cudaStreamCaptureModeRelaxed) violations.push_back(call);
  }
};
inline Runtime& rt() {
  static Runtime r;
  return r;
}

// What the harness does for CUDA: end a capture, finish an event, destroy a graph.
inline void destroy(Graph* graph) {
  for (UserObject* o : graph->objects) {
    if (--o->refs == 0) {
      o->destroy(o->ptr);
      delete o;
    }
  }
  graph->objects.clear();
}

}  // namespace shim

typedef shim::Stream* cudaStream_t;
typedef shim::Event* cudaEvent_t;
typedef shim::Graph* cudaGraph_t;
typedef shim::UserObject* cudaUserObject_t;

inline cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode* mode) {
  const cudaStreamCaptureMode old = shim::rt().mode;
  shim::rt().mode = *mode;
  *mode = old;
  return cudaSuccess;
}

inline cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream, cudaStreamCaptureStatus* status,
                                            unsigned long long* id = nullptr, cudaGraph_t* graph = nullptr) {
  (void)id;
  *status = stream->capture != nullptr ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
  if (graph != nullptr) *graph = stream->capture;
  return cudaSuccess;
}

inline cudaError_t cudaHostAlloc(void** ptr, size_t bytes, unsigned flags) {
  (void)flags;
  shim::rt().prohibited("cudaHostAlloc");
  ++shim::rt().host_allocs;
  *ptr = std::malloc(bytes);
  return *ptr != nullptr ? cudaSuccess : cudaErrorMemoryAllocation;
}

inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags) {
  (void)flags;
  shim::rt().prohibited("cudaEventCreateWithFlags");
  *event = new shim::Event;
  shim::rt().events.push_back(*event);
  return cudaSuccess;
}

inline cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (stream->capture != nullptr) shim::rt().violations.push_back("cudaEventRecord captured");
  event->recorded = true;
  event->done = false;
  return cudaSuccess;
}

inline cudaError_t cudaEventQuery(cudaEvent_t event) {
  // torch's rule, which TableStaging keeps: no event query while a capture runs.
  if (shim::rt().capturing) shim::rt().violations.push_back("cudaEventQuery during a capture");
  ++shim::rt().event_queries;
  return !event->recorded || event->done ? cudaSuccess : cudaErrorNotReady;
}

inline cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  (void)kind;
  if (shim::rt().mode == cudaStreamCaptureModeRelaxed && shim::rt().capturing) {
    shim::rt().violations.push_back("cudaMemcpyAsync in relaxed mode");
  }
  if (stream->fail_copy != cudaSuccess) return stream->fail_copy;
  std::memcpy(dst, src, bytes);
  (stream->capture != nullptr ? stream->capture->copies_from : stream->copies_from).push_back(src);
  return cudaSuccess;
}

inline cudaError_t cudaUserObjectCreate(cudaUserObject_t* object, void* ptr, cudaHostFn_t destroy, unsigned refs,
                                        unsigned flags) {
  shim::rt().prohibited("cudaUserObjectCreate");
  if (flags != cudaUserObjectNoDestructorSync || refs == 0) return cudaErrorInvalidValue;
  *object = new shim::UserObject{ptr, destroy, refs};
  return cudaSuccess;
}

inline cudaError_t cudaGraphRetainUserObject(cudaGraph_t graph, cudaUserObject_t object, unsigned count,
                                             unsigned flags) {
  shim::rt().prohibited("cudaGraphRetainUserObject");
  if (graph == nullptr || count != 1 || flags != cudaGraphUserObjectMove) return cudaErrorInvalidValue;
  graph->objects.push_back(object);  // moved: the caller's reference becomes the graph's
  return cudaSuccess;
}

inline cudaError_t cudaUserObjectRelease(cudaUserObject_t object, unsigned count) {
  object->refs -= count;
  if (object->refs == 0) {
    object->destroy(object->ptr);
    delete object;
  }
  return cudaSuccess;
}
