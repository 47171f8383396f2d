// ModelConfig: the DeepSeek-V4 hyper-parameters in the engine's own terms, read from either
// config.json style seen in the wild (transformers': layer_types / compress_rates /
// rope_parameters; the official/legacy one: compress_ratios with its trailing MTP entry,
// num_hash_layers, rope_scaling) and validated against the ranges this engine supports.
// Past this file nothing reads config.json; every field is resolved per layer here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dsv4/status.h"

namespace dsv4::checkpoint {

// Attention kind of one layer (../shared/docs/deepseek_v4.md §1.3).
enum class AttentionType {
  kSliding,            // window only (compress ratio 0)
  kCompressedSparse,   // CSA: window + overlapped ratio-4 compressor + lightning indexer top-k
  kHeavilyCompressed,  // HCA: window + non-overlapped compressor, attends to all entries
};

enum class RoutingType {
  kHash,   // experts fixed per token id by tid2eid; no bias
  kScore,  // sqrtsoftplus scores, bias for selection only
};

struct RopeConfig {
  double theta = 10000.0;
  bool yarn = false;  // when true, the four fields below apply
  double factor = 1.0;
  int64_t original_max_position = 0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
};

struct LayerSchedule {
  AttentionType attention = AttentionType::kSliding;
  int64_t compress_ratio = 0;  // 0 (sliding), 4-ish (CSA), 128-ish (HCA)
  RoutingType routing = RoutingType::kScore;
};

struct ModelConfig {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;    // D
  int64_t n_layer = 0;        // L, main layers (MTP excluded)
  int64_t n_head = 0;         // H query heads; one shared K=V head
  int64_t head_dim = 0;       // Dh = nope + rope dims
  int64_t rope_head_dim = 0;  // trailing rope dims of each head
  int64_t q_lora_rank = 0;
  int64_t o_groups = 0;
  int64_t o_lora_rank = 0;
  int64_t sliding_window = 0;  // includes the current token
  int64_t max_position_embeddings = 0;

  int64_t n_routed_experts = 0;       // E
  int64_t n_shared_experts = 0;       // must be 1
  int64_t n_expert_used = 0;          // K
  int64_t moe_intermediate_size = 0;  // F, routed and shared
  double routed_scaling_factor = 1.0;
  double swiglu_limit = 0.0;  // 0 disables the clamp
  bool norm_topk_prob = true;

  int64_t hc_mult = 0;
  int64_t hc_sinkhorn_iters = 0;
  double hc_eps = 1e-6;
  double rms_norm_eps = 1e-6;

  int64_t index_n_heads = 0;
  int64_t index_head_dim = 0;
  int64_t index_topk = 0;

  RopeConfig rope_sliding;            // plain RoPE of window-only layers
  RopeConfig rope_compressed;         // compress_rope_theta + YaRN of CSA/HCA layers
  std::vector<LayerSchedule> layers;  // n_layer entries

  // MTP draft blocks (§2.7): the checkpoint may hold their weights (speculative decoding drafts
  // with them); block i runs as layer n_layer + i, with the schedule mtp_layers[i].
  int64_t n_mtp_layers = 0;
  std::vector<LayerSchedule> mtp_layers;  // n_mtp_layers entries
  // The official config's compress_ratios as written: n_layer + n_mtp_layers entries, the MTP
  // layers' last (their attention kind says which tensors an MTP block has). Empty for
  // transformers-style configs, which do not describe the MTP layers.
  std::vector<int64_t> compress_ratios;
  int64_t bos_token_id = 0;
  int64_t eos_token_id = 1;
  bool tie_word_embeddings = false;
  // The config declares the release's FP8 linears: quantization_config with quant_method "fp8"
  // and scale_fmt "ue8m0" (power-of-two 128 × 128 block scales), which a GPU keeps FP8
  // (fp8_weights.h). Plans made from the config alone (runtime/ep_memory_plan.h) count them so;
  // the loader goes by the checkpoint's own dtypes and scales.
  bool fp8_linears = false;

  // The schedule of block `layer`: a main layer (< n_layer) or an MTP block (n_layer + i).
  const LayerSchedule& schedule(int64_t layer) const {
    const auto n_main = static_cast<int64_t>(layers.size());  // n_layer once validated
    return layer < n_main ? layers[static_cast<size_t>(layer)]
                          : mtp_layers.at(static_cast<size_t>(layer - n_main));
  }
  int64_t n_blocks() const { return static_cast<int64_t>(layers.size() + mtp_layers.size()); }
};

// Parses config.json text; `path` is only used in messages.
Result<ModelConfig> parse_model_config(const std::string& json_text, const std::string& path);
// Reads DIR/config.json.
Result<ModelConfig> load_model_config(const std::string& model_dir);
// Ranges this engine supports; every error names the field.
Status validate(const ModelConfig& config);

}  // namespace dsv4::checkpoint
