#include "runtime/speculative.h"

#include <algorithm>
#include <numeric>

#include "model/cache_rollback.h"

namespace dsv4::runtime {

Result<Drafts> Drafts::create(const model::Model& model, int64_t max_positions) {
  Drafts drafts;
  DSV4_ASSIGN_OR_RETURN(drafts.cache_, model.new_mtp_cache(max_positions));
  return drafts;
}

std::span<const int64_t> Drafts::step_tokens(int64_t last) {
  tokens_.front() = last;
  return tokens_;
}

void Drafts::limit(int64_t n) {
  if (n >= size()) return;
  tokens_.resize(static_cast<size_t>(n) + 1);
  q_.resize(std::min(q_.size(), static_cast<size_t>(n)));
}

void Drafts::draw(std::span<const float> logits, Sampler& sampler) {
  // At the position past the drafts so far (a constraint's mask there).
  const std::span<const int64_t> ahead = std::span<const int64_t>(tokens_).subspan(1);
  if (sampler.greedy()) {
    tokens_.push_back(sampler.best(logits, ahead));
    return;
  }
  q_.push_back(sampler.distribution(logits, ahead));
  tokens_.push_back(sampler.draw_from(q_.back()));
}

Verdict verify_drafts(std::span<const int64_t> drafts, const std::vector<std::vector<double>>& q,
                      std::span<const float> rows, Sampler& sampler) {
  const size_t n = drafts.size(), v = rows.size() / (n + 1);
  Verdict verdict;
  for (size_t i = 0; i <= n; ++i) {
    const std::span<const float> row = rows.subspan(i * v, v);
    int64_t token = 0;
    bool kept = false;  // token is draft i + 1, accepted
    if (sampler.greedy()) {
      token = sampler.best(row);
      kept = i < n && token == drafts[i];
    } else if (i == n) {  // every draft kept: the bonus token
      token = sampler.draw_from(sampler.distribution(row));
    } else {
      const std::vector<double> p = sampler.distribution(row);
      const auto d = static_cast<size_t>(drafts[i]);
      kept = sampler.accept(p[d] / q[i][d]);
      if (kept) {
        token = drafts[i];
      } else {
        // The residual norm(max(0, p − q)); it has mass whenever a rejection can happen
        // (p(d) < q(d)), but rounding could leave none: then p itself.
        std::vector<double> residual(v);
        for (size_t t = 0; t < v; ++t) residual[t] = std::max(0.0, p[t] - q[i][t]);
        const double mass = std::accumulate(residual.begin(), residual.end(), 0.0);
        token = sampler.draw_from(mass > 0.0 ? residual : p);
      }
    }
    sampler.commit(token);
    verdict.tokens.push_back(token);
    if (!kept) break;
    ++verdict.n_accepted;
  }
  return verdict;
}

Verdict Drafts::verify(std::span<const float> rows, Sampler& sampler) {
  const Verdict verdict =
      verify_drafts(std::span<const int64_t>(tokens_).subspan(1), q_, rows, sampler);
  tokens_.resize(1);
  q_.clear();
  return verdict;
}

namespace {

// One MTP call over `chunks`, each asking its last row's logits (and, chained, its last row's
// output streams: the next draft's input). Their logits are rows of one buffer, so the head runs
// once for them all (reading its weights once, not once a sequence) and they come back to the
// host in one copy; their output streams too, so the block writes them in one launch and the
// next depth reads them as they are: a draft depth costs one forward and one round trip
// whatever the batch.
struct MtpCall {
  std::vector<model::MtpChunk> chunks;
  std::vector<bool> keeps_streams;  // whether each chunk's last output streams are kept
  std::vector<size_t> input_of;     // the DraftInput each chunk belongs to
  Tensor out_streams;  // f32 [chunks that keep them, M, D] on the model's device
  Tensor logits;       // f32 [chunks, V] on the model's device
  std::vector<float> rows;  // the same on the host, after run()

  // With `chained`, the output streams too (the next draft's input).
  void add(size_t input, const TensorView& streams, std::span<const int64_t> next,
           int64_t start_pos, model::AttentionCache* cache, bool chained) {
    chunks.push_back({streams, next, start_pos, cache, TensorView{}, TensorView{}});
    keeps_streams.push_back(chained);
    input_of.push_back(input);
  }

  Status run(const model::Model& model) {
    const int64_t n = static_cast<int64_t>(chunks.size()), v = model.config().vocab_size;
    const checkpoint::ModelConfig& c = model.config();
    const auto n_out =
        static_cast<int64_t>(std::count(keeps_streams.begin(), keeps_streams.end(), true));
    DSV4_ASSIGN_OR_RETURN(logits, Tensor::empty(DType::kF32, {n, v}, model.device()));
    if (n_out > 0) {
      DSV4_ASSIGN_OR_RETURN(out_streams, Tensor::empty(DType::kF32,
                                                       {n_out, c.hc_mult, c.hidden_size},
                                                       model.device()));
    }
    int64_t out_row = 0;
    for (int64_t i = 0; i < n; ++i) {
      model::MtpChunk& chunk = chunks[static_cast<size_t>(i)];
      chunk.logits = logits.view().rows(i, i + 1);
      if (!keeps_streams[static_cast<size_t>(i)]) continue;
      chunk.out_streams = out_streams.view().rows(out_row, out_row + 1);
      ++out_row;
    }
    DSV4_RETURN_IF_ERROR(model.mtp_forward(chunks));
    rows.resize(static_cast<size_t>(n * v));
    return copy_tensor(TensorView::contiguous(rows.data(), DType::kF32, Device::kCpu, {n, v}),
                       logits.view());
  }

  std::span<const float> row(size_t c) const {
    const size_t v = rows.size() / chunks.size();
    return std::span<const float>(rows).subspan(c * v, v);
  }
};

}  // namespace

Status draft(const model::Model& model, std::span<const DraftInput> inputs) {
  // The block over the positions each step kept: its cache back to (or on to) their start.
  MtpCall update;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const DraftInput& in = inputs[i];
    model::AttentionCache& cache = in.drafts->cache_;
    // Rows past the trunk's own (the last drafts') go; a gap (a resumed prefix, plain steps) is
    // skipped.
    const int64_t trunk_rows = std::min(in.start_pos, in.drafts->n_trunk_rows_);
    if (cache.n_tokens > trunk_rows) DSV4_RETURN_IF_ERROR(model::roll_back(cache, trunk_rows));
    if (cache.n_tokens < in.start_pos) {
      DSV4_RETURN_IF_ERROR(model::skip_mtp_cache(cache, in.start_pos));
    }
    in.drafts->n_trunk_rows_ = in.start_pos + static_cast<int64_t>(in.next_tokens.size());
    in.drafts->tokens_.resize(1);
    in.drafts->q_.clear();
    update.add(i, in.streams, in.next_tokens, in.start_pos, &cache, in.n_drafts > 1);
  }
  if (update.chunks.empty()) return ok_status();
  DSV4_RETURN_IF_ERROR(update.run(model));
  // Each further draft: the block again, on its own last output streams and the last draft.
  MtpCall* last = &update;
  MtpCall chained[2];
  for (int64_t depth = 1;; ++depth) {
    MtpCall& next = chained[depth % 2];
    next = MtpCall{};
    for (size_t c = 0; c < last->chunks.size(); ++c) {
      const DraftInput& in = inputs[last->input_of[c]];
      if (in.n_drafts < depth) continue;
      in.drafts->draw(last->row(c), *in.sampler);
      if (in.n_drafts == depth) continue;
      next.add(last->input_of[c], last->chunks[c].out_streams,
               std::span<const int64_t>(&in.drafts->tokens_.back(), 1), in.drafts->cache_.n_tokens,
               &in.drafts->cache_, in.n_drafts > depth + 1);
    }
    if (next.chunks.empty()) return ok_status();
    DSV4_RETURN_IF_ERROR(next.run(model));
    last = &next;
  }
}

}  // namespace dsv4::runtime
