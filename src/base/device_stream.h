// The CUDA stream a thread's device work is ordered on, and a second one beside it.
//
// Every dsv4 op launches on the thread's current stream (kernels/cuda/stream.h) and every device
// buffer is allocated and released on it (buffer.h): cudaStreamPerThread, which a CUDA graph can
// capture (device_graph.h), except while run_beside_on_device runs its side chain. Two chains of
// a decode layer that share no data (the MoE's shared expert and its router with the routed
// experts) then run at once: each is a handful of latency-bound launches, so the layer pays the
// longer chain instead of the sum. The fork and join are events, which a capture turns into the
// graph's edges: a replayed step has the two chains as parallel branches.
#pragma once

#include <functional>

#include "dsv4/status.h"

namespace dsv4 {

// This thread's current stream as a cudaStream_t (base's headers carry no CUDA types):
// cudaStreamPerThread, or the side stream inside run_beside_on_device's `side`. nullptr in a
// build without CUDA.
void* device_stream();

// Inside a side chain: keeps pool memory a buffer gives back (`data`) to be freed after the
// join, and returns true (buffer.cpp). Elsewhere returns false: the caller frees it now.
bool release_after_join(void* data);

// Enqueues `side` on a second stream of this thread and the current device, then `main` on the
// thread's stream, which waits for both before anything enqueued after the call; `main` is not
// run when `side` fails. The side stream starts after everything enqueued before the call, so
// both chains may read what came before and must not touch each other's outputs.
//
// Memory: what `side` allocates comes from the pool on the side stream, and what it releases
// goes back after the join, on the thread's stream (release_after_join), so neither chain is
// handed memory the other may still use, and the pool never has to make one chain wait for the
// other to reuse it. A buffer `side` leaves alive must be released after the call, never inside
// `main`, which the join does not yet follow. `side` must not nest another call. Capturable:
// inside DeviceGraph::capture the side stream joins the capture at the fork and leaves it at the
// join, also when `side` or `main` fails.
Status run_beside_on_device(const std::function<Status()>& side,
                            const std::function<Status()>& main);

}  // namespace dsv4
