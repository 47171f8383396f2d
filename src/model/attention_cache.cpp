#include "model/attention_cache.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "model/upload.h"

namespace dsv4::model {
namespace {

using checkpoint::AttentionType;

Result<CompressorCache> create_compressor(int64_t ratio, bool overlap, int64_t width,
                                          int64_t max_positions, Device device, CacheStart start) {
  CompressorCache cache;
  cache.ratio = ratio;
  cache.overlap = overlap;
  cache.width = width;
  const int64_t row_width = (overlap ? 2 : 1) * width;
  const Shape rows_shape{2 * ratio, row_width};
  if (start == CacheStart::kForCopy) {
    DSV4_ASSIGN_OR_RETURN(cache.kv, Tensor::empty(DType::kF32, rows_shape, device));
    DSV4_ASSIGN_OR_RETURN(cache.gate, Tensor::empty(DType::kF32, rows_shape, device));
  } else {
    // Before the first block, the overlapped window's "previous block" slots are kv 0, gate
    // −inf (transformers' new_zeros / new_full(-inf) for window 0 on the first call).
    cache.n_rows = overlap ? ratio : 0;
    std::vector<float> gate(rows_shape.numel(), -std::numeric_limits<float>::infinity());
    DSV4_ASSIGN_OR_RETURN(cache.kv,
                          upload(std::vector<float>(rows_shape.numel(), 0.0f), rows_shape, device));
    DSV4_ASSIGN_OR_RETURN(cache.gate, upload(gate, rows_shape, device));
  }
  DSV4_ASSIGN_OR_RETURN(
      cache.entries,
      Tensor::empty(DType::kF32, {std::max<int64_t>(max_positions / ratio, 1), width}, device));
  return cache;
}

}  // namespace

Result<AttentionCache> AttentionCache::create(const checkpoint::ModelConfig& config, int64_t layer,
                                              int64_t max_positions, Device device,
                                              int64_t max_step_tokens, CacheStart start) {
  if (layer < 0 || layer >= config.n_blocks()) {
    return invalid_argument("attention cache: layer " + std::to_string(layer) + " of " +
                            std::to_string(config.n_blocks()));
  }
  if (max_positions < 1 || max_step_tokens < 1) {
    return invalid_argument("attention cache: max_positions " + std::to_string(max_positions) +
                            " and max_step_tokens " + std::to_string(max_step_tokens) +
                            " must be positive");
  }
  const checkpoint::LayerSchedule& schedule = config.schedule(layer);
  const bool sliding = schedule.attention == AttentionType::kSliding;
  AttentionCache cache;
  cache.max_positions = max_positions;
  cache.max_step_tokens = max_step_tokens;
  DSV4_ASSIGN_OR_RETURN(
      cache.window,
      Tensor::empty(DType::kF32, {config.sliding_window + max_step_tokens - 1, config.head_dim},
                    device));
  if (sliding) return cache;
  if (schedule.compress_ratio < 1) {
    return invalid_argument("attention cache: layer " + std::to_string(layer) +
                            " is compressed with compress ratio " +
                            std::to_string(schedule.compress_ratio));
  }
  const bool csa = schedule.attention == AttentionType::kCompressedSparse;
  DSV4_ASSIGN_OR_RETURN(cache.compressor,
                        create_compressor(schedule.compress_ratio, csa, config.head_dim,
                                          max_positions, device, start));
  if (csa) {
    DSV4_ASSIGN_OR_RETURN(cache.indexer,
                          create_compressor(schedule.compress_ratio, true, config.index_head_dim,
                                            max_positions, device, start));
  } else if (start == CacheStart::kEmptySequence) {
    std::vector<int32_t> ids(cache.compressor->entries.shape()[0]);
    std::iota(ids.begin(), ids.end(), 0);
    DSV4_ASSIGN_OR_RETURN(cache.entry_ids, upload(ids, {static_cast<int64_t>(ids.size())}, device));
  }
  return cache;
}

}  // namespace dsv4::model
