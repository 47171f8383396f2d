// Serves Engine::generate and generate_batch from any number of threads at once: one worker
// thread steps a RunningBatch, and each call's requests join it at the worker's next step (all of
// a call's requests in the same step, up to max_batch sequences; the rest wait in arrival order)
// and leave as each finishes, so concurrent callers share every forward (continuous batching).
// A request's on_token still runs on the thread that called, as the worker draws the tokens;
// when it returns false, tokens the worker drew after that one are dropped from the result. A
// cancelled request (GenerateRequest::cancelled) leaves the batch at the next step, or the queue
// before it joins.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/batch.h"

namespace dsv4::runtime {

class Scheduler {
 public:
  // What the batch is made of (RunningBatch's arguments).
  struct BatchOptions {
    int64_t eos_token_id = -1;
    int64_t step_tokens = 2048;         // at most fed a step
    int64_t prefix_cache_bytes = 0;     // of kept states
    int64_t speculative_tokens = 0;     // drafts a decoding sequence feeds
    bool speculate_always = true;       // in every step, or where it pays (RunningBatch)
    std::shared_ptr<const TokenMask> drawable = nullptr;  // the ids ever drawn (null: all)
  };
  // max_batch sequences at most in the batch.
  Scheduler(const model::Model& model, size_t max_batch, const BatchOptions& options);
  // Lets the running step finish, then fails every request still waiting or running.
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // The requests' generations in order, or the first error; they must have passed
  // Engine::check.
  Result<std::vector<Generation>> run(const std::vector<GenerateRequest>& requests);
  // The batch's totals and gauges as of its last step (any thread).
  EngineStats stats() const;

 private:
  struct Call;
  struct Waiting {
    std::shared_ptr<Call> call;
    size_t index;  // the request's place in its call
  };
  void work();
  void admit(std::vector<Waiting> joining);
  static Status shut_down();
  static Status failed(const std::exception& e);

  RunningBatch batch_;  // the worker's alone
  const int64_t eos_token_id_;
  const size_t max_batch_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Waiting> waiting_;  // under mutex_
  EngineStats stats_;            // under mutex_: the batch's, copied after each step
  bool shutting_down_ = false;   // under mutex_
  std::thread worker_;           // last: starts once everything above exists
};

}  // namespace dsv4::runtime
