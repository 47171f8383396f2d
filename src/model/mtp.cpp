#include "model/mtp.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "kernels/ops.h"
#include "model/attention.h"
#include "model/deepseek_v4.h"
#include "model/gather_views.h"
#include "model/layer.h"
#include "model/linear.h"
#include "model/scratch.h"
#include "model/upload.h"

namespace dsv4::model {
namespace {

const checkpoint::MtpWeights& block_weights(const checkpoint::ModelWeights& weights,
                                            int64_t index) {
  DSV4_CHECK(index >= 0 && index < static_cast<int64_t>(weights.mtp.size()),
             "MTP block %lld of %zu", (long long)index, weights.mtp.size());
  return weights.mtp[static_cast<size_t>(index)];
}

Status check_chunk(const checkpoint::ModelConfig& c, const MtpChunk& chunk) {
  const auto n = static_cast<int64_t>(chunk.next_tokens.size());
  DSV4_CHECK(chunk.cache != nullptr && n > 0, "an MTP chunk needs a cache and tokens");
  DSV4_CHECK(chunk.streams.dtype == DType::kF32 && chunk.streams.rank() == 3 &&
                 chunk.streams.size(0) == n && chunk.streams.size(1) == c.hc_mult &&
                 chunk.streams.size(2) == c.hidden_size,
             "MTP streams must be f32 [n, M, D]");
  DSV4_CHECK(chunk.logits.dtype == DType::kF32 && chunk.logits.rank() == 2 &&
                 chunk.logits.size(1) == c.vocab_size &&
                 (chunk.logits.size(0) == n || chunk.logits.size(0) == 1),
             "MTP logits must be f32 [n or 1, V]");
  DSV4_CHECK(
      chunk.out_streams.data == nullptr ||
          (chunk.out_streams.dtype == DType::kF32 && chunk.out_streams.rank() == 3 &&
           (chunk.out_streams.size(0) == n || chunk.out_streams.size(0) == 1) &&
           chunk.out_streams.size(1) == c.hc_mult && chunk.out_streams.size(2) == c.hidden_size),
      "MTP out_streams must be f32 [n or 1, M, D]");
  DSV4_RETURN_IF_ERROR(check_token_ids(chunk.next_tokens, c.vocab_size));
  if (chunk.start_pos != chunk.cache->n_tokens) {
    return invalid_argument("MTP start_pos " + std::to_string(chunk.start_pos) +
                            " does not continue a cache of " +
                            std::to_string(chunk.cache->n_tokens) + " tokens");
  }
  return ok_status();
}

// X f32 [T, M, D] = e_proj(enorm(embed(tokens))) on every stream + h_proj(hnorm(streams)).
Result<Tensor> block_input(const checkpoint::ModelWeights& weights, const checkpoint::MtpWeights& w,
                           const TensorView& tokens, const TensorView& streams, Numerics numerics) {
  const checkpoint::ModelConfig& c = weights.config;
  const auto eps = static_cast<float>(c.rms_norm_eps);
  const int64_t n_rows = tokens.numel(), n_stream_rows = n_rows * c.hc_mult;
  const Device device = streams.device;
  DSV4_ASSIGN_OR_RETURN(Tensor e, scratch(DType::kF32, {n_rows, c.hidden_size}, device));
  DSV4_RETURN_IF_ERROR(kernels::embedding(weights.embed.view(), tokens, e.view()));
  // Each norm quantizes its rows for its projection where that runs the FP8 GEMM.
  DSV4_ASSIGN_OR_RETURN(const Fp8Room e_fp8,
                        fp8_room(n_rows, c.hidden_size, device, numerics, {&w.e_proj}));
  DSV4_RETURN_IF_ERROR(rms_norm_for_linears(e.view(), w.enorm.view(), eps, e.view(), e_fp8.view()));
  DSV4_ASSIGN_OR_RETURN(Tensor e_out, scratch(DType::kF32, e.shape(), device));
  DSV4_RETURN_IF_ERROR(
      linear(LinearInput(e.view(), e_fp8.view()), w.e_proj, e_out.view(), numerics));
  DSV4_ASSIGN_OR_RETURN(Tensor e_streams, scratch(DType::kF32, streams.shape, device));
  DSV4_RETURN_IF_ERROR(kernels::hc_repeat(e_out.view(), e_streams.view()));

  // Each stream normed and projected: the streams as [T·M, D] rows.
  DSV4_ASSIGN_OR_RETURN(Tensor h, scratch(DType::kF32, {n_stream_rows, c.hidden_size}, device));
  DSV4_ASSIGN_OR_RETURN(const Fp8Room h_fp8,
                        fp8_room(n_stream_rows, c.hidden_size, device, numerics, {&w.h_proj}));
  DSV4_RETURN_IF_ERROR(rms_norm_for_linears(streams.reshaped({n_stream_rows, c.hidden_size}),
                                            w.hnorm.view(), eps, h.view(), h_fp8.view()));
  DSV4_ASSIGN_OR_RETURN(Tensor x, scratch(DType::kF32, streams.shape, device));
  DSV4_RETURN_IF_ERROR(linear(LinearInput(h.view(), h_fp8.view()), w.h_proj,
                              x.view().reshaped({n_stream_rows, c.hidden_size}), numerics));
  DSV4_RETURN_IF_ERROR(kernels::add(x.view(), e_streams.view(), x.view()));
  return x;
}

}  // namespace

Result<AttentionCache> mtp_cache(const checkpoint::ModelWeights& weights, int64_t index,
                                 int64_t max_positions, int64_t max_step_tokens) {
  block_weights(weights, index);
  return AttentionCache::create(weights.config, weights.config.n_layer + index, max_positions,
                                weights.embed.device(), max_step_tokens);
}

Status skip_mtp_cache(AttentionCache& cache, int64_t n_tokens) {
  DSV4_CHECK(n_tokens >= cache.n_tokens && n_tokens <= cache.max_positions,
             "skipping an MTP cache of %lld tokens to %lld", (long long)cache.n_tokens,
             (long long)n_tokens);
  if (cache.compressor) {
    return unimplemented("an MTP block with compressed attention cannot skip positions");
  }
  const Shape ring = cache.window.shape();
  DSV4_ASSIGN_OR_RETURN(const Tensor zeros,
                        upload(std::vector<float>(static_cast<size_t>(ring.numel()), 0.0f), ring,
                               cache.window.device()));
  DSV4_RETURN_IF_ERROR(copy_tensor(cache.window.view(), zeros.view()));
  cache.n_tokens = n_tokens;
  return ok_status();
}

Status mtp_forward(const checkpoint::ModelWeights& weights, int64_t index, ExpertMode mode,
                   std::span<const MtpChunk> chunks, Numerics numerics,
                   std::shared_ptr<const RopeTables> rope, const TensorView& capacity_entry_ids) {
  const checkpoint::ModelConfig& c = weights.config;
  const checkpoint::MtpWeights& w = block_weights(weights, index);
  const Device device = weights.embed.device();
  std::vector<int64_t> ids;
  std::vector<SequenceRows> rows;
  for (const MtpChunk& chunk : chunks) {
    DSV4_RETURN_IF_ERROR(check_chunk(c, chunk));
    const auto begin = static_cast<int64_t>(ids.size());
    ids.insert(ids.end(), chunk.next_tokens.begin(), chunk.next_tokens.end());
    rows.push_back({begin, static_cast<int64_t>(ids.size()), chunk.start_pos, chunk.cache});
  }
  const auto n_rows = static_cast<int64_t>(ids.size());
  DSV4_ASSIGN_OR_RETURN(Tensor tokens, upload(ids, {n_rows}, device));
  // The rows' positions and window rows, and the decode rows' cache addresses, uploaded in the
  // order Model::forward uploads them (a captured draft step rewrites them: decode_graph.h).
  const int64_t layer = c.n_layer + index;
  DSV4_ASSIGN_OR_RETURN(RowPositions positions,
                        RowPositions::of(c, rows, n_rows, device, std::move(rope)));
  positions.capacity_entry_ids = capacity_entry_ids;
  positions.first_address_layer = layer;
  if (std::any_of(rows.begin(), rows.end(), is_decode_run)) {
    DSV4_ASSIGN_OR_RETURN(positions.cache_addresses,
                          cache_addresses(address_columns(rows), 1, device));
  }

  // The chunks' hidden streams as one batch: as they are when they are one buffer's consecutive
  // rows (each draft depth past the first), else gathered in one launch (a step's kept rows of
  // each sequence, which its rejected drafts' rows separate). `streams` is the layer's spare
  // buffer after that.
  DSV4_ASSIGN_OR_RETURN(Tensor streams,
                        scratch(DType::kF32, {n_rows, c.hc_mult, c.hidden_size}, device));
  std::vector<TensorView> inputs;
  for (const MtpChunk& chunk : chunks) inputs.push_back(chunk.streams);
  TensorView joined = joined_rows(inputs);
  if (joined.data == nullptr) {
    DSV4_RETURN_IF_ERROR(gather_views(inputs, streams.view()));
    joined = streams.view();
  }
  DSV4_ASSIGN_OR_RETURN(Tensor x, block_input(weights, w, tokens.view(), joined, numerics));
  const LayerInput input{.config = &c,
                         .layer = layer,
                         .weights = &w.block,
                         .expert_mode = mode,
                         .tokens = tokens.view(),
                         .sequences = rows,
                         .positions = &positions,
                         .numerics = numerics};
  DSV4_RETURN_IF_ERROR(layer_forward(input, x, streams));

  DSV4_ASSIGN_OR_RETURN(const Tensor hidden, final_hidden(c, w.hc_head, w.norm.view(), x.view()));
  // The output streams the chunks keep (each its last out_streams.size(0) rows), in one launch
  // when they are one buffer's rows in order.
  std::vector<TensorView> kept, outputs;
  std::vector<HeadRows> head;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const MtpChunk& chunk = chunks[i];
    if (chunk.out_streams.data != nullptr) {
      kept.push_back(x.view().rows(rows[i].end - chunk.out_streams.size(0), rows[i].end));
      outputs.push_back(chunk.out_streams);
    }
    head.push_back({rows[i].end, chunk.logits});
  }
  DSV4_RETURN_IF_ERROR(copy_views(kept, outputs));
  return head_rows(hidden.view(), weights.head, head, numerics);
}

}  // namespace dsv4::model
