#include "runtime/session.h"

#include <string>
#include <utility>

#include "model/cache_copy.h"

namespace dsv4::runtime {

Result<Session> Session::create(const model::Model& model, int64_t max_positions) {
  Session session;
  DSV4_ASSIGN_OR_RETURN(session.cache_, model.new_cache(max_positions));
  session.max_positions_ = max_positions;
  session.vocab_size_ = model.config().vocab_size;
  return session;
}

std::span<const float> Session::next_token_logits() const {
  DSV4_CHECK(logits_.size() >= static_cast<size_t>(vocab_size_), "no step has run yet");
  return std::span<const float>(logits_).last(static_cast<size_t>(vocab_size_));
}

Result<model::SequenceCache> Session::snapshot(const model::Model& model) const {
  return model::snapshot_cache(model, cache_);
}

Status Session::resume(const model::SequenceCache& state) {
  DSV4_RETURN_IF_ERROR(model::copy_cache_state(state, cache_));
  logits_.clear();
  return ok_status();
}

// Besides the two above, the only code allowed into a Session's cache and logits: step() below.
struct StepRunner {
  // One buffer f32 [n, M, D] for the final streams of every input that keeps them, in order:
  // the forward writes them in one copy when every row keeps them (a speculative step); null
  // when none does.
  static Result<std::shared_ptr<const Tensor>> kept_streams(const model::Model& model,
                                                            std::span<const StepInput> inputs) {
    int64_t n = 0;
    for (const StepInput& in : inputs) {
      n += in.keep_streams ? static_cast<int64_t>(in.tokens.size()) : 0;
    }
    if (n == 0) return std::shared_ptr<const Tensor>();
    const checkpoint::ModelConfig& c = model.config();
    DSV4_ASSIGN_OR_RETURN(Tensor streams,
                          Tensor::empty(DType::kF32, {n, c.hc_mult, c.hidden_size}, model.device()));
    return std::make_shared<const Tensor>(std::move(streams));
  }

  // The sequences' logits rows are consecutive rows of one buffer, which the head writes in one
  // call (Model::lm_head) with no copy into each sequence's rows on the device. Each sequence's
  // rows then come back straight into its own vector: one copy of them all into a staging
  // vector moves every byte twice on the host (a decode step took ~0.1 ms longer at B = 1 and
  // 1.7 ms at B = 32 that way, H100: docs/bench.md).
  //
  // A chunk that asks more rows than a decode run has (a prompt's, for its logits or logprobs)
  // takes them in host memory instead, a vector the head writes a slab at a time
  // (model::kHostLogitsSlabRows): a step's logits on the device stay within kMaxDecodeRun rows
  // a sequence, what runtime/step_memory_plan.h plans, however long the prompt's chunk.
  // The logits rows `in` asks: every row of its chunk, or its last.
  static int64_t asked_rows(const StepInput& in) {
    return in.all_logits ? static_cast<int64_t>(in.tokens.size()) : 1;
  }

  static Status run(const model::Model& model, std::span<const StepInput> inputs) {
    const int64_t v = model.config().vocab_size;
    // The logits of each input that takes them in host memory; empty: rows of `logits`.
    std::vector<std::vector<float>> on_host(inputs.size());
    int64_t n_rows = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const StepInput& in = inputs[i];
      Session& s = *in.session;
      const auto n = static_cast<int64_t>(in.tokens.size());
      if (s.n_tokens() + n > s.max_positions_) {
        return invalid_argument("sequence of " + std::to_string(s.n_tokens() + n) +
                                " tokens exceeds its context of " +
                                std::to_string(s.max_positions_));
      }
      const int64_t asked = asked_rows(in);
      if (model.device() != Device::kCpu && asked > model::AttentionCache::kMaxDecodeRun) {
        on_host[i].resize(static_cast<size_t>(asked * v));
      } else {
        n_rows += asked;
      }
    }
    DSV4_ASSIGN_OR_RETURN(Tensor logits, Tensor::empty(DType::kF32, {n_rows, v}, model.device()));
    DSV4_ASSIGN_OR_RETURN(std::shared_ptr<const Tensor> streams, kept_streams(model, inputs));
    std::vector<model::SequenceChunk> chunks;
    int64_t streams_row = 0, device_row = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const StepInput& in = inputs[i];
      Session& s = *in.session;
      TensorView rows;
      if (!on_host[i].empty()) {
        rows = TensorView::contiguous(on_host[i].data(), DType::kF32, Device::kCpu,
                                      {static_cast<int64_t>(on_host[i].size()) / v, v});
      } else {
        rows = logits.view().rows(device_row, device_row + asked_rows(in));
        device_row += asked_rows(in);
      }
      chunks.push_back({in.tokens, s.n_tokens(), &s.cache_, rows, in.snapshot, in.snapshot_after});
      s.step_streams_.reset();
      s.streams_ = TensorView{};
      if (in.keep_streams) {
        const auto n = static_cast<int64_t>(in.tokens.size());
        s.step_streams_ = streams;
        s.streams_ = streams->view().rows(streams_row, streams_row + n);
        streams_row += n;
        chunks.back().streams_out = s.streams_;
      }
    }
    DSV4_RETURN_IF_ERROR(model.forward(chunks));
    for (size_t i = 0; i < inputs.size(); ++i) {
      std::vector<float>& host = inputs[i].session->logits_;
      if (!on_host[i].empty()) {
        host = std::move(on_host[i]);
        continue;
      }
      const TensorView rows = chunks[i].logits;
      host.resize(static_cast<size_t>(rows.numel()));
      DSV4_RETURN_IF_ERROR(copy_tensor(
          TensorView::contiguous(host.data(), DType::kF32, Device::kCpu, rows.shape), rows));
    }
    return ok_status();
  }
};

Status step(const model::Model& model, std::span<const StepInput> inputs) {
  return StepRunner::run(model, inputs);
}

}  // namespace dsv4::runtime
