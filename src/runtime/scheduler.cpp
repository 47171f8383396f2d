#include "runtime/scheduler.h"

#include <exception>
#include <optional>
#include <string>
#include <utility>

namespace dsv4::runtime {

// One run() call: its requests and what the worker hands back to the calling thread. Shared by
// the caller and the worker's callbacks, so it outlives a caller that left by an exception.
struct Scheduler::Call {
  struct Token {
    size_t index;
    int64_t token;
    std::optional<TokenLogprob> logprob;  // for the request's on_logprob
  };
  explicit Call(const std::vector<GenerateRequest>& r)
      : requests(r),
        results(r.size()),
        stopped(r.size(), false),
        n_seen(r.size(), 0),
        pending(r.size()) {}

  std::vector<GenerateRequest> requests;  // as the caller gave them
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<Token> tokens;  // drawn, not yet seen by the caller
  std::vector<std::optional<Result<Generation>>> results;
  size_t n_done = 0;
  std::vector<bool> stopped;                         // the caller's on_token said stop
  std::vector<size_t> n_seen;                        // tokens the caller's on_token saw
  std::vector<std::optional<TokenLogprob>> pending;  // the logprob of the token drawn next

  // The worker's side: a token's logprob, then the token.
  void drawn_logprob(size_t i, const TokenLogprob& logprob) {
    const std::lock_guard<std::mutex> lock(mutex);
    pending[i] = logprob;
  }
  bool drawn(size_t i, int64_t token) {
    const std::lock_guard<std::mutex> lock(mutex);
    if (stopped[i]) return false;
    tokens.push_back({i, token, std::exchange(pending[i], std::nullopt)});
    changed.notify_one();
    return true;
  }
  void done(size_t i, Result<Generation> result) {
    const std::lock_guard<std::mutex> lock(mutex);
    results[i] = std::move(result);
    ++n_done;
    changed.notify_one();
  }

  // The caller's side: every drawn token to its request's on_token, until all are done.
  void deliver() {
    std::unique_lock<std::mutex> lock(mutex);
    try {
      while (true) {
        changed.wait(lock, [&] { return !tokens.empty() || n_done == requests.size(); });
        if (tokens.empty()) return;
        const Token t = std::move(tokens.front());
        tokens.pop_front();
        if (stopped[t.index]) continue;
        lock.unlock();
        const GenerateRequest& r = requests[t.index];
        if (t.logprob && r.on_logprob) r.on_logprob(*t.logprob);
        const bool more = r.on_token(t.token);
        lock.lock();
        ++n_seen[t.index];
        stopped[t.index] = !more;
      }
    } catch (...) {
      if (!lock.owns_lock()) lock.lock();
      stopped.assign(stopped.size(), true);  // the worker drops them at their next token
      throw;
    }
  }

  // Request i's generation as its caller saw it: a stop cuts what the worker drew after it.
  Result<Generation> result(size_t i, int64_t eos_token_id) {
    Result<Generation>& r = *results[i];
    if (!r.ok() || !stopped[i]) return std::move(r);
    Generation g = std::move(r).value();
    const size_t width = g.tokens.empty() ? 0 : g.step_logits.size() / g.tokens.size();
    g.tokens.resize(n_seen[i]);
    g.token_times.resize(n_seen[i]);
    if (!g.logprobs.empty()) g.logprobs.resize(n_seen[i]);
    g.step_logits.resize(n_seen[i] * width);
    g.stopped_by_caller = true;
    g.stopped_at_eos =
        requests[i].sampling.stop_at_eos && !g.tokens.empty() && g.tokens.back() == eos_token_id;
    return g;
  }
};

Scheduler::Scheduler(const model::Model& model, size_t max_batch, const BatchOptions& options)
    : batch_(model, options.eos_token_id, options.step_tokens, options.prefix_cache_bytes,
             options.speculative_tokens, options.speculate_always, options.drawable),
      eos_token_id_(options.eos_token_id),
      max_batch_(max_batch),
      worker_([this] { work(); }) {}

Scheduler::~Scheduler() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    shutting_down_ = true;
  }
  wake_.notify_all();
  worker_.join();
  for (Waiting& w : waiting_) w.call->done(w.index, shut_down());
}

Status Scheduler::failed(const std::exception& e) {
  return internal_error(std::string("generation failed: ") + e.what());
}

Status Scheduler::shut_down() {
  return internal_error("the engine shut down before the request ran");
}

Result<std::vector<Generation>> Scheduler::run(const std::vector<GenerateRequest>& requests) {
  auto call = std::make_shared<Call>(requests);
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (shutting_down_) return shut_down();
    for (size_t i = 0; i < requests.size(); ++i) waiting_.push_back({call, i});
  }
  wake_.notify_one();
  call->deliver();
  std::vector<Generation> out;
  for (size_t i = 0; i < requests.size(); ++i) {
    DSV4_ASSIGN_OR_RETURN(Generation g, call->result(i, eos_token_id_));
    out.push_back(std::move(g));
  }
  return out;
}

EngineStats Scheduler::stats() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  EngineStats now = stats_;
  now.waiting = static_cast<int64_t>(waiting_.size());
  return now;
}

void Scheduler::work() {
  while (true) {
    std::vector<Waiting> joining;
    std::vector<Waiting> cancelled;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return shutting_down_ || !waiting_.empty() || !batch_.empty(); });
      if (shutting_down_) break;
      std::erase_if(waiting_, [&](const Waiting& w) {
        const auto& flag = w.call->requests[w.index].cancelled;
        if (flag == nullptr || !flag->load()) return false;
        cancelled.push_back(w);
        return true;
      });
      while (!waiting_.empty() && batch_.size() + joining.size() < max_batch_) {
        joining.push_back(std::move(waiting_.front()));
        waiting_.pop_front();
      }
    }
    for (Waiting& w : cancelled) {
      Generation none;
      none.stopped_by_caller = true;
      w.call->done(w.index, std::move(none));
    }
    admit(std::move(joining));
    // An exception from the model (the CPU reference's containers allocate with new) ends the
    // batch's sequences with an error instead of the process, as it ended one caller's call
    // when generation ran on the caller's thread.
    try {
      batch_.step();
    } catch (const std::exception& e) {
      batch_.fail_all(failed(e));
    }
    const std::lock_guard<std::mutex> lock(mutex_);
    stats_ = batch_.totals();
    stats_.running = static_cast<int64_t>(batch_.size());
  }
  batch_.fail_all(shut_down());
}

void Scheduler::admit(std::vector<Waiting> joining) {
  for (Waiting& w : joining) {
    GenerateRequest request = w.call->requests[w.index];
    if (request.on_token) {
      request.on_token = [call = w.call, i = w.index](int64_t token) {
        return call->drawn(i, token);
      };
    }
    if (request.on_logprob && request.on_token) {
      request.on_logprob = [call = w.call, i = w.index](const TokenLogprob& logprob) {
        call->drawn_logprob(i, logprob);
      };
    } else {
      request.on_logprob = nullptr;  // delivered with on_token's tokens only
    }
    Status admitted = ok_status();
    try {
      admitted = batch_.admit(request, [call = w.call, i = w.index](Result<Generation> r) {
        call->done(i, std::move(r));
      });
    } catch (const std::exception& e) {
      admitted = failed(e);  // a session's caches, say: this request fails, the others go on
    }
    if (!admitted.ok()) w.call->done(w.index, admitted);
  }
}

}  // namespace dsv4::runtime
