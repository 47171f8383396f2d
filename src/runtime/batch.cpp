#include "runtime/batch.h"

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

#include "base/parallel_for.h"
#include "model/cache_copy.h"
#include "model/cache_rollback.h"
#include "runtime/logprobs.h"

namespace dsv4::runtime {

// A constrained sequence's drafts move its constraint, which must be able to take them back.
static_assert(kMaxSpeculativeTokens <= TokenConstraintState::kMaxRollback);

RunningBatch::RunningBatch(const model::Model& model, int64_t eos_token_id, int64_t step_tokens,
                           int64_t prefix_cache_bytes, int64_t speculative_tokens,
                           bool speculate_always, std::shared_ptr<const TokenMask> drawable)
    : model_(model),
      eos_token_id_(eos_token_id),
      step_tokens_(step_tokens),
      speculative_tokens_(speculative_tokens),
      drawable_(std::move(drawable)),
      prefix_cache_(prefix_cache_bytes) {
  DSV4_CHECK(speculative_tokens == 0 || model.n_mtp_blocks() > 0,
             "speculative decoding without an MTP block");
  totals_.drafted_at.assign(static_cast<size_t>(speculative_tokens), 0);
  const bool can_pause = model.n_mtp_blocks() > 0 && model.config().mtp_layers.front().compress_ratio == 0;
  if (speculative_tokens > 0 && !speculate_always && can_pause) policy_.emplace();
  totals_.accepted_at.assign(static_cast<size_t>(speculative_tokens), 0);
}

Result<Session> RunningBatch::new_session(const GenerateRequest& request) {
  const auto context = static_cast<int64_t>(request.prompt.size()) + request.sampling.max_tokens;
  Result<Session> session = Session::create(model_, context);
  if (session.ok() || session.status().code() != StatusCode::kResourceExhausted ||
      prefix_cache_.size() == 0) {
    return session;
  }
  prefix_cache_.clear();  // a running sequence matters more than a kept state
  totals_.prefix_cache_bytes = 0;
  return Session::create(model_, context);
}

Status RunningBatch::admit(const GenerateRequest& request, OnDone on_done) {
  DSV4_ASSIGN_OR_RETURN(Session session, new_session(request));
  Sequence s{request, std::move(on_done), std::move(session),
             Sampler(request.sampling, drawable_), Generation{}};
  if (speculative_tokens_ > 0) {
    DSV4_ASSIGN_OR_RETURN(s.drafts, Drafts::create(model_, s.session.max_positions()));
  }
  DSV4_RETURN_IF_ERROR(resume_from_prefix(s));
  sequences_.push_back(std::move(s));
  return ok_status();
}

Status RunningBatch::resume_from_prefix(Sequence& s) {
  if (!prefix_cache_.enabled()) return ok_status();
  const std::vector<int64_t>& prompt = s.request.prompt;
  const auto last = static_cast<int64_t>(prompt.size()) - 1;
  const PrefixCache::Match match = prefix_cache_.match(prompt);
  const int64_t branch = match.common;
  const bool every_row = s.request.return_prompt_logits || s.request.prompt_logprobs;
  if (!every_row) DSV4_RETURN_IF_ERROR(resume_from_kept(s, match.kept));
  if (branch > s.n_prompt_fed && branch < last && branch >= kMinKeptTokens) {
    s.keep_points.push_back(branch);
  }
  if (last >= kMinKeptTokens) s.keep_points.push_back(last);
  // The same prompt already on its way (a request's n choices): wait for its state.
  s.awaits_twin =
      !every_row && last >= kMinKeptTokens && s.n_prompt_fed < last && has_prefilling_twin(s);
  return ok_status();
}

Status RunningBatch::resume_from_kept(Sequence& s, const PrefixCache::Entry* kept) {
  if (kept == nullptr || static_cast<int64_t>(kept->tokens.size()) <= s.n_prompt_fed) {
    return ok_status();
  }
  DSV4_RETURN_IF_ERROR(s.session.resume(kept->state));
  const auto n = static_cast<int64_t>(kept->tokens.size());
  totals_.cached_prompt_tokens += n - s.n_prompt_fed;
  s.n_prompt_fed = n;
  s.kept_at = n;
  return ok_status();
}

bool RunningBatch::has_prefilling_twin(const Sequence& s) const {
  const std::vector<int64_t>& prompt = s.request.prompt;
  const auto last = static_cast<int64_t>(prompt.size()) - 1;
  return std::any_of(sequences_.begin(), sequences_.end(), [&](const Sequence& t) {
    return &t != &s && !t.awaits_twin && t.n_prompt_fed < last && t.request.prompt == prompt;
  });
}

void RunningBatch::catch_up_twins() {
  for (auto it = sequences_.begin(); it != sequences_.end();) {
    Sequence& s = *it;
    Status caught = ok_status();
    if (s.awaits_twin) {
      caught = resume_from_kept(s, prefix_cache_.match(s.request.prompt).kept);
      s.awaits_twin = caught.ok() &&
                      s.n_prompt_fed < static_cast<int64_t>(s.request.prompt.size()) - 1 &&
                      has_prefilling_twin(s);
    }
    if (caught.ok()) {
      ++it;
      continue;
    }
    ++totals_.finished;  // its state may be half copied: it ends here
    s.on_done(caught);
    it = sequences_.erase(it);
  }
}

bool RunningBatch::snapshot_inside(Sequence& s, int64_t point) {
  s.snapshot.reset();
  if (point != s.keep_points.back() || s.n_prompt_fed + s.chunk <= point) return false;
  const std::span<const int64_t> kept =
      std::span<const int64_t>(s.request.prompt).first(static_cast<size_t>(point));
  if (prefix_cache_.contains(kept)) return true;  // nothing to take: the chunk runs on
  Result<model::SequenceCache> snapshot = model::empty_snapshot(model_, point);
  if (!snapshot.ok()) return false;  // no memory for it: the chunk ends there instead
  s.snapshot = std::move(snapshot).value();
  s.snapshot_at = point;
  return true;
}

std::optional<int64_t> RunningBatch::next_keep_point(const Sequence& s) {
  const auto it = std::upper_bound(s.keep_points.begin(), s.keep_points.end(), s.n_prompt_fed);
  if (it == s.keep_points.end()) return std::nullopt;
  return *it;
}

void RunningBatch::keep_state(const Session& session, std::span<const int64_t> tokens) {
  const auto n = static_cast<int64_t>(tokens.size());
  if (!prefix_cache_.enabled() || n < kMinKeptTokens || prefix_cache_.contains(tokens)) return;
  DSV4_CHECK(session.n_tokens() == n, "keeping a state of %lld tokens under %lld",
             static_cast<long long>(session.n_tokens()), static_cast<long long>(n));
  // A state that cannot be copied (the device is short of memory) is simply not kept.
  Result<model::SequenceCache> state = session.snapshot(model_);
  if (state.ok()) store_state(tokens, std::move(state).value());
}

void RunningBatch::store_state(std::span<const int64_t> tokens, model::SequenceCache state) {
  prefix_cache_.insert({tokens.begin(), tokens.end()}, std::move(state));
  totals_.prefix_cache_bytes = prefix_cache_.bytes();
}

void RunningBatch::keep_finished_state(const Sequence& s) {
  // The last drawn token was never fed.
  std::vector<int64_t> ran = s.request.prompt;
  if (!s.out.tokens.empty()) ran.insert(ran.end(), s.out.tokens.begin(), s.out.tokens.end() - 1);
  keep_state(s.session, ran);
}

bool RunningBatch::prefilled(const Sequence& s) {
  return s.n_prompt_fed == static_cast<int64_t>(s.request.prompt.size());
}

bool RunningBatch::finished(const Sequence& s) const {
  return s.out.stopped_at_eos || s.out.stopped_by_caller ||
         static_cast<int64_t>(s.out.tokens.size()) >= s.request.sampling.max_tokens;
}

Result<std::vector<StepInput>> RunningBatch::plan_step() {
  std::vector<StepInput> inputs;
  int64_t budget = step_tokens_;
  // Drafts take what the decode tokens leave of the budget, but one token for a prompt.
  int64_t draft_budget = step_tokens_;
  bool prompt_waits = false;
  for (const Sequence& s : sequences_) {
    draft_budget -= prefilled(s) ? 1 : 0;
    prompt_waits = prompt_waits || (!prefilled(s) && !s.awaits_twin);
  }
  if (prompt_waits) --draft_budget;
  // Every decoding sequence feeds the token it drew last step (the last token of a generation
  // needs no forward: it left the batch when it was drawn).
  // (A step of prompts alone runs the MTP block over them, ready for their first drafts.)
  const int64_t n_drafting = n_decoding();
  speculating_ =
      speculative_tokens_ > 0 && (!policy_ || n_drafting == 0 || policy_->speculate(n_drafting));
  for (Sequence& s : sequences_) {
    s.step_start = s.session.n_tokens();
    if (!prefilled(s)) continue;
    if (!s.drafts || !speculating_) {
      if (s.drafts) s.drafts->limit(0);  // plain this step: its drafts go unverified
      inputs.push_back({&s.session, std::span<const int64_t>(&s.out.tokens.back(), 1), false});
      --budget;
      continue;
    }
    // Its token and drafts, every row's logits to verify them and streams for the MTP block.
    s.drafts->limit(std::max<int64_t>(draft_budget, 0));
    draft_budget -= s.drafts->size();
    const std::span<const int64_t> tokens = s.drafts->step_tokens(s.out.tokens.back());
    inputs.push_back({&s.session, tokens, true, nullptr, 0, true});
    budget -= static_cast<int64_t>(tokens.size());
    DSV4_RETURN_IF_ERROR(model::arm_rollback(s.session.cache()));
  }
  // Then the prompts, oldest first, in chunks of what the budget leaves: a long prompt cannot
  // stall the others' tokens for longer than one step of step_tokens.
  for (Sequence& s : sequences_) {
    if (prefilled(s) || s.awaits_twin || budget <= 0) continue;
    const std::span<const int64_t> rest =
        std::span<const int64_t>(s.request.prompt).subspan(static_cast<size_t>(s.n_prompt_fed));
    s.chunk = std::min(budget, static_cast<int64_t>(rest.size()));
    // A keep point ends the chunk, but for the last one, whose state the forward takes inside.
    const std::optional<int64_t> point = next_keep_point(s);
    if (point && !snapshot_inside(s, *point)) s.chunk = std::min(s.chunk, *point - s.n_prompt_fed);
    budget -= s.chunk;
    inputs.push_back({&s.session, rest.first(static_cast<size_t>(s.chunk)),
                      s.request.return_prompt_logits || s.request.prompt_logprobs,
                      s.snapshot ? &*s.snapshot : nullptr, s.snapshot_at - s.n_prompt_fed,
                      s.drafts.has_value() && speculating_});
  }
  return inputs;
}

void RunningBatch::take_prompt_chunk(Sequence& s) {
  const std::span<const float> rows = s.session.logits();
  if (s.request.return_prompt_logits)
    s.out.prompt_logits.insert(s.out.prompt_logits.end(), rows.begin(), rows.end());
  if (s.request.prompt_logprobs) {
    // Row r saw the prompt up to position n_prompt_fed + r and predicts the token after it; the
    // chunk's last row, at the prompt's end, predicts the first generated token (drawn below).
    // Rows on the host's cores: each a pass over the vocabulary, ~0.5 ms at V4's, so a long
    // prompt's thousands of rows would hold the batch's next step for seconds on one.
    const auto v = static_cast<size_t>(model_.config().vocab_size);
    const std::vector<int64_t>& prompt = s.request.prompt;
    const int64_t n_rows =
        std::min<int64_t>(s.chunk, static_cast<int64_t>(prompt.size()) - s.n_prompt_fed - 1);
    const size_t first = s.out.prompt_logprobs.size();
    s.out.prompt_logprobs.resize(first + static_cast<size_t>(std::max<int64_t>(n_rows, 0)));
    parallel_for(n_rows, [&](int64_t r) {
      const auto next = static_cast<size_t>(s.n_prompt_fed + r + 1);
      s.out.prompt_logprobs[first + static_cast<size_t>(r)] = token_logprob(
          rows.subspan(static_cast<size_t>(r) * v, v), prompt[next], n_alternatives(s));
    });
  }
  s.n_prompt_fed += s.chunk;
  s.chunk = 0;
  if (s.snapshot) {
    store_state(
        std::span<const int64_t>(s.request.prompt).first(static_cast<size_t>(s.snapshot_at)),
        std::move(*s.snapshot));
    s.kept_at = s.snapshot_at;
    s.snapshot.reset();
  }
  const std::vector<int64_t>& points = s.keep_points;
  const bool at_point = std::binary_search(points.begin(), points.end(), s.n_prompt_fed);
  const bool along = !points.empty() && s.n_prompt_fed < points.back() &&
                     s.n_prompt_fed - s.kept_at >= kKeptSpacing;
  if (at_point || along) {
    keep_state(
        s.session,
        std::span<const int64_t>(s.request.prompt).first(static_cast<size_t>(s.n_prompt_fed)));
    s.kept_at = s.n_prompt_fed;
  }
}

int64_t RunningBatch::n_alternatives(const Sequence& s) {
  return std::max<int64_t>(s.request.logprobs, 0);
}

bool RunningBatch::emit(Sequence& s, std::span<const float> row, int64_t token) {
  Generation& g = s.out;
  g.tokens.push_back(token);
  ++totals_.generated_tokens;
  g.token_times.push_back(std::chrono::steady_clock::now());
  if (s.request.return_step_logits) g.step_logits.insert(g.step_logits.end(), row.begin(), row.end());
  if (s.request.logprobs >= 0) {
    g.logprobs.push_back(token_logprob(row, g.tokens.back(), n_alternatives(s)));
    if (s.request.on_logprob) s.request.on_logprob(g.logprobs.back());
  }
  g.stopped_at_eos = s.request.sampling.stop_at_eos && g.tokens.back() == eos_token_id_;
  g.stopped_by_caller = s.request.on_token && !s.request.on_token(g.tokens.back());
  return !finished(s);
}

Status RunningBatch::take_step_output(Sequence& s) {
  s.mtp_next.clear();
  if (s.drafts && speculating_ && prefilled(s) && s.chunk == 0 &&
      s.session.n_tokens() > s.step_start) {
    return take_verified_step(s);
  }
  const int64_t n_fed = s.chunk;
  if (s.chunk > 0) take_prompt_chunk(s);
  // The MTP block runs over the prompt chunk's positions, each with the token after it.
  const std::vector<int64_t>& prompt = s.request.prompt;
  for (int64_t p = s.step_start + 1; s.drafts && p <= s.step_start + n_fed; ++p) {
    if (p < static_cast<int64_t>(prompt.size())) s.mtp_next.push_back(prompt[p]);
  }
  if (!prefilled(s) || finished(s)) return ok_status();  // more prompt to come; or max_tokens 0
  const std::span<const float> next = s.session.next_token_logits();
  emit(s, next, s.sampler.sample(next));
  if (n_fed > 0 && s.drafts) s.mtp_next.push_back(s.out.tokens.back());
  return ok_status();
}

Status RunningBatch::take_verified_step(Sequence& s) {
  const std::span<const float> rows = s.session.logits();
  const auto v = static_cast<size_t>(model_.config().vocab_size);
  const int64_t n_drafts = s.drafts->size();
  const Verdict verdict = s.drafts->verify(rows, s.sampler);
  totals_.drafted_tokens += n_drafts;
  totals_.accepted_tokens += verdict.n_accepted;
  for (int64_t i = 0; i < n_drafts; ++i) {
    ++totals_.drafted_at[static_cast<size_t>(i)];
    if (i < verdict.n_accepted) ++totals_.accepted_at[static_cast<size_t>(i)];
  }
  // The caches keep the step's first token and the drafts emitted after it; the last token
  // emitted is never fed, as in a plain step.
  size_t n_emitted = 0;
  while (n_emitted < verdict.tokens.size()) {
    const int64_t token = verdict.tokens[n_emitted];
    ++n_emitted;
    if (!emit(s, rows.subspan((n_emitted - 1) * v, v), token)) break;
  }
  DSV4_RETURN_IF_ERROR(model::roll_back(
      s.session.cache(), s.step_start + static_cast<int64_t>(n_emitted), &rollback_copies_));
  s.mtp_next.assign(verdict.tokens.begin(), verdict.tokens.begin() + n_emitted);
  return ok_status();
}

Status RunningBatch::draft_next_steps() {
  std::vector<DraftInput> inputs;
  for (Sequence& s : sequences_) {
    if (!s.drafts || s.mtp_next.empty()) continue;
    // Drafts the next step can use: within max_tokens (a step emits one more than it drafts)
    // and the session's context.
    const int64_t n_left = std::min(
        s.request.sampling.max_tokens - static_cast<int64_t>(s.out.tokens.size()) - 1,
        s.session.max_positions() - s.session.n_tokens() - 1);
    const int64_t n_drafts = prefilled(s) ? std::min(speculative_tokens_, n_left) : 0;
    if (prefilled(s) && n_drafts <= 0) continue;  // it will not draft again
    const auto n_rows = static_cast<int64_t>(s.mtp_next.size());
    inputs.push_back({&*s.drafts, &s.sampler, s.session.streams().rows(0, n_rows),
                      s.step_start, s.mtp_next, n_drafts});
  }
  if (inputs.empty()) return ok_status();
  const auto start = std::chrono::steady_clock::now();
  const Status drafted = draft(model_, inputs);
  ++totals_.draft_runs;
  totals_.draft_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return drafted;
}

void RunningBatch::drop_cancelled() {
  for (auto it = sequences_.begin(); it != sequences_.end();) {
    if (it->request.cancelled == nullptr || !it->request.cancelled->load()) {
      ++it;
      continue;
    }
    // Its state is not kept: a cancelled prompt is rarely sent again.
    it->out.stopped_by_caller = true;
    ++totals_.finished;
    it->on_done(std::move(it->out));
    it = sequences_.erase(it);
  }
}

void RunningBatch::step() {
  drop_cancelled();
  catch_up_twins();
  Result<std::vector<StepInput>> planned = plan_step();
  if (!planned.ok()) {
    fail_all(planned.status());
    return;
  }
  const std::vector<StepInput> inputs = std::move(planned).value();
  if (inputs.empty()) return;
  ++totals_.steps;
  const auto start = std::chrono::steady_clock::now();
  const int64_t n_decoding_now = n_decoding();
  bool decode_only = true;
  for (const Sequence& s : sequences_) {
    totals_.prompt_tokens += s.chunk;
    decode_only = decode_only && s.chunk == 0 && !s.awaits_twin;
  }
  const int64_t drafted_before = totals_.drafted_tokens;
  const int64_t generated_before = totals_.generated_tokens;
  const Status stepped = beside_masks([&] { return runtime::step(model_, inputs); });
  if (!stepped.ok()) {
    fail_all(stepped);
    return;
  }
  std::vector<Status> taken;
  for (Sequence& s : sequences_) taken.push_back(take_step_output(s));
  // Every verified sequence's compressor rollbacks in one launch, before any cache is read
  // (a finished sequence's kept state, the next step).
  const Status undone = rollback_copies_.run();
  if (!undone.ok()) {
    fail_all(undone);
    return;
  }
  size_t index = 0;
  for (auto it = sequences_.begin(); it != sequences_.end(); ++index) {
    if (!taken[index].ok()) {
      ++totals_.finished;
      it->on_done(taken[index]);
      it = sequences_.erase(it);
      continue;
    }
    if (prefilled(*it) && finished(*it)) {
      keep_finished_state(*it);
      ++totals_.finished;
      it->on_done(std::move(it->out));
      it = sequences_.erase(it);
    } else {
      ++it;
    }
  }
  if (speculating_) {
    // The first drafts' masks are made while the MTP block runs.
    const Status drafted = beside_masks([&] { return draft_next_steps(); });
    if (!drafted.ok()) fail_all(drafted);
  }
  // A speculative step that verified no drafts (the first after plain ones) measures nothing.
  if (policy_ && decode_only && (!speculating_ || totals_.drafted_tokens > drafted_before)) {
    policy_->record(
        n_decoding_now, speculating_,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
        static_cast<double>(totals_.generated_tokens - generated_before) /
            static_cast<double>(n_decoding_now));
  }
}

int64_t RunningBatch::n_decoding() const {
  return std::count_if(sequences_.begin(), sequences_.end(),
                       [](const Sequence& s) { return s.drafts && prefilled(s); });
}

Status RunningBatch::beside_masks(const std::function<Status()>& work) {
  std::vector<Sampler*> constrained;
  for (Sequence& s : sequences_) {
    if (s.request.sampling.constraint) constrained.push_back(&s.sampler);
  }
  if (constrained.empty()) return work();
  helper_.start([constrained = std::move(constrained)] {
    for (Sampler* sampler : constrained) sampler->prepare_masks();
  });
  Status status = ok_status();
  try {
    status = work();
  } catch (...) {
    helper_.wait();  // before the sequences it reads can go
    throw;
  }
  helper_.wait();
  return status;
}

void RunningBatch::fail_all(const Status& status) {
  totals_.finished += static_cast<int64_t>(sequences_.size());
  for (Sequence& s : sequences_) s.on_done(status);
  sequences_.clear();
}

}  // namespace dsv4::runtime
