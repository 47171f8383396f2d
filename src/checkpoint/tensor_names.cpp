// The weight table and the rename rules as data, and their expansion into the complete expected
// key set of a config. The only file in the tree that spells checkpoint names.
#include "checkpoint/tensor_names.h"

#include <charconv>
#include <span>

#include "base/check.h"

namespace dsv4::checkpoint {

// ---- The dimensions shapes are written in ----

struct SlotDims {
  int64_t D, V, M, H, Dh, Q, E, F, K, HI, DI;
  int64_t mix;    // (2 + M)·M: pre M, post M, comb M·M
  int64_t GR;     // o_groups · o_lora_rank
  int64_t HG_Dh;  // H / o_groups · Dh: one output group's attention width
  int64_t m, c;   // compress ratio; 2 for CSA, which compresses overlapping pairs of blocks
};

namespace {

using enum Param;
using enum Scope;
using enum Storage;
using enum Stacking;
using C = NamingConvention;

SlotDims slot_dims(const ModelConfig& config, int64_t layer) {
  const int64_t M = config.hc_mult;
  SlotDims d{config.hidden_size,
             config.vocab_size,
             M,
             config.n_head,
             config.head_dim,
             config.q_lora_rank,
             config.n_routed_experts,
             config.moe_intermediate_size,
             config.n_expert_used,
             config.index_n_heads,
             config.index_head_dim,
             (2 + M) * M,
             config.o_groups * config.o_lora_rank,
             config.n_head / config.o_groups * config.head_dim,
             0,
             1};
  if (layer >= 0) {
    const LayerSchedule& s = config.schedule(layer);
    d.m = s.compress_ratio;
    d.c = s.attention == AttentionType::kCompressedSparse ? 2 : 1;
  }
  return d;
}

// ---- Fields ----

WeightRef ref(Tensor& t) { return {&t}; }
WeightRef ref(LinearWeight& w) { return {&w, &w}; }
WeightRef read_by_linear(Tensor& t) { return {&t, nullptr, true}; }
WeightRef ref(Tensor& values, std::optional<format::Nvfp4Tensor>& nvfp4, Tensor& input_scale) {
  return {&values, nullptr, false, &nvfp4, &input_scale};
}

using Dims = const SlotDims&;
using Model = ModelWeights;
using Layer = LayerWeights;
using Mtp = MtpWeights;
constexpr DType kBF16 = DType::kBF16, kF32 = DType::kF32, kF8E4M3 = DType::kF8E4M3;

// ---- THE table: one row per weight. Official name ({L} layer, {E} expert), field path,
// category, which layers, storage, release dtype, shape, field. ----
// clang-format off
constexpr SlotSpec kSlots[] = {
    {kEmbed, "embed.weight", "embed", "embedding", kGlobal, kMatrix, kBF16,
     [](Dims d) { return Shape{d.V, d.D}; }, +[](Model& w) { return ref(w.embed); }},
    {kHead, "head.weight", "head", "head", kGlobal, kLinear, kBF16,
     [](Dims d) { return Shape{d.V, d.D}; }, +[](Model& w) { return ref(w.head); }},
    {kNorm, "norm.weight", "norm", "norms", kGlobal, kFloat, kBF16,
     [](Dims d) { return Shape{d.D}; }, +[](Model& w) { return ref(w.norm); }},
    {kHcHeadFn, "hc_head_fn", "hc_head.fn", "hyper-connections", kGlobal, kFloat, kF32,
     [](Dims d) { return Shape{d.M, d.M * d.D}; },
     +[](Model& w) { return read_by_linear(w.hc_head.fn); }},
    {kHcHeadBase, "hc_head_base", "hc_head.base", "hyper-connections", kGlobal, kFloat, kF32,
     [](Dims d) { return Shape{d.M}; }, +[](Model& w) { return ref(w.hc_head.base); }},
    {kHcHeadScale, "hc_head_scale", "hc_head.scale", "hyper-connections", kGlobal, kFloat, kF32,
     [](Dims) { return Shape{1}; }, +[](Model& w) { return ref(w.hc_head.scale); }},
    {kHcAttnFn, "layers.{L}.hc_attn_fn", "hc_attn.fn", "hyper-connections", kEveryLayer, kFloat,
     kF32, [](Dims d) { return Shape{d.mix, d.M * d.D}; },
     +[](Layer& l) { return read_by_linear(l.hc_attn.fn); }},
    {kHcAttnBase, "layers.{L}.hc_attn_base", "hc_attn.base", "hyper-connections", kEveryLayer,
     kFloat, kF32, [](Dims d) { return Shape{d.mix}; },
     +[](Layer& l) { return ref(l.hc_attn.base); }},
    {kHcAttnScale, "layers.{L}.hc_attn_scale", "hc_attn.scale", "hyper-connections", kEveryLayer,
     kFloat, kF32, [](Dims) { return Shape{3}; }, +[](Layer& l) { return ref(l.hc_attn.scale); }},
    {kHcFfnFn, "layers.{L}.hc_ffn_fn", "hc_ffn.fn", "hyper-connections", kEveryLayer, kFloat, kF32,
     [](Dims d) { return Shape{d.mix, d.M * d.D}; },
     +[](Layer& l) { return read_by_linear(l.hc_ffn.fn); }},
    {kHcFfnBase, "layers.{L}.hc_ffn_base", "hc_ffn.base", "hyper-connections", kEveryLayer,
     kFloat, kF32, [](Dims d) { return Shape{d.mix}; },
     +[](Layer& l) { return ref(l.hc_ffn.base); }},
    {kHcFfnScale, "layers.{L}.hc_ffn_scale", "hc_ffn.scale", "hyper-connections", kEveryLayer,
     kFloat, kF32, [](Dims) { return Shape{3}; }, +[](Layer& l) { return ref(l.hc_ffn.scale); }},
    {kAttnNorm, "layers.{L}.attn_norm.weight", "attn_norm", "norms", kEveryLayer, kFloat, kBF16,
     [](Dims d) { return Shape{d.D}; }, +[](Layer& l) { return ref(l.attn_norm); }},
    {kFfnNorm, "layers.{L}.ffn_norm.weight", "ffn_norm", "norms", kEveryLayer, kFloat, kBF16,
     [](Dims d) { return Shape{d.D}; }, +[](Layer& l) { return ref(l.ffn_norm); }},
    {kAttnSink, "layers.{L}.attn.attn_sink", "attn.attn_sink", "attention", kEveryLayer, kFloat,
     kF32, [](Dims d) { return Shape{d.H}; }, +[](Layer& l) { return ref(l.attn.attn_sink); }},
    {kWqA, "layers.{L}.attn.wq_a.weight", "attn.wq_a", "attention", kEveryLayer, kLinear, kF8E4M3,
     [](Dims d) { return Shape{d.Q, d.D}; }, +[](Layer& l) { return ref(l.attn.wq_a); }},
    {kQNorm, "layers.{L}.attn.q_norm.weight", "attn.q_norm", "attention", kEveryLayer, kFloat,
     kBF16, [](Dims d) { return Shape{d.Q}; }, +[](Layer& l) { return ref(l.attn.q_norm); }},
    {kWqB, "layers.{L}.attn.wq_b.weight", "attn.wq_b", "attention", kEveryLayer, kLinear, kF8E4M3,
     [](Dims d) { return Shape{d.H * d.Dh, d.Q}; }, +[](Layer& l) { return ref(l.attn.wq_b); }},
    {kWkv, "layers.{L}.attn.wkv.weight", "attn.wkv", "attention", kEveryLayer, kLinear, kF8E4M3,
     [](Dims d) { return Shape{d.Dh, d.D}; }, +[](Layer& l) { return ref(l.attn.wkv); }},
    {kKvNorm, "layers.{L}.attn.kv_norm.weight", "attn.kv_norm", "attention", kEveryLayer, kFloat,
     kBF16, [](Dims d) { return Shape{d.Dh}; }, +[](Layer& l) { return ref(l.attn.kv_norm); }},
    {kWoA, "layers.{L}.attn.wo_a.weight", "attn.wo_a", "attention", kEveryLayer, kLinear, kF8E4M3,
     [](Dims d) { return Shape{d.GR, d.HG_Dh}; }, +[](Layer& l) { return ref(l.attn.wo_a); }},
    {kWoB, "layers.{L}.attn.wo_b.weight", "attn.wo_b", "attention", kEveryLayer, kLinear, kF8E4M3,
     [](Dims d) { return Shape{d.D, d.GR}; }, +[](Layer& l) { return ref(l.attn.wo_b); }},
    {kCompressorWkv, "layers.{L}.attn.compressor.wkv.weight", "attn.compressor.wkv", "compressor",
     kCompressed, kLinear, kBF16, [](Dims d) { return Shape{d.c * d.Dh, d.D}; },
     +[](Layer& l) { return ref(l.attn.compressor.value().wkv); }},
    {kCompressorWgate, "layers.{L}.attn.compressor.wgate.weight", "attn.compressor.wgate",
     "compressor", kCompressed, kLinear, kBF16, [](Dims d) { return Shape{d.c * d.Dh, d.D}; },
     +[](Layer& l) { return ref(l.attn.compressor.value().wgate); }},
    {kCompressorApe, "layers.{L}.attn.compressor.ape", "attn.compressor.ape", "compressor",
     kCompressed, kFloat, kF32, [](Dims d) { return Shape{d.m, d.c * d.Dh}; },
     +[](Layer& l) { return ref(l.attn.compressor.value().ape); }},
    {kCompressorNorm, "layers.{L}.attn.compressor.norm.weight", "attn.compressor.norm",
     "compressor", kCompressed, kFloat, kBF16, [](Dims d) { return Shape{d.Dh}; },
     +[](Layer& l) { return ref(l.attn.compressor.value().norm); }},
    {kIndexerWqB, "layers.{L}.attn.indexer.wq_b.weight", "attn.indexer.wq_b", "indexer", kCsa,
     kLinear, kF8E4M3, [](Dims d) { return Shape{d.HI * d.DI, d.Q}; },
     +[](Layer& l) { return ref(l.attn.indexer.value().wq_b); }},
    {kIndexerWeightsProj, "layers.{L}.attn.indexer.weights_proj.weight",
     "attn.indexer.weights_proj", "indexer", kCsa, kLinear, kBF16,
     [](Dims d) { return Shape{d.HI, d.D}; },
     +[](Layer& l) { return ref(l.attn.indexer.value().weights_proj); }},
    {kIndexerCompressorWkv, "layers.{L}.attn.indexer.compressor.wkv.weight",
     "attn.indexer.compressor.wkv", "indexer", kCsa, kLinear, kBF16,
     [](Dims d) { return Shape{2 * d.DI, d.D}; },
     +[](Layer& l) { return ref(l.attn.indexer.value().compressor.wkv); }},
    {kIndexerCompressorWgate, "layers.{L}.attn.indexer.compressor.wgate.weight",
     "attn.indexer.compressor.wgate", "indexer", kCsa, kLinear, kBF16,
     [](Dims d) { return Shape{2 * d.DI, d.D}; },
     +[](Layer& l) { return ref(l.attn.indexer.value().compressor.wgate); }},
    {kIndexerCompressorApe, "layers.{L}.attn.indexer.compressor.ape",
     "attn.indexer.compressor.ape", "indexer", kCsa, kFloat, kF32,
     [](Dims d) { return Shape{d.m, 2 * d.DI}; },
     +[](Layer& l) { return ref(l.attn.indexer.value().compressor.ape); }},
    {kIndexerCompressorNorm, "layers.{L}.attn.indexer.compressor.norm.weight",
     "attn.indexer.compressor.norm", "indexer", kCsa, kFloat, kBF16,
     [](Dims d) { return Shape{d.DI}; },
     +[](Layer& l) { return ref(l.attn.indexer.value().compressor.norm); }},
    {kGate, "layers.{L}.ffn.gate.weight", "ffn.gate", "router", kEveryLayer, kMatrix, kBF16,
     [](Dims d) { return Shape{d.E, d.D}; }, +[](Layer& l) { return ref(l.ffn.gate); }},
    {kGateBias, "layers.{L}.ffn.gate.bias", "ffn.bias", "router", kScoreLayer, kFloat, kF32,
     [](Dims d) { return Shape{d.E}; }, +[](Layer& l) { return ref(l.ffn.bias); }},
    {kGateTid2eid, "layers.{L}.ffn.gate.tid2eid", "ffn.tid2eid", "router", kHashLayer, kIndex,
     DType::kI64, [](Dims d) { return Shape{d.V, d.K}; },
     +[](Layer& l) { return ref(l.ffn.tid2eid); }},
    {kSharedW1, "layers.{L}.ffn.shared_experts.w1.weight", "ffn.shared_expert.w1",
     "shared expert", kEveryLayer, kLinear, kF8E4M3, [](Dims d) { return Shape{d.F, d.D}; },
     +[](Layer& l) { return ref(l.ffn.shared_expert.w1); }},
    {kSharedW3, "layers.{L}.ffn.shared_experts.w3.weight", "ffn.shared_expert.w3",
     "shared expert", kEveryLayer, kLinear, kF8E4M3, [](Dims d) { return Shape{d.F, d.D}; },
     +[](Layer& l) { return ref(l.ffn.shared_expert.w3); }},
    {kSharedW2, "layers.{L}.ffn.shared_experts.w2.weight", "ffn.shared_expert.w2",
     "shared expert", kEveryLayer, kLinear, kF8E4M3, [](Dims d) { return Shape{d.D, d.F}; },
     +[](Layer& l) { return ref(l.ffn.shared_expert.w2); }},
    // One [F, D] gate (w1) and up (w3) tensor per expert, stacked [E, 2F, D] gate rows first.
    {kExpertsW13, "layers.{L}.ffn.experts.{E}.w1.weight", "ffn.experts.w13", "routed experts",
     kEveryLayer, kExperts, kBF16, [](Dims d) { return Shape{d.E, 2 * d.F, d.D}; },
     +[](Layer& l) {
       RoutedExpertWeights& e = l.ffn.experts;
       return ref(e.w13, e.w13_nvfp4, e.w13_input_scale);
     },
     "layers.{L}.ffn.experts.{E}.w3.weight"},
    {kExpertsW2, "layers.{L}.ffn.experts.{E}.w2.weight", "ffn.experts.w2", "routed experts",
     kEveryLayer, kExperts, kBF16, [](Dims d) { return Shape{d.E, d.D, d.F}; },
     +[](Layer& l) {
       RoutedExpertWeights& e = l.ffn.experts;
       return ref(e.w2, e.w2_nvfp4, e.w2_input_scale);
     }},
    // An MTP block's own tensors; its V4 block is named as a layer's, `mtp.{L}.` for `layers.{L}.`
    // (mtp_pattern), {L} its MTP index.
    {kMtpEProj, "mtp.{L}.e_proj.weight", "e_proj", "mtp", kMtp, kLinear, kF8E4M3,
     [](Dims d) { return Shape{d.D, d.D}; }, +[](Mtp& m) { return ref(m.e_proj); }},
    {kMtpHProj, "mtp.{L}.h_proj.weight", "h_proj", "mtp", kMtp, kLinear, kF8E4M3,
     [](Dims d) { return Shape{d.D, d.D}; }, +[](Mtp& m) { return ref(m.h_proj); }},
    {kMtpEnorm, "mtp.{L}.enorm.weight", "enorm", "mtp", kMtp, kFloat, kBF16,
     [](Dims d) { return Shape{d.D}; }, +[](Mtp& m) { return ref(m.enorm); }},
    {kMtpHnorm, "mtp.{L}.hnorm.weight", "hnorm", "mtp", kMtp, kFloat, kBF16,
     [](Dims d) { return Shape{d.D}; }, +[](Mtp& m) { return ref(m.hnorm); }},
    {kMtpNorm, "mtp.{L}.norm.weight", "norm", "mtp", kMtp, kFloat, kBF16,
     [](Dims d) { return Shape{d.D}; }, +[](Mtp& m) { return ref(m.norm); }},
    {kMtpHcHeadFn, "mtp.{L}.hc_head_fn", "hc_head.fn", "mtp", kMtp, kFloat, kF32,
     [](Dims d) { return Shape{d.M, d.M * d.D}; },
     +[](Mtp& m) { return read_by_linear(m.hc_head.fn); }},
    {kMtpHcHeadBase, "mtp.{L}.hc_head_base", "hc_head.base", "mtp", kMtp, kFloat, kF32,
     [](Dims d) { return Shape{d.M}; }, +[](Mtp& m) { return ref(m.hc_head.base); }},
    {kMtpHcHeadScale, "mtp.{L}.hc_head_scale", "hc_head.scale", "mtp", kMtp, kFloat, kF32,
     [](Dims) { return Shape{1}; }, +[](Mtp& m) { return ref(m.hc_head.scale); }},
};
// clang-format on
static_assert(std::size(kSlots) == kNumParams);

// ---- The other conventions' names: rename rules over the official name ----
// Applied in order to every name of a slot (a gate/up stack's two), each replacing whole
// dot-separated segments. A slot whose name a rule marked `also_as_is` changes has two forms:
// the renamed name and the name before, exactly one of which a checkpoint may hold. A name that
// loses its {E} is a fused 3-D tensor: the whole slot in one piece.
struct RenameRule {
  std::string_view from;  // a leading '^' matches only at the start of the name
  std::string_view to;
  bool also_as_is = false;
};

// Both transformers conventions (5.17, checked against tests/golden/*/keys.txt): official inner
// names under `model.`, except the top-level renames (embed_tokens, hc_head.hc_*).
constexpr RenameRule kTransformersRenames[] = {
    {"^embed", "model.embed_tokens"},
    {"^norm", "model.norm"},
    {"^hc_head_fn", "model.hc_head.hc_fn"},
    {"^hc_head_base", "model.hc_head.hc_base"},
    {"^hc_head_scale", "model.hc_head.hc_scale"},
    {"^layers", "model.layers"},
};

// transformers save_pretrained: the reverse of its conversion rules, so `head.weight` stays
// outside `model.`, and the attention kv_norm, which its `.norm.` <-> `.kv_norm.` rule writes back
// as `attn.norm`.
constexpr RenameRule kPretrainedRenames[] = {
    {"attn.kv_norm", "attn.norm", true},
};

// transformers' in-memory module names (state_dict(), ModelOpt exports of the HF model).
constexpr RenameRule kStateDictRenames[] = {
    {"^head", "lm_head"},
    {"hc_attn_fn", "attn_hc.fn"},
    {"hc_attn_base", "attn_hc.base"},
    {"hc_attn_scale", "attn_hc.scale"},
    {"hc_ffn_fn", "ffn_hc.fn"},
    {"hc_ffn_base", "ffn_hc.base"},
    {"hc_ffn_scale", "ffn_hc.scale"},
    {"attn_norm", "input_layernorm"},
    {"ffn_norm", "post_attention_layernorm"},
    {"attn_sink", "sinks"},
    // A compressor's norm is its kv_norm (the attention's kv_norm keeps its name).
    {"compressor.norm", "compressor.kv_norm"},
    // transformers nests the indexer under the compressor and flattens its compressor onto it.
    {"indexer.compressor", "indexer"},
    {"indexer", "compressor.indexer"},
    // The old name stays: before transformers moved weights_proj into `scorer` (§5 item 23).
    {"weights_proj", "scorer.weights_proj", true},
    {"attn", "self_attn"},
    {"wq_a", "q_a_proj"},
    {"q_norm", "q_a_norm"},
    {"wq_b", "q_b_proj"},
    {"wkv", "kv_proj"},
    {"wgate", "gate_proj"},
    {"ape", "position_bias"},
    {"wo_a", "o_a_proj"},
    {"wo_b", "o_b_proj"},
    {"ffn", "mlp"},
    {"gate.bias", "gate.e_score_correction_bias"},
    {"w1", "gate_proj"},
    {"w3", "up_proj"},
    {"w2", "down_proj"},
    // Routed experts as fused 3-D parameters [E, 2F, D] (gate rows first) and [E, D, F], or the
    // per-expert "modern" names some exporters write instead (§3.2).
    {"experts.{E}.gate_proj.weight", "experts.gate_up_proj", true},
    {"experts.{E}.down_proj.weight", "experts.down_proj", true},
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

// Replaces every whole-segment occurrence of rule.from in `name`; nullopt when there is none.
std::optional<std::string> rename(std::string_view name, const RenameRule& rule) {
  const bool anchored = rule.from.starts_with('^');
  const std::string_view from = anchored ? rule.from.substr(1) : rule.from;
  std::string out;
  bool renamed = false;
  size_t i = 0;
  while (i < name.size()) {
    const bool at_segment = i == 0 || (name[i - 1] == '.' && !anchored);
    const size_t end = i + from.size();
    if (at_segment && name.substr(i, from.size()) == from &&
        (end == name.size() || name[end] == '.')) {
      out += rule.to;
      i = end;
      renamed = true;
    } else {
      out += name[i++];
    }
  }
  if (!renamed) return std::nullopt;
  return out;
}

// A slot's name (and a gate/up stack's up name) in one form.
struct FormNames {
  std::string name, up;
};

// Applies one rule to every form.
void apply(const RenameRule& rule, std::vector<FormNames>& forms) {
  std::vector<FormNames> renamed, as_is;
  for (const FormNames& form : forms) {
    std::optional<std::string> name = rename(form.name, rule), up = rename(form.up, rule);
    if (!name && !up) {
      renamed.push_back(form);
      continue;
    }
    renamed.push_back({name.value_or(form.name), up.value_or(form.up)});
    if (rule.also_as_is) as_is.push_back(form);
  }
  forms = std::move(renamed);
  forms.insert(forms.end(), as_is.begin(), as_is.end());
}

// The forms of a slot in `convention`, in the order a missing slot's message lists them.
std::vector<FormNames> convention_names(const SlotSpec& spec, NamingConvention convention) {
  std::vector<FormNames> forms = {{std::string(spec.name), std::string(spec.name_up)}};
  if (convention == C::kOfficial) return forms;
  for (const RenameRule& rule : kTransformersRenames) apply(rule, forms);
  const std::span<const RenameRule> own = convention == C::kPretrained
                                              ? std::span<const RenameRule>(kPretrainedRenames)
                                              : std::span<const RenameRule>(kStateDictRenames);
  for (const RenameRule& rule : own) apply(rule, forms);
  return forms;
}

// `layer` is the index {L} stands for (an MTP block's own index for its names).
SlotForm make_form(const FormNames& names, int64_t layer, int64_t n_experts, bool mtp) {
  const std::string pattern = mtp ? mtp_pattern(names.name) : names.name;
  const std::string pattern_up = mtp ? mtp_pattern(names.up) : names.up;
  SlotForm form;
  if (pattern.find("{E}") == std::string::npos) {
    form.stacking = Stacking::kWhole;
    form.pieces.push_back({expand(pattern, layer, -1), -1, 0});
  } else if (pattern_up.empty()) {
    form.stacking = Stacking::kPerExpert;
    for (int64_t e = 0; e < n_experts; ++e)
      form.pieces.push_back({expand(pattern, layer, e), e, 0});
  } else {
    form.stacking = Stacking::kPerExpertGateUp;
    for (int64_t e = 0; e < n_experts; ++e) {
      form.pieces.push_back({expand(pattern, layer, e), e, 0});
      form.pieces.push_back({expand(pattern_up, layer, e), e, 1});
    }
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

std::vector<const SlotSpec*> block_slots(const ModelConfig& config, int64_t layer) {
  std::vector<const SlotSpec*> slots;
  for (const SlotSpec& spec : kSlots) {
    if (slot_present(spec, config, layer)) slots.push_back(&spec);
  }
  return slots;
}

Shape slot_shape(Param param, const ModelConfig& config, int64_t layer) {
  return slot_spec(param).shape(slot_dims(config, layer));
}

WeightRef weight_ref(ModelWeights& weights, Param param, int64_t layer) {
  const WeightHome& home = slot_spec(param).home;
  if (home.of_model) {
    DSV4_CHECK(layer < 0, "%s is a global weight", std::string(slot_spec(param).path).c_str());
    return home.of_model(weights);
  }
  DSV4_CHECK(layer >= 0, "%s is a block's weight", std::string(slot_spec(param).path).c_str());
  if (home.of_block) return home.of_block(weights.block(layer));
  DSV4_CHECK(layer >= weights.config.n_layer, "%s is an MTP block's weight",
             std::string(slot_spec(param).path).c_str());
  return home.of_mtp(weights.mtp[static_cast<size_t>(layer - weights.config.n_layer)]);
}

void make_blocks(ModelWeights& weights, size_t n_mtp_blocks) {
  weights.layers.resize(static_cast<size_t>(weights.config.n_layer));
  weights.mtp.resize(n_mtp_blocks);
  const auto n_blocks = weights.config.n_layer + static_cast<int64_t>(n_mtp_blocks);
  for (int64_t l = 0; l < n_blocks; ++l) {
    const AttentionType type = weights.config.schedule(l).attention;
    AttentionWeights& attn = weights.block(l).attn;
    if (type != AttentionType::kSliding && !attn.compressor) attn.compressor.emplace();
    if (type == AttentionType::kCompressedSparse && !attn.indexer) attn.indexer.emplace();
  }
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

ExpectedKeys expected_keys(const ModelConfig& config, NamingConvention convention, bool with_mtp) {
  ExpectedKeys keys;
  keys.convention = convention;
  const int64_t n_blocks = config.n_layer + (with_mtp ? config.n_mtp_layers : 0);
  for (int64_t layer = -1; layer < n_blocks; ++layer) {
    const bool mtp = layer >= config.n_layer;
    const C convention_of_block = mtp ? C::kOfficial : convention;
    for (const SlotSpec* spec : block_slots(config, layer)) {
      ExpectedSlot slot{spec->param, layer, {}};
      for (const FormNames& names : convention_names(*spec, convention_of_block)) {
        slot.forms.push_back(
            make_form(names, mtp ? layer - config.n_layer : layer, config.n_routed_experts, mtp));
      }
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
