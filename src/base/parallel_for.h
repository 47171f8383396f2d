// Host-side parallel loops outside the model's ops (the checkpoint loader's decode and scan).
#pragma once

#include <cstdint>
#include <functional>

namespace dsv4 {

// Runs fn(i) for every i in [0, n), on up to std::thread::hardware_concurrency() threads started
// for this call and joined before it returns (the calling thread is one of them), each taking the
// next index as it finishes one. fn must not throw.
//
// Why not OpenMP: a team outlives its parallel region on the thread that opened it, and libgomp
// shortens its spin-wait once more OpenMP threads exist than cores, so a team left on the loading
// thread makes every parallel region of the engine's worker thread sleep and wake: a CPU decode
// step 5× slower (docs/bench_log.md, "Checkpoint values on the host").
void parallel_for(int64_t n, const std::function<void(int64_t)>& fn);

}  // namespace dsv4
