// The sequences being generated together (continuous batching): a sequence joins with its
// request, its prompt runs in the next step beside the others' decode tokens, it draws one token
// a step, and it leaves as soon as it is done (eos, max_tokens, or its on_token said stop), so a
// new one can take its place at the next step. Every step is one Model::forward for all.
#pragma once

#include <functional>
#include <list>

#include "dsv4/engine.h"
#include "model/deepseek_v4.h"
#include "runtime/sampler.h"
#include "runtime/session.h"

namespace dsv4::runtime {

// How a sequence's generation ends: its result, or the error that stopped it. Called once.
using OnDone = std::function<void(Result<Generation>)>;

class RunningBatch {
 public:
  RunningBatch(const model::Model& model, int64_t eos_token_id);

  // Makes the sequence's session (its caches for prompt + max_tokens); the prompt runs in the
  // next step. The request must have passed Engine::check. On failure nothing joined and
  // on_done is not called.
  Status admit(const GenerateRequest& request, OnDone on_done);

  // One forward over every sequence's new tokens, then each draws a token (the request's
  // on_token sees it, on this thread); the sequences that are done leave through on_done. When
  // the forward fails, every sequence leaves with that error.
  void step();

  // Ends every sequence with `status` (a shutdown).
  void fail_all(const Status& status);

  size_t size() const { return sequences_.size(); }
  bool empty() const { return sequences_.empty(); }

 private:
  struct Sequence {
    GenerateRequest request;
    OnDone on_done;
    Session session;
    Sampler sampler;
    Generation out;
    bool prefilled = false;
  };
  bool finished(const Sequence& s) const;
  // After the forward: keep the prompt's logits, draw the next token unless already done.
  void take_step_output(Sequence& s);

  const model::Model& model_;
  int64_t eos_token_id_;
  std::list<Sequence> sequences_;  // stable addresses: step() holds pointers to sessions
};

}  // namespace dsv4::runtime
