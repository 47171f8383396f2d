// The name table as data, and its expansion into the complete expected key set of a config.
// The only file in the tree that spells checkpoint names.
#include "checkpoint/tensor_names.h"

#include <charconv>

#include "base/check.h"

namespace dsv4::checkpoint {
namespace {

using enum Param;
using enum Scope;
using enum Storage;
using enum Stacking;
using C = NamingConvention;

// ---- Slots: path, category, which layers, storage, release dtype ----
constexpr SlotSpec kSlots[] = {
    {kEmbed, "embed", "embedding", kGlobal, kMatrix, DType::kBF16},
    {kHead, "head", "head", kGlobal, kMatrix, DType::kBF16},
    {kNorm, "norm", "norms", kGlobal, kFloat, DType::kBF16},
    {kHcHeadFn, "hc_head.fn", "hyper-connections", kGlobal, kFloat, DType::kF32},
    {kHcHeadBase, "hc_head.base", "hyper-connections", kGlobal, kFloat, DType::kF32},
    {kHcHeadScale, "hc_head.scale", "hyper-connections", kGlobal, kFloat, DType::kF32},
    {kHcAttnFn, "hc_attn.fn", "hyper-connections", kEveryLayer, kFloat, DType::kF32},
    {kHcAttnBase, "hc_attn.base", "hyper-connections", kEveryLayer, kFloat, DType::kF32},
    {kHcAttnScale, "hc_attn.scale", "hyper-connections", kEveryLayer, kFloat, DType::kF32},
    {kHcFfnFn, "hc_ffn.fn", "hyper-connections", kEveryLayer, kFloat, DType::kF32},
    {kHcFfnBase, "hc_ffn.base", "hyper-connections", kEveryLayer, kFloat, DType::kF32},
    {kHcFfnScale, "hc_ffn.scale", "hyper-connections", kEveryLayer, kFloat, DType::kF32},
    {kAttnNorm, "attn_norm", "norms", kEveryLayer, kFloat, DType::kBF16},
    {kFfnNorm, "ffn_norm", "norms", kEveryLayer, kFloat, DType::kBF16},
    {kAttnSink, "attn.attn_sink", "attention", kEveryLayer, kFloat, DType::kF32},
    {kWqA, "attn.wq_a", "attention", kEveryLayer, kMatrix, DType::kBF16},
    {kQNorm, "attn.q_norm", "attention", kEveryLayer, kFloat, DType::kBF16},
    {kWqB, "attn.wq_b", "attention", kEveryLayer, kMatrix, DType::kBF16},
    {kWkv, "attn.wkv", "attention", kEveryLayer, kMatrix, DType::kBF16},
    {kKvNorm, "attn.kv_norm", "attention", kEveryLayer, kFloat, DType::kBF16},
    {kWoA, "attn.wo_a", "attention", kEveryLayer, kMatrix, DType::kBF16},
    {kWoB, "attn.wo_b", "attention", kEveryLayer, kMatrix, DType::kBF16},
    {kCompressorWkv, "attn.compressor.wkv", "compressor", kCompressed, kMatrix, DType::kBF16},
    {kCompressorWgate, "attn.compressor.wgate", "compressor", kCompressed, kMatrix, DType::kBF16},
    {kCompressorApe, "attn.compressor.ape", "compressor", kCompressed, kFloat, DType::kF32},
    {kCompressorNorm, "attn.compressor.norm", "compressor", kCompressed, kFloat, DType::kBF16},
    {kIndexerWqB, "attn.indexer.wq_b", "indexer", kCsa, kMatrix, DType::kBF16},
    {kIndexerWeightsProj, "attn.indexer.weights_proj", "indexer", kCsa, kMatrix, DType::kBF16},
    {kIndexerCompressorWkv, "attn.indexer.compressor.wkv", "indexer", kCsa, kMatrix, DType::kBF16},
    {kIndexerCompressorWgate, "attn.indexer.compressor.wgate", "indexer", kCsa, kMatrix,
     DType::kBF16},
    {kIndexerCompressorApe, "attn.indexer.compressor.ape", "indexer", kCsa, kFloat, DType::kF32},
    {kIndexerCompressorNorm, "attn.indexer.compressor.norm", "indexer", kCsa, kFloat, DType::kBF16},
    {kGate, "ffn.gate", "router", kEveryLayer, kMatrix, DType::kBF16},
    {kGateBias, "ffn.bias", "router", kScoreLayer, kFloat, DType::kF32},
    {kGateTid2eid, "ffn.tid2eid", "router", kHashLayer, kIndex, DType::kI64},
    {kSharedW1, "ffn.shared_expert.w1", "shared expert", kEveryLayer, kMatrix, DType::kBF16},
    {kSharedW3, "ffn.shared_expert.w3", "shared expert", kEveryLayer, kMatrix, DType::kBF16},
    {kSharedW2, "ffn.shared_expert.w2", "shared expert", kEveryLayer, kMatrix, DType::kBF16},
    {kExpertsW13, "ffn.experts.w13", "routed experts", kEveryLayer, kExperts, DType::kBF16},
    {kExpertsW2, "ffn.experts.w2", "routed experts", kEveryLayer, kExperts, DType::kBF16},
    {kMtpEProj, "e_proj", "mtp", kMtp, kMatrix, DType::kBF16},
    {kMtpHProj, "h_proj", "mtp", kMtp, kMatrix, DType::kBF16},
    {kMtpEnorm, "enorm", "mtp", kMtp, kFloat, DType::kBF16},
    {kMtpHnorm, "hnorm", "mtp", kMtp, kFloat, DType::kBF16},
    {kMtpNorm, "norm", "mtp", kMtp, kFloat, DType::kBF16},
    {kMtpHcHeadFn, "hc_head.fn", "mtp", kMtp, kFloat, DType::kF32},
    {kMtpHcHeadBase, "hc_head.base", "mtp", kMtp, kFloat, DType::kF32},
    {kMtpHcHeadScale, "hc_head.scale", "mtp", kMtp, kFloat, DType::kF32},
};
static_assert(std::size(kSlots) == kNumParams);

// ---- Names: one row per (convention, slot, form). {L} = layer, {E} = expert. ----
// A slot with two rows in one convention has two alternative forms, exactly one of which a
// checkpoint may hold.
struct NameRule {
  C convention;
  Param param;
  Stacking stacking;
  const char* pattern;     // kPerExpertGateUp: the gate (w1) name
  const char* pattern_up;  // kPerExpertGateUp only: the up (w3) name
};

constexpr NameRule kNames[] = {
    // Official release (§3.1): flat names, no `model.` prefix.
    {C::kOfficial, kEmbed, kWhole, "embed.weight", nullptr},
    {C::kOfficial, kHead, kWhole, "head.weight", nullptr},
    {C::kOfficial, kNorm, kWhole, "norm.weight", nullptr},
    {C::kOfficial, kHcHeadFn, kWhole, "hc_head_fn", nullptr},
    {C::kOfficial, kHcHeadBase, kWhole, "hc_head_base", nullptr},
    {C::kOfficial, kHcHeadScale, kWhole, "hc_head_scale", nullptr},
    {C::kOfficial, kHcAttnFn, kWhole, "layers.{L}.hc_attn_fn", nullptr},
    {C::kOfficial, kHcAttnBase, kWhole, "layers.{L}.hc_attn_base", nullptr},
    {C::kOfficial, kHcAttnScale, kWhole, "layers.{L}.hc_attn_scale", nullptr},
    {C::kOfficial, kHcFfnFn, kWhole, "layers.{L}.hc_ffn_fn", nullptr},
    {C::kOfficial, kHcFfnBase, kWhole, "layers.{L}.hc_ffn_base", nullptr},
    {C::kOfficial, kHcFfnScale, kWhole, "layers.{L}.hc_ffn_scale", nullptr},
    {C::kOfficial, kAttnNorm, kWhole, "layers.{L}.attn_norm.weight", nullptr},
    {C::kOfficial, kFfnNorm, kWhole, "layers.{L}.ffn_norm.weight", nullptr},
    {C::kOfficial, kAttnSink, kWhole, "layers.{L}.attn.attn_sink", nullptr},
    {C::kOfficial, kWqA, kWhole, "layers.{L}.attn.wq_a.weight", nullptr},
    {C::kOfficial, kQNorm, kWhole, "layers.{L}.attn.q_norm.weight", nullptr},
    {C::kOfficial, kWqB, kWhole, "layers.{L}.attn.wq_b.weight", nullptr},
    {C::kOfficial, kWkv, kWhole, "layers.{L}.attn.wkv.weight", nullptr},
    {C::kOfficial, kKvNorm, kWhole, "layers.{L}.attn.kv_norm.weight", nullptr},
    {C::kOfficial, kWoA, kWhole, "layers.{L}.attn.wo_a.weight", nullptr},
    {C::kOfficial, kWoB, kWhole, "layers.{L}.attn.wo_b.weight", nullptr},
    {C::kOfficial, kCompressorWkv, kWhole, "layers.{L}.attn.compressor.wkv.weight", nullptr},
    {C::kOfficial, kCompressorWgate, kWhole, "layers.{L}.attn.compressor.wgate.weight", nullptr},
    {C::kOfficial, kCompressorApe, kWhole, "layers.{L}.attn.compressor.ape", nullptr},
    {C::kOfficial, kCompressorNorm, kWhole, "layers.{L}.attn.compressor.norm.weight", nullptr},
    {C::kOfficial, kIndexerWqB, kWhole, "layers.{L}.attn.indexer.wq_b.weight", nullptr},
    {C::kOfficial, kIndexerWeightsProj, kWhole, "layers.{L}.attn.indexer.weights_proj.weight",
     nullptr},
    {C::kOfficial, kIndexerCompressorWkv, kWhole, "layers.{L}.attn.indexer.compressor.wkv.weight",
     nullptr},
    {C::kOfficial, kIndexerCompressorWgate, kWhole,
     "layers.{L}.attn.indexer.compressor.wgate.weight", nullptr},
    {C::kOfficial, kIndexerCompressorApe, kWhole, "layers.{L}.attn.indexer.compressor.ape",
     nullptr},
    {C::kOfficial, kIndexerCompressorNorm, kWhole, "layers.{L}.attn.indexer.compressor.norm.weight",
     nullptr},
    {C::kOfficial, kGate, kWhole, "layers.{L}.ffn.gate.weight", nullptr},
    {C::kOfficial, kGateBias, kWhole, "layers.{L}.ffn.gate.bias", nullptr},
    {C::kOfficial, kGateTid2eid, kWhole, "layers.{L}.ffn.gate.tid2eid", nullptr},
    {C::kOfficial, kSharedW1, kWhole, "layers.{L}.ffn.shared_experts.w1.weight", nullptr},
    {C::kOfficial, kSharedW3, kWhole, "layers.{L}.ffn.shared_experts.w3.weight", nullptr},
    {C::kOfficial, kSharedW2, kWhole, "layers.{L}.ffn.shared_experts.w2.weight", nullptr},
    {C::kOfficial, kExpertsW13, kPerExpertGateUp, "layers.{L}.ffn.experts.{E}.w1.weight",
     "layers.{L}.ffn.experts.{E}.w3.weight"},
    {C::kOfficial, kExpertsW2, kPerExpert, "layers.{L}.ffn.experts.{E}.w2.weight", nullptr},
    // An MTP block's own tensors; its V4 block is named as a layer's, `mtp.{L}.` for `layers.{L}.`
    // (mtp_pattern), {L} its MTP index.
    {C::kOfficial, kMtpEProj, kWhole, "mtp.{L}.e_proj.weight", nullptr},
    {C::kOfficial, kMtpHProj, kWhole, "mtp.{L}.h_proj.weight", nullptr},
    {C::kOfficial, kMtpEnorm, kWhole, "mtp.{L}.enorm.weight", nullptr},
    {C::kOfficial, kMtpHnorm, kWhole, "mtp.{L}.hnorm.weight", nullptr},
    {C::kOfficial, kMtpNorm, kWhole, "mtp.{L}.norm.weight", nullptr},
    {C::kOfficial, kMtpHcHeadFn, kWhole, "mtp.{L}.hc_head_fn", nullptr},
    {C::kOfficial, kMtpHcHeadBase, kWhole, "mtp.{L}.hc_head_base", nullptr},
    {C::kOfficial, kMtpHcHeadScale, kWhole, "mtp.{L}.hc_head_scale", nullptr},

    // transformers save_pretrained (5.17, checked against tests/golden/*_pretrained/keys.txt):
    // the reverse of its conversion rules, i.e. official inner names under `model.`, except the
    // top-level renames (embed_tokens, hc_head.hc_*), `head.weight` outside `model.`, and the
    // attention kv_norm, which its `.norm.` <-> `.kv_norm.` rule writes back as `attn.norm`.
    {C::kPretrained, kEmbed, kWhole, "model.embed_tokens.weight", nullptr},
    {C::kPretrained, kHead, kWhole, "head.weight", nullptr},
    {C::kPretrained, kNorm, kWhole, "model.norm.weight", nullptr},
    {C::kPretrained, kHcHeadFn, kWhole, "model.hc_head.hc_fn", nullptr},
    {C::kPretrained, kHcHeadBase, kWhole, "model.hc_head.hc_base", nullptr},
    {C::kPretrained, kHcHeadScale, kWhole, "model.hc_head.hc_scale", nullptr},
    {C::kPretrained, kHcAttnFn, kWhole, "model.layers.{L}.hc_attn_fn", nullptr},
    {C::kPretrained, kHcAttnBase, kWhole, "model.layers.{L}.hc_attn_base", nullptr},
    {C::kPretrained, kHcAttnScale, kWhole, "model.layers.{L}.hc_attn_scale", nullptr},
    {C::kPretrained, kHcFfnFn, kWhole, "model.layers.{L}.hc_ffn_fn", nullptr},
    {C::kPretrained, kHcFfnBase, kWhole, "model.layers.{L}.hc_ffn_base", nullptr},
    {C::kPretrained, kHcFfnScale, kWhole, "model.layers.{L}.hc_ffn_scale", nullptr},
    {C::kPretrained, kAttnNorm, kWhole, "model.layers.{L}.attn_norm.weight", nullptr},
    {C::kPretrained, kFfnNorm, kWhole, "model.layers.{L}.ffn_norm.weight", nullptr},
    {C::kPretrained, kAttnSink, kWhole, "model.layers.{L}.attn.attn_sink", nullptr},
    {C::kPretrained, kWqA, kWhole, "model.layers.{L}.attn.wq_a.weight", nullptr},
    {C::kPretrained, kQNorm, kWhole, "model.layers.{L}.attn.q_norm.weight", nullptr},
    {C::kPretrained, kWqB, kWhole, "model.layers.{L}.attn.wq_b.weight", nullptr},
    {C::kPretrained, kWkv, kWhole, "model.layers.{L}.attn.wkv.weight", nullptr},
    {C::kPretrained, kKvNorm, kWhole, "model.layers.{L}.attn.norm.weight", nullptr},
    {C::kPretrained, kKvNorm, kWhole, "model.layers.{L}.attn.kv_norm.weight", nullptr},
    {C::kPretrained, kWoA, kWhole, "model.layers.{L}.attn.wo_a.weight", nullptr},
    {C::kPretrained, kWoB, kWhole, "model.layers.{L}.attn.wo_b.weight", nullptr},
    {C::kPretrained, kCompressorWkv, kWhole, "model.layers.{L}.attn.compressor.wkv.weight",
     nullptr},
    {C::kPretrained, kCompressorWgate, kWhole, "model.layers.{L}.attn.compressor.wgate.weight",
     nullptr},
    {C::kPretrained, kCompressorApe, kWhole, "model.layers.{L}.attn.compressor.ape", nullptr},
    {C::kPretrained, kCompressorNorm, kWhole, "model.layers.{L}.attn.compressor.norm.weight",
     nullptr},
    {C::kPretrained, kIndexerWqB, kWhole, "model.layers.{L}.attn.indexer.wq_b.weight", nullptr},
    {C::kPretrained, kIndexerWeightsProj, kWhole,
     "model.layers.{L}.attn.indexer.weights_proj.weight", nullptr},
    {C::kPretrained, kIndexerCompressorWkv, kWhole,
     "model.layers.{L}.attn.indexer.compressor.wkv.weight", nullptr},
    {C::kPretrained, kIndexerCompressorWgate, kWhole,
     "model.layers.{L}.attn.indexer.compressor.wgate.weight", nullptr},
    {C::kPretrained, kIndexerCompressorApe, kWhole, "model.layers.{L}.attn.indexer.compressor.ape",
     nullptr},
    {C::kPretrained, kIndexerCompressorNorm, kWhole,
     "model.layers.{L}.attn.indexer.compressor.norm.weight", nullptr},
    {C::kPretrained, kGate, kWhole, "model.layers.{L}.ffn.gate.weight", nullptr},
    {C::kPretrained, kGateBias, kWhole, "model.layers.{L}.ffn.gate.bias", nullptr},
    {C::kPretrained, kGateTid2eid, kWhole, "model.layers.{L}.ffn.gate.tid2eid", nullptr},
    {C::kPretrained, kSharedW1, kWhole, "model.layers.{L}.ffn.shared_experts.w1.weight", nullptr},
    {C::kPretrained, kSharedW3, kWhole, "model.layers.{L}.ffn.shared_experts.w3.weight", nullptr},
    {C::kPretrained, kSharedW2, kWhole, "model.layers.{L}.ffn.shared_experts.w2.weight", nullptr},
    {C::kPretrained, kExpertsW13, kPerExpertGateUp, "model.layers.{L}.ffn.experts.{E}.w1.weight",
     "model.layers.{L}.ffn.experts.{E}.w3.weight"},
    {C::kPretrained, kExpertsW2, kPerExpert, "model.layers.{L}.ffn.experts.{E}.w2.weight", nullptr},

    // transformers' in-memory module names (state_dict(), ModelOpt exports of the HF model).
    {C::kStateDict, kEmbed, kWhole, "model.embed_tokens.weight", nullptr},
    {C::kStateDict, kHead, kWhole, "lm_head.weight", nullptr},
    {C::kStateDict, kNorm, kWhole, "model.norm.weight", nullptr},
    {C::kStateDict, kHcHeadFn, kWhole, "model.hc_head.hc_fn", nullptr},
    {C::kStateDict, kHcHeadBase, kWhole, "model.hc_head.hc_base", nullptr},
    {C::kStateDict, kHcHeadScale, kWhole, "model.hc_head.hc_scale", nullptr},
    {C::kStateDict, kHcAttnFn, kWhole, "model.layers.{L}.attn_hc.fn", nullptr},
    {C::kStateDict, kHcAttnBase, kWhole, "model.layers.{L}.attn_hc.base", nullptr},
    {C::kStateDict, kHcAttnScale, kWhole, "model.layers.{L}.attn_hc.scale", nullptr},
    {C::kStateDict, kHcFfnFn, kWhole, "model.layers.{L}.ffn_hc.fn", nullptr},
    {C::kStateDict, kHcFfnBase, kWhole, "model.layers.{L}.ffn_hc.base", nullptr},
    {C::kStateDict, kHcFfnScale, kWhole, "model.layers.{L}.ffn_hc.scale", nullptr},
    {C::kStateDict, kAttnNorm, kWhole, "model.layers.{L}.input_layernorm.weight", nullptr},
    {C::kStateDict, kFfnNorm, kWhole, "model.layers.{L}.post_attention_layernorm.weight", nullptr},
    {C::kStateDict, kAttnSink, kWhole, "model.layers.{L}.self_attn.sinks", nullptr},
    {C::kStateDict, kWqA, kWhole, "model.layers.{L}.self_attn.q_a_proj.weight", nullptr},
    {C::kStateDict, kQNorm, kWhole, "model.layers.{L}.self_attn.q_a_norm.weight", nullptr},
    {C::kStateDict, kWqB, kWhole, "model.layers.{L}.self_attn.q_b_proj.weight", nullptr},
    {C::kStateDict, kWkv, kWhole, "model.layers.{L}.self_attn.kv_proj.weight", nullptr},
    {C::kStateDict, kKvNorm, kWhole, "model.layers.{L}.self_attn.kv_norm.weight", nullptr},
    {C::kStateDict, kWoA, kWhole, "model.layers.{L}.self_attn.o_a_proj.weight", nullptr},
    {C::kStateDict, kWoB, kWhole, "model.layers.{L}.self_attn.o_b_proj.weight", nullptr},
    {C::kStateDict, kCompressorWkv, kWhole, "model.layers.{L}.self_attn.compressor.kv_proj.weight",
     nullptr},
    {C::kStateDict, kCompressorWgate, kWhole,
     "model.layers.{L}.self_attn.compressor.gate_proj.weight", nullptr},
    {C::kStateDict, kCompressorApe, kWhole, "model.layers.{L}.self_attn.compressor.position_bias",
     nullptr},
    {C::kStateDict, kCompressorNorm, kWhole, "model.layers.{L}.self_attn.compressor.kv_norm.weight",
     nullptr},
    // transformers nests the indexer under the compressor and flattens its compressor onto it.
    {C::kStateDict, kIndexerWqB, kWhole,
     "model.layers.{L}.self_attn.compressor.indexer.q_b_proj.weight", nullptr},
    {C::kStateDict, kIndexerWeightsProj, kWhole,
     "model.layers.{L}.self_attn.compressor.indexer.scorer.weights_proj.weight", nullptr},
    // The name before transformers moved weights_proj into `scorer` (§5 item 23).
    {C::kStateDict, kIndexerWeightsProj, kWhole,
     "model.layers.{L}.self_attn.compressor.indexer.weights_proj.weight", nullptr},
    {C::kStateDict, kIndexerCompressorWkv, kWhole,
     "model.layers.{L}.self_attn.compressor.indexer.kv_proj.weight", nullptr},
    {C::kStateDict, kIndexerCompressorWgate, kWhole,
     "model.layers.{L}.self_attn.compressor.indexer.gate_proj.weight", nullptr},
    {C::kStateDict, kIndexerCompressorApe, kWhole,
     "model.layers.{L}.self_attn.compressor.indexer.position_bias", nullptr},
    {C::kStateDict, kIndexerCompressorNorm, kWhole,
     "model.layers.{L}.self_attn.compressor.indexer.kv_norm.weight", nullptr},
    {C::kStateDict, kGate, kWhole, "model.layers.{L}.mlp.gate.weight", nullptr},
    {C::kStateDict, kGateBias, kWhole, "model.layers.{L}.mlp.gate.e_score_correction_bias",
     nullptr},
    {C::kStateDict, kGateTid2eid, kWhole, "model.layers.{L}.mlp.gate.tid2eid", nullptr},
    {C::kStateDict, kSharedW1, kWhole, "model.layers.{L}.mlp.shared_experts.gate_proj.weight",
     nullptr},
    {C::kStateDict, kSharedW3, kWhole, "model.layers.{L}.mlp.shared_experts.up_proj.weight",
     nullptr},
    {C::kStateDict, kSharedW2, kWhole, "model.layers.{L}.mlp.shared_experts.down_proj.weight",
     nullptr},
    // Fused 3-D parameters [E, 2F, D] (gate rows first) and [E, D, F] ...
    {C::kStateDict, kExpertsW13, kWhole, "model.layers.{L}.mlp.experts.gate_up_proj", nullptr},
    {C::kStateDict, kExpertsW2, kWhole, "model.layers.{L}.mlp.experts.down_proj", nullptr},
    // ... or the per-expert "modern" names some exporters write instead (§3.2).
    {C::kStateDict, kExpertsW13, kPerExpertGateUp,
     "model.layers.{L}.mlp.experts.{E}.gate_proj.weight",
     "model.layers.{L}.mlp.experts.{E}.up_proj.weight"},
    {C::kStateDict, kExpertsW2, kPerExpert, "model.layers.{L}.mlp.experts.{E}.down_proj.weight",
     nullptr},
};

// Quantization siblings by suffix: (suffix of the sibling, suffix of its primary, role).
struct SiblingRule {
  std::string_view suffix;
  std::string_view primary_suffix;
  SiblingRole role;
};
// clang-format off
constexpr SiblingRule kSiblings[] = {
    {".scale", ".weight", SiblingRole::kBlockScale},              // official FP8 / FP4
    {".weight_scale", ".weight", SiblingRole::kBlockScale},       // ModelOpt NVFP4
    {".weight_scale_inv", ".weight", SiblingRole::kBlockScale},   // transformers FP8
    {".weight_scale_2", ".weight", SiblingRole::kGlobalScale},    // ModelOpt NVFP4
    {".input_scale", ".weight", SiblingRole::kInputScale},        // ModelOpt NVFP4
    {"_weight_scale", "", SiblingRole::kBlockScale},              // ModelOpt fused 3-D
    {"_weight_scale_2", "", SiblingRole::kGlobalScale},
    {"_input_scale", "", SiblingRole::kInputScale},
};
// clang-format on

std::string expand(std::string_view pattern, int64_t layer, int64_t expert) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern.substr(i, 3) == "{L}") {
      DSV4_CHECK(layer >= 0, "pattern %.*s needs a layer", static_cast<int>(pattern.size()),
                 pattern.data());
      out += std::to_string(layer);
      i += 2;
    } else if (pattern.substr(i, 3) == "{E}") {
      DSV4_CHECK(expert >= 0, "pattern needs an expert");
      out += std::to_string(expert);
      i += 2;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

constexpr std::string_view kLayerPrefix = "layers.{L}.";
constexpr std::string_view kMtpPrefix = "mtp.";

// An official layer pattern as an MTP block's: `layers.{L}.x` -> `mtp.{L}.x`.
std::string mtp_pattern(std::string_view pattern) {
  if (!pattern.starts_with(kLayerPrefix)) return std::string(pattern);
  return std::string(kMtpPrefix) + "{L}." + std::string(pattern.substr(kLayerPrefix.size()));
}

// `layer` is the index {L} stands for (an MTP block's own index for its names).
SlotForm make_form(const NameRule& rule, int64_t layer, int64_t n_experts, bool mtp) {
  const std::string pattern = mtp ? mtp_pattern(rule.pattern) : rule.pattern;
  const std::string pattern_up =
      rule.pattern_up ? (mtp ? mtp_pattern(rule.pattern_up) : rule.pattern_up) : "";
  SlotForm form;
  form.stacking = rule.stacking;
  switch (rule.stacking) {
    case Stacking::kWhole:
      form.pieces.push_back({expand(pattern, layer, -1), -1, 0});
      break;
    case Stacking::kPerExpert:
      for (int64_t e = 0; e < n_experts; ++e)
        form.pieces.push_back({expand(pattern, layer, e), e, 0});
      break;
    case Stacking::kPerExpertGateUp:
      for (int64_t e = 0; e < n_experts; ++e) {
        form.pieces.push_back({expand(pattern, layer, e), e, 0});
        form.pieces.push_back({expand(pattern_up, layer, e), e, 1});
      }
      break;
  }
  return form;
}

// Parses "<prefix><int>." at the start of key; the layer index or -1.
int64_t leading_layer(std::string_view key, std::string_view prefix) {
  if (key.substr(0, prefix.size()) != prefix) return -1;
  const std::string_view rest = key.substr(prefix.size());
  int64_t layer = -1;
  const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), layer);
  if (ec != std::errc() || end == rest.data() || end == rest.data() + rest.size() || *end != '.') {
    return -1;
  }
  return layer;
}

}  // namespace

std::string_view convention_name(NamingConvention convention) {
  switch (convention) {
    case C::kOfficial:
      return "official";
    case C::kPretrained:
      return "pretrained";
    case C::kStateDict:
      return "state_dict";
  }
  DSV4_UNREACHABLE("bad convention");
}

std::optional<NamingConvention> parse_convention(std::string_view name) {
  for (NamingConvention c : kAllConventions) {
    if (convention_name(c) == name) return c;
  }
  return std::nullopt;
}

const SlotSpec& slot_spec(Param param) {
  const SlotSpec& spec = kSlots[static_cast<int>(param)];
  DSV4_CHECK(spec.param == param, "kSlots out of order at %d", static_cast<int>(param));
  return spec;
}

bool slot_present(const SlotSpec& spec, const ModelConfig& config, int64_t layer) {
  if (spec.scope == Scope::kGlobal) return layer < 0;
  if (layer < 0) return false;
  const LayerSchedule& s = config.schedule(layer);
  switch (spec.scope) {
    case Scope::kGlobal:
      return false;
    case Scope::kMtp:
      return layer >= config.n_layer;
    case Scope::kEveryLayer:
      return true;
    case Scope::kCompressed:
      return s.attention != AttentionType::kSliding;
    case Scope::kCsa:
      return s.attention == AttentionType::kCompressedSparse;
    case Scope::kHashLayer:
      return s.routing == RoutingType::kHash;
    case Scope::kScoreLayer:
      return s.routing == RoutingType::kScore;
  }
  DSV4_UNREACHABLE("bad scope");
}

std::string slot_label(Param param, int64_t layer) {
  const std::string path(slot_spec(param).path);
  return layer < 0 ? path : "layer " + std::to_string(layer) + " " + path;
}

Shape slot_shape(Param param, const ModelConfig& config, int64_t layer) {
  const int64_t D = config.hidden_size, V = config.vocab_size, M = config.hc_mult;
  const int64_t H = config.n_head, Dh = config.head_dim, Q = config.q_lora_rank;
  const int64_t GR = config.o_groups * config.o_lora_rank;
  const int64_t E = config.n_routed_experts, F = config.moe_intermediate_size;
  const int64_t HI = config.index_n_heads, DI = config.index_head_dim;
  const int64_t mix = (2 + M) * M;  // pre M, post M, comb M·M
  int64_t m = 0, c = 1;             // compress ratio; CSA compresses overlapping pairs of blocks
  if (layer >= 0) {
    const LayerSchedule& s = config.schedule(layer);
    m = s.compress_ratio;
    c = s.attention == AttentionType::kCompressedSparse ? 2 : 1;
  }
  // clang-format off
  switch (param) {
    case kEmbed: case kHead: return {V, D};
    case kMtpEProj: case kMtpHProj: return {D, D};
    case kNorm: case kAttnNorm: case kFfnNorm: case kMtpEnorm: case kMtpHnorm: case kMtpNorm:
      return {D};
    case kHcHeadFn: case kMtpHcHeadFn: return {M, M * D};
    case kHcHeadBase: case kMtpHcHeadBase: return {M};
    case kHcHeadScale: case kMtpHcHeadScale: return {1};
    case kHcAttnFn: case kHcFfnFn: return {mix, M * D};
    case kHcAttnBase: case kHcFfnBase: return {mix};
    case kHcAttnScale: case kHcFfnScale: return {3};
    case kAttnSink: return {H};
    case kWqA: return {Q, D};
    case kQNorm: return {Q};
    case kWqB: return {H * Dh, Q};
    case kWkv: return {Dh, D};
    case kKvNorm: return {Dh};
    case kWoA: return {GR, H / config.o_groups * Dh};
    case kWoB: return {D, GR};
    case kCompressorWkv: case kCompressorWgate: return {c * Dh, D};
    case kCompressorApe: return {m, c * Dh};
    case kCompressorNorm: return {Dh};
    case kIndexerWqB: return {HI * DI, Q};
    case kIndexerWeightsProj: return {HI, D};
    case kIndexerCompressorWkv: case kIndexerCompressorWgate: return {2 * DI, D};
    case kIndexerCompressorApe: return {m, 2 * DI};
    case kIndexerCompressorNorm: return {DI};
    case kGate: return {E, D};
    case kGateBias: return {E};
    case kGateTid2eid: return {V, config.n_expert_used};
    case kSharedW1: case kSharedW3: return {F, D};
    case kSharedW2: return {D, F};
    case kExpertsW13: return {E, 2 * F, D};
    case kExpertsW2: return {E, D, F};
  }
  // clang-format on
  DSV4_UNREACHABLE("bad param");
}

size_t official_tensor_count(const ModelConfig& config, int tensors_per_linear,
                             int tensors_per_expert_matrix) {
  // Per layer (§3.1.4): hc 6, norms 2, sink 1, q_norm 1, kv_norm 1, wq_a wq_b wkv wo_a wo_b;
  // gate weight + bias or tid2eid; shared w1 w3 w2; 3 matrices per routed expert.
  const size_t per_layer = 11 + 5 * static_cast<size_t>(tensors_per_linear) + 2 +
                           3 * static_cast<size_t>(tensors_per_linear) +
                           3 * static_cast<size_t>(config.n_routed_experts) *
                               static_cast<size_t>(tensors_per_expert_matrix);
  size_t count = 6;  // embed, head, norm, hc_head fn/base/scale
  for (const LayerSchedule& s : config.layers) {
    count += per_layer;
    // Compressor wkv wgate ape norm; CSA adds indexer wq_b, weights_proj and its compressor's 4.
    if (s.attention != AttentionType::kSliding) count += 4;
    if (s.attention == AttentionType::kCompressedSparse) count += 5 + tensors_per_linear;
  }
  return count;
}

ExpectedKeys expected_keys(const ModelConfig& config, NamingConvention convention,
                           bool with_mtp) {
  ExpectedKeys keys;
  keys.convention = convention;
  const int64_t n_blocks = config.n_layer + (with_mtp ? config.n_mtp_layers : 0);
  for (int64_t layer = -1; layer < n_blocks; ++layer) {
    const bool mtp = layer >= config.n_layer;
    const C names = mtp ? C::kOfficial : convention;
    for (const SlotSpec& spec : kSlots) {
      if (!slot_present(spec, config, layer)) continue;
      ExpectedSlot slot{spec.param, layer, {}};
      for (const NameRule& rule : kNames) {
        if (rule.convention == names && rule.param == spec.param) {
          slot.forms.push_back(make_form(rule, mtp ? layer - config.n_layer : layer,
                                         config.n_routed_experts, mtp));
        }
      }
      DSV4_CHECK(!slot.forms.empty(), "no name for %s in %s", std::string(spec.path).c_str(),
                 std::string(convention_name(convention)).c_str());
      keys.slots.push_back(std::move(slot));
    }
  }
  for (uint32_t s = 0; s < keys.slots.size(); ++s) {
    const ExpectedSlot& slot = keys.slots[s];
    for (uint16_t f = 0; f < slot.forms.size(); ++f) {
      for (uint32_t p = 0; p < slot.forms[f].pieces.size(); ++p) {
        const bool inserted =
            keys.by_name.emplace(slot.forms[f].pieces[p].name, PieceRef{s, f, p}).second;
        DSV4_CHECK(inserted, "name table maps %s twice", slot.forms[f].pieces[p].name.c_str());
      }
    }
  }
  return keys;
}

std::vector<SiblingMatch> sibling_candidates(std::string_view key) {
  std::vector<SiblingMatch> matches;
  for (const SiblingRule& rule : kSiblings) {
    if (key.size() > rule.suffix.size() && key.ends_with(rule.suffix)) {
      std::string primary(key.substr(0, key.size() - rule.suffix.size()));
      matches.push_back({primary + std::string(rule.primary_suffix), rule.role});
    }
  }
  return matches;
}

bool is_mtp_key(std::string_view key) { return key.starts_with(kMtpPrefix); }

std::optional<std::string> ignore_reason(std::string_view key, const ModelConfig& config) {
  constexpr std::string_view kMtpReason = "MTP draft block: ";
  if (is_mtp_key(key) && config.n_mtp_layers == 0) {
    return std::string(kMtpReason) + "the config has num_nextn_predict_layers 0";
  }
  constexpr std::string_view kOtherNaming = "stored under names this engine does not bind";
  if (key.starts_with("model.mtp.")) return std::string(kMtpReason) + std::string(kOtherNaming);
  for (std::string_view prefix : {"layers.", "model.layers."}) {
    const int64_t layer = leading_layer(key, prefix);
    if (layer >= config.n_layer && layer < config.n_layer + config.n_mtp_layers) {
      return std::string(kMtpReason) + std::string(kOtherNaming) + " (numbered as layer " +
             std::to_string(layer) + " >= num_hidden_layers " + std::to_string(config.n_layer) +
             ")";
    }
  }
  return std::nullopt;
}

}  // namespace dsv4::checkpoint
