#include "model/indexer.h"

#include <algorithm>
#include <cmath>

#include "kernels/ops.h"
#include "model/compressor.h"
#include "model/linear.h"

namespace dsv4::model {
namespace {

// The scores of a profile: the fast profile's FP8 ones on the GPU (for the DI ≤ 128 they take),
// else the exact f32 ones.
Status indexer_scores(const kernels::IndexerScoreParams& p, Numerics numerics) {
  const int64_t head_dim = p.q.size(2);
  const bool fast = numerics == Numerics::kFast && p.q.device == Device::kCuda &&
                    head_dim % 4 == 0 && head_dim <= 128;
  return fast ? kernels::indexer_scores_fp8(p) : kernels::indexer_scores(p);
}

// The scores' operands every call shares: the queries, their head weights and the two scales.
kernels::IndexerScoreParams score_params(const checkpoint::ModelConfig& config, const TensorView& q,
                                         const TensorView& head_weights) {
  kernels::IndexerScoreParams score;
  score.q = q;
  score.weights = head_weights;
  score.q_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(config.index_head_dim)));
  score.weight_scale =
      static_cast<float>(1.0 / std::sqrt(static_cast<double>(config.index_n_heads)));
  return score;
}

}  // namespace

Result<IndexerQueries> indexer_queries(const checkpoint::ModelConfig& config,
                                       const checkpoint::IndexerWeights& weights,
                                       const TensorView& x, const LinearInput& q_latent,
                                       const TensorView& positions, const TensorView& inv_freq,
                                       Numerics numerics) {
  const int64_t n_tokens = x.size(0);
  const int64_t n_heads = config.index_n_heads;
  const int64_t head_dim = config.index_head_dim;
  IndexerQueries out;
  DSV4_ASSIGN_OR_RETURN(out.q, Tensor::empty(DType::kF32, {n_tokens, n_heads, head_dim}, x.device));
  DSV4_RETURN_IF_ERROR(linear(q_latent, weights.wq_b,
                              out.q.view().reshaped({n_tokens, n_heads * head_dim}), numerics));
  DSV4_RETURN_IF_ERROR(
      kernels::rope(out.q.view(), positions, inv_freq, kernels::RopeDirection::kForward));
  DSV4_ASSIGN_OR_RETURN(out.weights, Tensor::empty(DType::kF32, {n_tokens, n_heads}, x.device));
  DSV4_RETURN_IF_ERROR(linear(x, weights.weights_proj, out.weights.view(), numerics));
  return out;
}

Result<Tensor> indexer_picks(const checkpoint::ModelConfig& config, const IndexerStep& step,
                             const CompressorCache& cache, int64_t n_entries) {
  DSV4_CHECK(n_entries <= cache.n_entries, "indexer_picks: %lld of %lld entries",
             (long long)n_entries, (long long)cache.n_entries);
  const int64_t n_tokens = step.q.size(0);
  const int64_t n_picks = std::min(config.index_topk, n_entries);
  if (n_picks == 0) return Tensor();
  const Device device = step.q.device;

  DSV4_ASSIGN_OR_RETURN(Tensor scores, Tensor::empty(DType::kF32, {n_tokens, n_entries}, device));
  kernels::IndexerScoreParams score = score_params(config, step.q, step.head_weights);
  score.keys = cache.entries.view().rows(0, n_entries);
  score.scores = scores.view();
  DSV4_RETURN_IF_ERROR(indexer_scores(score, step.numerics));

  // Each row's candidates are the entries complete at its position: counted on the device.
  DSV4_ASSIGN_OR_RETURN(Tensor picks, Tensor::empty(DType::kI32, {n_tokens, n_picks}, device));
  DSV4_RETURN_IF_ERROR(kernels::topk(scores.view(), step.positions, cache.ratio, picks.view()));
  return picks;
}

Result<Tensor> indexer_decode_rows(const checkpoint::ModelConfig& config,
                                   const checkpoint::IndexerWeights& weights,
                                   const IndexerDecodeRows& rows, int64_t n_entries) {
  const CompressorDecodeRows& c = rows.compressor;
  DSV4_RETURN_IF_ERROR(compressor_decode_rows(weights.compressor, c, rows.inv_freq,
                                              static_cast<float>(config.rms_norm_eps)));
  // Each row's sequence now holds (p + 1) / m entries, at most n_entries.
  const int64_t ratio = c.caches.front()->ratio;
  for (const int64_t p : c.host_positions) {
    DSV4_CHECK((p + 1) / ratio <= n_entries, "indexer_decode_rows: %lld entries past a width of %lld",
               (long long)((p + 1) / ratio), (long long)n_entries);
  }
  const int64_t n_picks = std::min(config.index_topk, n_entries);
  if (n_picks == 0) return Tensor();
  const int64_t n_rows = static_cast<int64_t>(c.caches.size());
  const Device device = rows.q.device;
  DSV4_ASSIGN_OR_RETURN(Tensor scores, Tensor::empty(DType::kF32, {n_rows, n_entries}, device));
  kernels::IndexerScoreParams score = score_params(config, rows.q, rows.head_weights);
  score.keys =
      TensorView::contiguous(nullptr, DType::kF32, device, {n_entries, config.index_head_dim});
  score.key_addresses = c.entries;
  score.key_positions = c.positions;
  score.key_ratio = ratio;
  score.scores = scores.view();
  DSV4_RETURN_IF_ERROR(indexer_scores(score, rows.numerics));
  DSV4_ASSIGN_OR_RETURN(Tensor picks, Tensor::empty(DType::kI32, {n_rows, n_picks}, device));
  DSV4_RETURN_IF_ERROR(kernels::topk(scores.view(), c.positions, ratio, picks.view()));
  return picks;
}

}  // namespace dsv4::model
