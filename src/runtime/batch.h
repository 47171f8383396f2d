// The sequences being generated together (continuous batching): a sequence joins with its
// request, its prompt runs from the next step on beside the others' decode tokens (in chunks,
// within a budget of tokens a step), it draws one token a step, and it leaves as soon as it is
// done (eos, max_tokens, or its on_token said stop), so a new one can take its place at the next
// step. Every step is one Model::forward for all.
#pragma once

#include <functional>
#include <list>
#include <vector>

#include "dsv4/engine.h"
#include "model/deepseek_v4.h"
#include "runtime/sampler.h"
#include "runtime/session.h"

namespace dsv4::runtime {

// How a sequence's generation ends: its result, or the error that stopped it. Called once.
using OnDone = std::function<void(Result<Generation>)>;

class RunningBatch {
 public:
  // A step feeds at most step_tokens tokens: every decoding sequence's one, and prompt chunks
  // in what is left (at least one token while fewer than step_tokens sequences decode).
  RunningBatch(const model::Model& model, int64_t eos_token_id, int64_t step_tokens);

  // Makes the sequence's session (its caches for prompt + max_tokens); the prompt runs from the
  // next step on. The request must have passed Engine::check. On failure nothing joined and
  // on_done is not called.
  Status admit(const GenerateRequest& request, OnDone on_done);

  // One forward over the sequences' new tokens, then each whose prompt is complete draws a
  // token (the request's on_token sees it, on this thread); the sequences that are done leave
  // through on_done. When the forward fails, every sequence leaves with that error.
  void step();

  // Ends every sequence with `status` (a shutdown).
  void fail_all(const Status& status);

  // What the steps so far did (steps, prompt_tokens, generated_tokens, finished).
  const EngineStats& totals() const { return totals_; }
  size_t size() const { return sequences_.size(); }
  bool empty() const { return sequences_.empty(); }

 private:
  struct Sequence {
    GenerateRequest request;
    OnDone on_done;
    Session session;
    Sampler sampler;
    Generation out;
    int64_t n_prompt_fed = 0;  // prompt tokens in the cache
    int64_t chunk = 0;         // prompt tokens fed in the current step
  };
  static bool prefilled(const Sequence& s);
  bool finished(const Sequence& s) const;
  // What each sequence feeds this step (sets the prompt chunks).
  std::vector<StepInput> plan_step();
  // After the forward: the prompt chunk's logits and logprobs, when asked; then the next token
  // once the prompt is in.
  void take_step_output(Sequence& s);
  void take_prompt_chunk(Sequence& s);
  static int64_t n_alternatives(const Sequence& s);

  const model::Model& model_;
  int64_t eos_token_id_;
  int64_t step_tokens_;
  std::list<Sequence> sequences_;  // stable addresses: step() holds pointers to sessions
  EngineStats totals_;
};

}  // namespace dsv4::runtime
