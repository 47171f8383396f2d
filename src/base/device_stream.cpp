#include "base/device_stream.h"

#include <initializer_list>
#include <string>
#include <vector>

#include "base/check.h"

#ifdef DSV4_WITH_CUDA
#include <cuda_runtime_api.h>

#include "base/cuda_status.h"
#endif

namespace dsv4 {

#ifdef DSV4_WITH_CUDA
namespace {

// A second stream of one thread on one device, with the events that fork it from the thread's
// stream and join it back. Blocking like cudaStreamPerThread, so work on the legacy stream
// (a synchronous cudaMemcpy) still waits for it.
struct SideStream {
  int device = 0;
  cudaStream_t stream = nullptr;
  cudaEvent_t forked = nullptr;
  cudaEvent_t joined = nullptr;
};

// Per thread, as cudaStreamPerThread is: each thread's chains are its own, and no lock is
// needed. The side streams are made on a thread's first fork on each device and live as long
// as the thread.
struct ThreadStreams {
  cudaStream_t current = cudaStreamPerThread;
  std::vector<SideStream> side;  // by device ordinal; stream nullptr until first used
  std::vector<void*> released;   // pool memory the running side chain gave back

  ~ThreadStreams() {
    // Errors at teardown have nowhere to go; the context may be gone already.
    for (const SideStream& s : side) {
      if (s.stream == nullptr) continue;
      cudaEventDestroy(s.forked);
      cudaEventDestroy(s.joined);
      cudaStreamDestroy(s.stream);
    }
  }
};

ThreadStreams& thread_streams() {
  thread_local ThreadStreams streams;
  return streams;
}

// This thread's side stream on the current device, made on first use (a capture allows it: its
// mode is relaxed, device_graph.cpp).
Result<SideStream> side_stream(ThreadStreams& t) {
  int device = 0;
  DSV4_RETURN_IF_ERROR(cuda_status(cudaGetDevice(&device), "cudaGetDevice"));
  if (static_cast<int>(t.side.size()) <= device) t.side.resize(device + 1);
  SideStream& s = t.side[device];
  if (s.stream != nullptr) return s;
  SideStream made;
  made.device = device;
  DSV4_RETURN_IF_ERROR(
      cuda_status(cudaStreamCreateWithFlags(&made.stream, cudaStreamDefault), "cudaStreamCreate"));
  DSV4_RETURN_IF_ERROR(cuda_status(cudaEventCreateWithFlags(&made.forked, cudaEventDisableTiming),
                                   "cudaEventCreate"));
  DSV4_RETURN_IF_ERROR(cuda_status(cudaEventCreateWithFlags(&made.joined, cudaEventDisableTiming),
                                   "cudaEventCreate"));
  s = made;
  return s;
}

// The thread's stream waits for the side stream's work so far, then frees what the side chain
// released. cudaStreamPerThread names the current device's: `main` may have made another device
// current (an expert-parallel rank), so this runs on the side stream's device.
Status join(const SideStream& s, std::vector<void*>& released) {
  int current = 0;
  DSV4_RETURN_IF_ERROR(cuda_status(cudaGetDevice(&current), "cudaGetDevice"));
  if (current != s.device) {
    DSV4_RETURN_IF_ERROR(cuda_status(cudaSetDevice(s.device), "cudaSetDevice"));
  }
  Status joined = cuda_status(cudaStreamWaitEvent(cudaStreamPerThread, s.joined, 0),
                              "cudaStreamWaitEvent (join)");
  // Without the wait the memory may still be in use: kept from the pool (a failed capture's
  // memory is its graph's anyway).
  for (void* data : released) {
    if (!joined.ok()) break;
    joined = cuda_status(cudaFreeAsync(data, cudaStreamPerThread), "cudaFreeAsync");
  }
  released.clear();
  if (current != s.device) {
    DSV4_RETURN_IF_ERROR(cuda_status(cudaSetDevice(current), "cudaSetDevice"));
  }
  return joined;
}

}  // namespace

void* device_stream() { return thread_streams().current; }

bool release_after_join(void* data) {
  ThreadStreams& t = thread_streams();
  if (t.current == cudaStreamPerThread) return false;
  t.released.push_back(data);
  return true;
}

Status run_beside_on_device(const std::function<Status()>& side,
                            const std::function<Status()>& main) {
  ThreadStreams& t = thread_streams();
  DSV4_CHECK(t.current == cudaStreamPerThread, "run_beside_on_device inside another's side");
  DSV4_ASSIGN_OR_RETURN(const SideStream s, side_stream(t));
  DSV4_RETURN_IF_ERROR(
      cuda_status(cudaEventRecord(s.forked, cudaStreamPerThread), "cudaEventRecord (fork)"));
  DSV4_RETURN_IF_ERROR(
      cuda_status(cudaStreamWaitEvent(s.stream, s.forked, 0), "cudaStreamWaitEvent (fork)"));
  t.current = s.stream;
  const Status side_done = side();
  t.current = cudaStreamPerThread;
  // Joined whatever happened: a capture with the side stream left forked cannot end.
  const Status recorded =
      cuda_status(cudaEventRecord(s.joined, s.stream), "cudaEventRecord (join)");
  const Status main_done = side_done.ok() ? main() : ok_status();
  // Unjoined, what the side chain released may still be in use (or be a broken capture's graph
  // memory): kept from the pool, as join() keeps it, never freed by a later call's join.
  if (!recorded.ok()) t.released.clear();
  const Status joined = recorded.ok() ? join(s, t.released) : recorded;
  for (const Status* status : {&side_done, &main_done, &joined}) {
    if (!status->ok()) return *status;
  }
  return ok_status();
}
#else
void* device_stream() { return nullptr; }

bool release_after_join(void*) { return false; }

Status run_beside_on_device(const std::function<Status()>&, const std::function<Status()>&) {
  return unimplemented("this build of dsv4 has no CUDA support");
}
#endif

}  // namespace dsv4
