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

// Host copies of each chunk's one row of logits.
Status logits_to_host(const std::vector<Tensor>& device, std::vector<std::vector<float>>& host) {
  host.resize(device.size());
  for (size_t i = 0; i < device.size(); ++i) {
    host[i].resize(static_cast<size_t>(device[i].numel()));
    const TensorView dst =
        TensorView::contiguous(host[i].data(), DType::kF32, Device::kCpu, device[i].shape());
    DSV4_RETURN_IF_ERROR(copy_tensor(dst, device[i].view()));
  }
  return ok_status();
}

// One MTP call over `chunks`, each asking its last row's logits and output streams.
struct MtpCall {
  std::vector<model::MtpChunk> chunks;
  std::vector<Tensor> logits, out_streams;
  std::vector<size_t> input_of;  // the DraftInput each chunk belongs to

  // With `chained`, the output streams too (the next draft's input).
  Status add(const model::Model& model, size_t input, const TensorView& streams,
             std::span<const int64_t> next, int64_t start_pos, model::AttentionCache* cache,
             bool chained) {
    const checkpoint::ModelConfig& c = model.config();
    DSV4_ASSIGN_OR_RETURN(Tensor row, Tensor::empty(DType::kF32, {1, c.vocab_size}, model.device()));
    Tensor out;
    if (chained) {
      DSV4_ASSIGN_OR_RETURN(out, Tensor::empty(DType::kF32, streams.shape, model.device()));
    }
    chunks.push_back({streams, next, start_pos, cache, row.view(), out.view()});
    logits.push_back(std::move(row));
    out_streams.push_back(std::move(out));
    input_of.push_back(input);
    return ok_status();
  }
};

}  // namespace

Status draft(const model::Model& model, std::span<const DraftInput> inputs) {
  // The block over the positions each step kept: its cache back to (or on to) their start.
  MtpCall update;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const DraftInput& in = inputs[i];
    model::AttentionCache& cache = in.drafts->cache_;
    if (cache.n_tokens > in.start_pos) {
      DSV4_RETURN_IF_ERROR(model::roll_back(cache, in.start_pos));
    } else if (cache.n_tokens < in.start_pos) {
      DSV4_RETURN_IF_ERROR(model::skip_mtp_cache(cache, in.start_pos));
    }
    in.drafts->tokens_.resize(1);
    in.drafts->q_.clear();
    DSV4_RETURN_IF_ERROR(update.add(model, i, in.streams, in.next_tokens, in.start_pos, &cache,
                                    in.n_drafts > 1));
  }
  if (update.chunks.empty()) return ok_status();
  DSV4_RETURN_IF_ERROR(model.mtp_forward(update.chunks));
  // Each further draft: the block again, on its own last output streams and the last draft.
  MtpCall* last = &update;
  MtpCall chained[2];
  for (int64_t depth = 1;; ++depth) {
    std::vector<std::vector<float>> rows;
    DSV4_RETURN_IF_ERROR(logits_to_host(last->logits, rows));
    MtpCall& next = chained[depth % 2];
    next = MtpCall{};
    for (size_t c = 0; c < last->chunks.size(); ++c) {
      const DraftInput& in = inputs[last->input_of[c]];
      if (in.n_drafts < depth) continue;
      in.drafts->draw(rows[c], *in.sampler);
      if (in.n_drafts == depth) continue;
      const TensorView out = last->out_streams[c].view();
      const int64_t n = out.size(0);
      DSV4_RETURN_IF_ERROR(next.add(model, last->input_of[c], out.rows(n - 1, n),
                                    std::span<const int64_t>(&in.drafts->tokens_.back(), 1),
                                    in.drafts->cache_.n_tokens, &in.drafts->cache_,
                                    in.n_drafts > depth + 1));
    }
    if (next.chunks.empty()) return ok_status();
    DSV4_RETURN_IF_ERROR(model.mtp_forward(next.chunks));
    last = &next;
  }
}

}  // namespace dsv4::runtime
