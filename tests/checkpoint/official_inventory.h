// The official checkpoint's tensor list for a config, written from the per-tensor table of
// ../shared/docs/deepseek_v4.md §3.1.2 (independently of src/checkpoint/tensor_names.cpp, which
// it tests). With the release options it reproduces the published V4-Flash and V4-Pro name
// lists: 69,187 and 145,116 tensors.
#pragma once

#include <string>
#include <vector>

#include "base/tensor.h"
#include "checkpoint/config.h"

namespace dsv4::testing {

enum class LinearForm { kBf16, kFp8E8m0, kFp8F32 };        // the FP8-able linears
enum class ExpertForm { kBf16, kMxfp4, kFp8F32, kNvfp4 };  // the routed experts

struct InventoryOptions {
  LinearForm linear = LinearForm::kFp8E8m0;  // the release
  ExpertForm experts = ExpertForm::kMxfp4;   // the release
  bool mtp = true;                           // mtp.0.* as in the release
};

struct NamedShape {
  std::string name;
  DType dtype;
  Shape shape;
};

class OfficialInventory {
 public:
  OfficialInventory(const checkpoint::ModelConfig& c, const InventoryOptions& o) : c_(c), o_(o) {}

  std::vector<NamedShape> build() {
    const int64_t d = c_.hidden_size;
    add("embed.weight", DType::kBF16, {c_.vocab_size, d});
    add("head.weight", DType::kBF16, {c_.vocab_size, d});
    add("norm.weight", DType::kBF16, {d});
    add_hc_head("");
    for (int64_t l = 0; l < c_.n_layer; ++l) {
      const checkpoint::LayerSchedule& s = c_.layers[static_cast<size_t>(l)];
      add_block("layers." + std::to_string(l) + ".", s.compress_ratio, s.attention,
                s.routing == checkpoint::RoutingType::kHash, o_.experts);
    }
    if (o_.mtp) add_mtp("mtp.0.");
    return std::move(out_);
  }

 private:
  void add(const std::string& name, DType dtype, Shape shape) {
    out_.push_back({name, dtype, shape});
  }

  void add_hc_head(const std::string& p) {
    const int64_t m = c_.hc_mult;
    add(p + "hc_head_fn", DType::kF32, {m, m * c_.hidden_size});
    add(p + "hc_head_base", DType::kF32, {m});
    add(p + "hc_head_scale", DType::kF32, {1});
  }

  // An FP8-able linear [n, k]: `.weight` (+ `.scale` per 128×128).
  void add_linear(const std::string& module, int64_t n, int64_t k) {
    if (o_.linear == LinearForm::kBf16) {
      add(module + ".weight", DType::kBF16, {n, k});
      return;
    }
    add(module + ".weight", DType::kF8E4M3, {n, k});
    add(module + ".scale", o_.linear == LinearForm::kFp8E8m0 ? DType::kF8E8M0 : DType::kF32,
        {(n + 127) / 128, (k + 127) / 128});
  }

  void add_expert_matrix(const std::string& module, int64_t n, int64_t k, ExpertForm form) {
    switch (form) {
      case ExpertForm::kBf16:
        add(module + ".weight", DType::kBF16, {n, k});
        return;
      case ExpertForm::kMxfp4:
        add(module + ".weight", DType::kI8, {n, k / 2});
        add(module + ".scale", DType::kF8E8M0, {n, k / 32});
        return;
      case ExpertForm::kFp8F32:
        add(module + ".weight", DType::kF8E4M3, {n, k});
        add(module + ".scale", DType::kF32, {(n + 127) / 128, (k + 127) / 128});
        return;
      case ExpertForm::kNvfp4:
        add(module + ".weight", DType::kU8, {n, k / 2});
        add(module + ".weight_scale", DType::kF8E4M3, {n, k / 16});
        add(module + ".weight_scale_2", DType::kF32, Shape{});
        add(module + ".input_scale", DType::kF32, Shape{});
        return;
    }
  }

  void add_compressor(const std::string& p, int64_t ratio, int64_t overlap, int64_t width) {
    add(p + "wkv.weight", DType::kBF16, {overlap * width, c_.hidden_size});
    add(p + "wgate.weight", DType::kBF16, {overlap * width, c_.hidden_size});
    add(p + "ape", DType::kF32, {ratio, overlap * width});
    add(p + "norm.weight", DType::kBF16, {width});
  }

  void add_block(const std::string& p, int64_t ratio, checkpoint::AttentionType type, bool hash,
                 ExpertForm experts) {
    const int64_t d = c_.hidden_size, m = c_.hc_mult, mix = (2 + m) * m;
    const int64_t h = c_.n_head, dh = c_.head_dim, q = c_.q_lora_rank;
    const int64_t gr = c_.o_groups * c_.o_lora_rank, f = c_.moe_intermediate_size;
    for (const char* site : {"attn", "ffn"}) {
      add(p + "hc_" + site + "_fn", DType::kF32, {mix, m * d});
      add(p + "hc_" + site + "_base", DType::kF32, {mix});
      add(p + "hc_" + site + "_scale", DType::kF32, {3});
    }
    add(p + "attn_norm.weight", DType::kBF16, {d});
    add(p + "ffn_norm.weight", DType::kBF16, {d});
    add(p + "attn.attn_sink", DType::kF32, {h});
    add_linear(p + "attn.wq_a", q, d);
    add(p + "attn.q_norm.weight", DType::kBF16, {q});
    add_linear(p + "attn.wq_b", h * dh, q);
    add_linear(p + "attn.wkv", dh, d);
    add(p + "attn.kv_norm.weight", DType::kBF16, {dh});
    add_linear(p + "attn.wo_a", gr, h / c_.o_groups * dh);
    add_linear(p + "attn.wo_b", d, gr);
    if (type == checkpoint::AttentionType::kCompressedSparse) {
      add_compressor(p + "attn.compressor.", ratio, 2, dh);
      add_linear(p + "attn.indexer.wq_b", c_.index_n_heads * c_.index_head_dim, q);
      add(p + "attn.indexer.weights_proj.weight", DType::kBF16, {c_.index_n_heads, d});
      add_compressor(p + "attn.indexer.compressor.", ratio, 2, c_.index_head_dim);
    } else if (type == checkpoint::AttentionType::kHeavilyCompressed) {
      add_compressor(p + "attn.compressor.", ratio, 1, dh);
    }
    add(p + "ffn.gate.weight", DType::kBF16, {c_.n_routed_experts, d});
    if (hash) {
      add(p + "ffn.gate.tid2eid", DType::kI64, {c_.vocab_size, c_.n_expert_used});
    } else {
      add(p + "ffn.gate.bias", DType::kF32, {c_.n_routed_experts});
    }
    add_linear(p + "ffn.shared_experts.w1", f, d);
    add_linear(p + "ffn.shared_experts.w3", f, d);
    add_linear(p + "ffn.shared_experts.w2", d, f);
    for (int64_t e = 0; e < c_.n_routed_experts; ++e) {
      const std::string expert = p + "ffn.experts." + std::to_string(e) + ".";
      add_expert_matrix(expert + "w1", f, d, experts);
      add_expert_matrix(expert + "w3", f, d, experts);
      add_expert_matrix(expert + "w2", d, f, experts);
    }
  }

  // §3.1.2 MTP extra: one sliding, score-routed block plus e/h projections, three norms and its
  // own hc_head. Its experts keep the release's FP4 even in NVFP4 checkpoints (§3.3).
  void add_mtp(const std::string& p) {
    const ExpertForm experts = o_.experts == ExpertForm::kNvfp4 ? ExpertForm::kMxfp4 : o_.experts;
    add_block(p, 0, checkpoint::AttentionType::kSliding, false, experts);
    add_linear(p + "e_proj", c_.hidden_size, c_.hidden_size);
    add_linear(p + "h_proj", c_.hidden_size, c_.hidden_size);
    for (const char* norm : {"enorm", "hnorm", "norm"}) {
      add(p + norm + ".weight", DType::kBF16, {c_.hidden_size});
    }
    add_hc_head(p);
  }

  const checkpoint::ModelConfig& c_;
  InventoryOptions o_;
  std::vector<NamedShape> out_;
};

inline std::vector<NamedShape> official_inventory(const checkpoint::ModelConfig& config,
                                                  const InventoryOptions& options = {}) {
  return OfficialInventory(config, options).build();
}

}  // namespace dsv4::testing
