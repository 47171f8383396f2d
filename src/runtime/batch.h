// The sequences being generated together (continuous batching): a sequence joins with its
// request, its prompt runs from the next step on beside the others' decode tokens (in chunks,
// within a budget of tokens a step), it draws one token a step, and it leaves as soon as it is
// done (eos, max_tokens, or its on_token said stop), so a new one can take its place at the next
// step. Every step is one Model::forward for all.
//
// It keeps sequences' states in a prefix cache (runtime/prefix_cache.h) and starts a prompt from
// the longest one it begins with. These states of each sequence are kept:
//   - after its prompt but the last token (taken inside the forward of the chunk that runs past
//     it): the same prompt again, and a chat's next turn where the template rewrites the end of
//     the prompt (a thinking turn's reasoning is dropped from the history);
//   - where its prompt branches off the tokens of a kept state (their longest common start; a
//     chunk ends there): the start that two prompts shared - a system prompt, a document - is
//     then kept for a third;
//   - along a long prompt, at the end of a chunk at least kKeptSpacing tokens past the last kept
//     state: another prompt that shares a long start with the first;
//   - after all it ran when it is done (prompt and reply but the last token): the next turn of a
//     chat that keeps the reply as is.
// A sequence whose prompt another one is prefilling (a request's n choices, admitted together)
// waits for that one's state instead of computing the same tokens.
// With speculative decoding (runtime/speculative.h) a decoding sequence feeds its drafts beside
// its token and may emit several tokens a step; after the forward the MTP block runs over every
// sequence's new positions and drafts the next step's tokens.
// A constrained sequence's next token mask (structured outputs) is made on a helper thread while
// the forward runs (and, with speculation, its first draft's while the MTP block runs).
#pragma once

#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <vector>

#include "dsv4/engine.h"
#include "model/deepseek_v4.h"
#include "model/gather_views.h"
#include "runtime/helper_thread.h"
#include "runtime/prefix_cache.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "runtime/speculation_policy.h"
#include "runtime/speculative.h"

namespace dsv4::runtime {

// How a sequence's generation ends: its result, or the error that stopped it. Called once.
using OnDone = std::function<void(Result<Generation>)>;

class RunningBatch {
 public:
  // States of fewer tokens are not kept: they cost less to compute than to keep.
  static constexpr int64_t kMinKeptTokens = 64;
  // Along a prompt, states this far apart at least (each holds its entries so far, so closer
  // ones would cost memory quadratic in the prompt's length).
  static constexpr int64_t kKeptSpacing = 1024;

  // A step feeds at most step_tokens tokens: every decoding sequence's one, and prompt chunks
  // in what is left (at least one token while fewer than step_tokens sequences decode). At most
  // prefix_cache_bytes of kept states (0: no prefix cache).
  // With speculative_tokens k > 0 (the model has an MTP block), a decoding sequence's step
  // feeds k drafts besides its token (fewer near its end), which count against step_tokens:
  // in every step with speculate_always, else in the steps where the batch's measured step
  // times say it pays (runtime/speculation_policy.h; a plain step leaves the MTP block's cache
  // behind, and the next speculative one moves it on: model::skip_mtp_cache). Only the ids in
  // `drawable` (null: every id) are ever drawn.
  RunningBatch(const model::Model& model, int64_t eos_token_id, int64_t step_tokens,
               int64_t prefix_cache_bytes, int64_t speculative_tokens = 0,
               bool speculate_always = true,
               std::shared_ptr<const TokenMask> drawable = nullptr);

  // Makes the sequence's session (its caches for prompt + max_tokens) and starts it from the
  // longest kept state its prompt begins with (unless it asks for the prompt's logits or
  // logprobs, which need every row computed); the rest of the prompt runs from the next step
  // on. The request must have passed Engine::check. On failure nothing joined and on_done is
  // not called.
  Status admit(const GenerateRequest& request, OnDone on_done);

  // One forward over the sequences' new tokens, then each whose prompt is complete draws a
  // token (the request's on_token sees it, on this thread); the sequences that are done leave
  // through on_done. When the forward fails, every sequence leaves with that error. A sequence
  // whose request was cancelled leaves before the forward, with the tokens it drew.
  void step();

  // Ends every sequence with `status` (a shutdown).
  void fail_all(const Status& status);

  // What the steps so far did (steps, prompt_tokens, cached_prompt_tokens, generated_tokens,
  // finished) and the prefix cache's size.
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
    // Prompt positions where a chunk ends and the state is kept, ascending: the branch point and
    // all but the last token (none without a prefix cache).
    std::vector<int64_t> keep_points = {};
    int64_t kept_at = 0;  // prompt tokens of the last state kept along the prompt
    // Another sequence prefills the same prompt: this one feeds nothing until that one's state
    // after all but the last prompt token is kept, then starts from it.
    bool awaits_twin = false;
    // The state after all but the prompt's last token, taken inside this step's forward when
    // its chunk runs past that point (no step of its own), and its prompt tokens.
    std::optional<model::SequenceCache> snapshot = std::nullopt;
    int64_t snapshot_at = 0;
    // Speculative decoding: the drafts and the MTP block's cache, and the positions this step
    // kept for the MTP block to run over (from step_start, the tokens after each).
    std::optional<Drafts> drafts = std::nullopt;
    int64_t step_start = 0;
    std::vector<int64_t> mtp_next = {};
  };
  // Ends the sequences whose request was cancelled (GenerateRequest::cancelled).
  void drop_cancelled();
  // The Session for `request`; when memory is short, the prefix cache makes way for it.
  Result<Session> new_session(const GenerateRequest& request);
  // Starts s from the longest kept prefix, and sets where its prompt's states are kept.
  Status resume_from_prefix(Sequence& s);
  // Starts s from `kept` (the longest kept state of its prompt, PrefixCache::match), when
  // longer than what it has fed.
  Status resume_from_kept(Sequence& s, const PrefixCache::Entry* kept);
  // Another sequence, not waiting itself, is still prefilling s's prompt short of its last token.
  bool has_prefilling_twin(const Sequence& s) const;
  // Waiting sequences start from their twin's kept state once it is there, or go on alone once
  // no twin is left to wait for; one whose copy fails ends with that error.
  void catch_up_twins();
  // Whether s's chunk of this step takes the state at `point` inside the forward (the last keep
  // point, past which the chunk runs, not yet kept, and memory for it), and if so readies it.
  bool snapshot_inside(Sequence& s, int64_t point);
  // The first keep point past what s's prompt has fed.
  static std::optional<int64_t> next_keep_point(const Sequence& s);
  // Keeps the session's state after `tokens` (what it ran), when worth it.
  void keep_state(const Session& session, std::span<const int64_t> tokens);
  void keep_finished_state(const Sequence& s);
  // Puts a state in the prefix cache, and its size in the totals.
  void store_state(std::span<const int64_t> tokens, model::SequenceCache state);
  static bool prefilled(const Sequence& s);
  bool finished(const Sequence& s) const;
  // What each sequence feeds this step (sets the prompt chunks); fails when a verify step's
  // rollback cannot be armed (model::arm_rollback).
  Result<std::vector<StepInput>> plan_step();
  // After the forward: the prompt chunk's logits and logprobs, when asked; then the next token
  // once the prompt is in.
  Status take_step_output(Sequence& s);
  void take_prompt_chunk(Sequence& s);
  // Appends a drawn token (drawn at logits `row`) to s's generation; false once s is done.
  bool emit(Sequence& s, std::span<const float> row, int64_t token);
  // A speculative decode step's output: the verified tokens, the caches rolled back to them
  // (their copies into rollback_copies_, which step() runs for all sequences at once).
  Status take_verified_step(Sequence& s);
  // The MTP block over every sequence's new positions, drafting their next steps.
  Status draft_next_steps();
  // Runs `work` (a forward) while helper_ makes the constrained sequences' next token masks
  // (Sampler::prepare_masks); returns what it returned, once both are done.
  Status beside_masks(const std::function<Status()>& work);
  // Sequences that decode with drafts (prompt done).
  int64_t n_decoding() const;
  static int64_t n_alternatives(const Sequence& s);

  const model::Model& model_;
  int64_t eos_token_id_;
  int64_t step_tokens_;
  int64_t speculative_tokens_;
  std::shared_ptr<const TokenMask> drawable_;
  // Whether this step's decoding sequences feed their drafts; the policy that decides it when
  // not always (a sliding-window MTP block only: a compressed one cannot skip positions).
  bool speculating_ = false;
  std::optional<SpeculationPolicy> policy_;
  std::list<Sequence> sequences_;  // stable addresses: step() holds pointers to sessions
  model::BlockCopies rollback_copies_;  // the verified sequences' cache copies of a step
  PrefixCache prefix_cache_;
  EngineStats totals_;
  HelperThread helper_;  // last: it may still touch the sequences' samplers until waited for
};

}  // namespace dsv4::runtime
