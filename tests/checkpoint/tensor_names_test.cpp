// The name table, rule by rule: every slot's name in every convention, written out here from
// ../shared/docs/deepseek_v4.md §3.1-§3.2 and the golden keys.txt files (not derived from the
// table under test), and every known collision between names that share pieces.
#include "checkpoint/tensor_names.h"

#include <gtest/gtest.h>

#include <set>

#include "checkpoint/tiny_model.h"

namespace dsv4::checkpoint {
namespace {

using enum Param;

struct Rule {
  Param param;
  int64_t layer;  // tiny config: 0 sliding + hash, 1 CSA, 2 HCA
  const char* official;
  const char* pretrained;
  const char* state_dict;
};

// Expert pieces use expert 3; the fused state_dict name is checked separately.
constexpr Rule kRules[] = {
    {kEmbed, -1, "embed.weight", "model.embed_tokens.weight", "model.embed_tokens.weight"},
    {kHead, -1, "head.weight", "head.weight", "lm_head.weight"},
    {kNorm, -1, "norm.weight", "model.norm.weight", "model.norm.weight"},
    {kHcHeadFn, -1, "hc_head_fn", "model.hc_head.hc_fn", "model.hc_head.hc_fn"},
    {kHcHeadBase, -1, "hc_head_base", "model.hc_head.hc_base", "model.hc_head.hc_base"},
    {kHcHeadScale, -1, "hc_head_scale", "model.hc_head.hc_scale", "model.hc_head.hc_scale"},
    {kHcAttnFn, 0, "layers.0.hc_attn_fn", "model.layers.0.hc_attn_fn", "model.layers.0.attn_hc.fn"},
    {kHcAttnBase, 0, "layers.0.hc_attn_base", "model.layers.0.hc_attn_base",
     "model.layers.0.attn_hc.base"},
    {kHcAttnScale, 0, "layers.0.hc_attn_scale", "model.layers.0.hc_attn_scale",
     "model.layers.0.attn_hc.scale"},
    {kHcFfnFn, 0, "layers.0.hc_ffn_fn", "model.layers.0.hc_ffn_fn", "model.layers.0.ffn_hc.fn"},
    {kHcFfnBase, 0, "layers.0.hc_ffn_base", "model.layers.0.hc_ffn_base",
     "model.layers.0.ffn_hc.base"},
    {kHcFfnScale, 0, "layers.0.hc_ffn_scale", "model.layers.0.hc_ffn_scale",
     "model.layers.0.ffn_hc.scale"},
    {kAttnNorm, 0, "layers.0.attn_norm.weight", "model.layers.0.attn_norm.weight",
     "model.layers.0.input_layernorm.weight"},
    {kFfnNorm, 0, "layers.0.ffn_norm.weight", "model.layers.0.ffn_norm.weight",
     "model.layers.0.post_attention_layernorm.weight"},
    {kAttnSink, 0, "layers.0.attn.attn_sink", "model.layers.0.attn.attn_sink",
     "model.layers.0.self_attn.sinks"},
    {kWqA, 0, "layers.0.attn.wq_a.weight", "model.layers.0.attn.wq_a.weight",
     "model.layers.0.self_attn.q_a_proj.weight"},
    {kQNorm, 0, "layers.0.attn.q_norm.weight", "model.layers.0.attn.q_norm.weight",
     "model.layers.0.self_attn.q_a_norm.weight"},
    {kWqB, 0, "layers.0.attn.wq_b.weight", "model.layers.0.attn.wq_b.weight",
     "model.layers.0.self_attn.q_b_proj.weight"},
    {kWkv, 0, "layers.0.attn.wkv.weight", "model.layers.0.attn.wkv.weight",
     "model.layers.0.self_attn.kv_proj.weight"},
    {kKvNorm, 0, "layers.0.attn.kv_norm.weight", "model.layers.0.attn.norm.weight",
     "model.layers.0.self_attn.kv_norm.weight"},
    {kWoA, 0, "layers.0.attn.wo_a.weight", "model.layers.0.attn.wo_a.weight",
     "model.layers.0.self_attn.o_a_proj.weight"},
    {kWoB, 0, "layers.0.attn.wo_b.weight", "model.layers.0.attn.wo_b.weight",
     "model.layers.0.self_attn.o_b_proj.weight"},
    {kCompressorWkv, 2, "layers.2.attn.compressor.wkv.weight",
     "model.layers.2.attn.compressor.wkv.weight",
     "model.layers.2.self_attn.compressor.kv_proj.weight"},
    {kCompressorWgate, 2, "layers.2.attn.compressor.wgate.weight",
     "model.layers.2.attn.compressor.wgate.weight",
     "model.layers.2.self_attn.compressor.gate_proj.weight"},
    {kCompressorApe, 2, "layers.2.attn.compressor.ape", "model.layers.2.attn.compressor.ape",
     "model.layers.2.self_attn.compressor.position_bias"},
    {kCompressorNorm, 2, "layers.2.attn.compressor.norm.weight",
     "model.layers.2.attn.compressor.norm.weight",
     "model.layers.2.self_attn.compressor.kv_norm.weight"},
    {kIndexerWqB, 1, "layers.1.attn.indexer.wq_b.weight", "model.layers.1.attn.indexer.wq_b.weight",
     "model.layers.1.self_attn.compressor.indexer.q_b_proj.weight"},
    {kIndexerWeightsProj, 1, "layers.1.attn.indexer.weights_proj.weight",
     "model.layers.1.attn.indexer.weights_proj.weight",
     "model.layers.1.self_attn.compressor.indexer.scorer.weights_proj.weight"},
    {kIndexerCompressorWkv, 1, "layers.1.attn.indexer.compressor.wkv.weight",
     "model.layers.1.attn.indexer.compressor.wkv.weight",
     "model.layers.1.self_attn.compressor.indexer.kv_proj.weight"},
    {kIndexerCompressorWgate, 1, "layers.1.attn.indexer.compressor.wgate.weight",
     "model.layers.1.attn.indexer.compressor.wgate.weight",
     "model.layers.1.self_attn.compressor.indexer.gate_proj.weight"},
    {kIndexerCompressorApe, 1, "layers.1.attn.indexer.compressor.ape",
     "model.layers.1.attn.indexer.compressor.ape",
     "model.layers.1.self_attn.compressor.indexer.position_bias"},
    {kIndexerCompressorNorm, 1, "layers.1.attn.indexer.compressor.norm.weight",
     "model.layers.1.attn.indexer.compressor.norm.weight",
     "model.layers.1.self_attn.compressor.indexer.kv_norm.weight"},
    {kGate, 0, "layers.0.ffn.gate.weight", "model.layers.0.ffn.gate.weight",
     "model.layers.0.mlp.gate.weight"},
    {kGateBias, 1, "layers.1.ffn.gate.bias", "model.layers.1.ffn.gate.bias",
     "model.layers.1.mlp.gate.e_score_correction_bias"},
    {kGateTid2eid, 0, "layers.0.ffn.gate.tid2eid", "model.layers.0.ffn.gate.tid2eid",
     "model.layers.0.mlp.gate.tid2eid"},
    {kSharedW1, 0, "layers.0.ffn.shared_experts.w1.weight",
     "model.layers.0.ffn.shared_experts.w1.weight",
     "model.layers.0.mlp.shared_experts.gate_proj.weight"},
    {kSharedW3, 0, "layers.0.ffn.shared_experts.w3.weight",
     "model.layers.0.ffn.shared_experts.w3.weight",
     "model.layers.0.mlp.shared_experts.up_proj.weight"},
    {kSharedW2, 0, "layers.0.ffn.shared_experts.w2.weight",
     "model.layers.0.ffn.shared_experts.w2.weight",
     "model.layers.0.mlp.shared_experts.down_proj.weight"},
    {kExpertsW13, 0, "layers.0.ffn.experts.3.w1.weight", "model.layers.0.ffn.experts.3.w1.weight",
     "model.layers.0.mlp.experts.3.gate_proj.weight"},
    {kExpertsW2, 0, "layers.0.ffn.experts.3.w2.weight", "model.layers.0.ffn.experts.3.w2.weight",
     "model.layers.0.mlp.experts.3.down_proj.weight"},
    // The MTP block (layer 3 of the tiny config): official names in every convention.
    {kMtpEProj, 3, "mtp.0.e_proj.weight", "mtp.0.e_proj.weight", "mtp.0.e_proj.weight"},
    {kMtpHProj, 3, "mtp.0.h_proj.weight", "mtp.0.h_proj.weight", "mtp.0.h_proj.weight"},
    {kMtpEnorm, 3, "mtp.0.enorm.weight", "mtp.0.enorm.weight", "mtp.0.enorm.weight"},
    {kMtpHnorm, 3, "mtp.0.hnorm.weight", "mtp.0.hnorm.weight", "mtp.0.hnorm.weight"},
    {kMtpNorm, 3, "mtp.0.norm.weight", "mtp.0.norm.weight", "mtp.0.norm.weight"},
    {kMtpHcHeadFn, 3, "mtp.0.hc_head_fn", "mtp.0.hc_head_fn", "mtp.0.hc_head_fn"},
    {kMtpHcHeadBase, 3, "mtp.0.hc_head_base", "mtp.0.hc_head_base", "mtp.0.hc_head_base"},
    {kMtpHcHeadScale, 3, "mtp.0.hc_head_scale", "mtp.0.hc_head_scale", "mtp.0.hc_head_scale"},
    {kKvNorm, 3, "mtp.0.attn.kv_norm.weight", "mtp.0.attn.kv_norm.weight",
     "mtp.0.attn.kv_norm.weight"},
};

struct Where {
  Param param;
  int64_t layer;
  int64_t expert_idx;
  int half;
};

class NameTableTest : public ::testing::Test {
 protected:
  // Where `name` lands in `convention`; fails the test when nowhere.
  std::optional<Where> where(NamingConvention convention, const std::string& name) {
    const ExpectedKeys& keys = keys_[static_cast<int>(convention)];
    const auto it = keys.by_name.find(name);
    if (it == keys.by_name.end()) return std::nullopt;
    const ExpectedSlot& slot = keys.slots[it->second.slot_idx];
    const PieceName& piece = slot.forms[it->second.form_idx].pieces[it->second.piece_idx];
    return Where{slot.param, slot.layer, piece.expert_idx, piece.half};
  }
  Param param_of(NamingConvention convention, const std::string& name) {
    const std::optional<Where> w = where(convention, name);
    EXPECT_TRUE(w.has_value()) << name << " is not a name of " << convention_name(convention);
    return w ? w->param : kEmbed;
  }

  ModelConfig config_ = testing::tiny_config();
  ExpectedKeys keys_[3] = {expected_keys(config_, NamingConvention::kOfficial, true),
                           expected_keys(config_, NamingConvention::kPretrained, true),
                           expected_keys(config_, NamingConvention::kStateDict, true)};
};

TEST_F(NameTableTest, EverySlotInEveryConventionHasItsName) {
  std::set<Param> covered;
  for (const Rule& rule : kRules) {
    covered.insert(rule.param);
    const char* names[] = {rule.official, rule.pretrained, rule.state_dict};
    for (NamingConvention convention : kAllConventions) {
      const std::string name = names[static_cast<int>(convention)];
      SCOPED_TRACE(std::string(convention_name(convention)) + " " + name);
      const std::optional<Where> w = where(convention, name);
      ASSERT_TRUE(w.has_value());
      EXPECT_EQ(w->param, rule.param);
      EXPECT_EQ(w->layer, rule.layer);
      if (slot_spec(rule.param).storage == Storage::kExperts) {
        EXPECT_EQ(w->expert_idx, 3);
      }
    }
  }
  EXPECT_EQ(covered.size(), static_cast<size_t>(kNumParams));
}

TEST_F(NameTableTest, GateAndUpOfOneExpertStackIntoW13GateFirst) {
  for (auto [convention, gate, up] :
       {std::tuple{NamingConvention::kOfficial, "layers.2.ffn.experts.1.w1.weight",
                   "layers.2.ffn.experts.1.w3.weight"},
        std::tuple{NamingConvention::kPretrained, "model.layers.2.ffn.experts.1.w1.weight",
                   "model.layers.2.ffn.experts.1.w3.weight"},
        std::tuple{NamingConvention::kStateDict, "model.layers.2.mlp.experts.1.gate_proj.weight",
                   "model.layers.2.mlp.experts.1.up_proj.weight"}}) {
    const std::optional<Where> g = where(convention, gate), u = where(convention, up);
    ASSERT_TRUE(g && u) << gate;
    EXPECT_EQ(g->param, kExpertsW13);
    EXPECT_EQ(u->param, kExpertsW13);
    EXPECT_EQ(g->expert_idx, 1);
    EXPECT_EQ(g->half, 0);
    EXPECT_EQ(u->half, 1);
  }
}

TEST_F(NameTableTest, FusedStateDictExpertsAreWholeSlots) {
  const std::optional<Where> w13 =
      where(NamingConvention::kStateDict, "model.layers.1.mlp.experts.gate_up_proj");
  const std::optional<Where> w2 =
      where(NamingConvention::kStateDict, "model.layers.1.mlp.experts.down_proj");
  ASSERT_TRUE(w13 && w2);
  EXPECT_EQ(w13->param, kExpertsW13);
  EXPECT_EQ(w13->expert_idx, -1);
  EXPECT_EQ(w2->param, kExpertsW2);
  EXPECT_EQ(slot_shape(kExpertsW13, config_, 1), (Shape{4, 64, 64}));  // [E, 2F, D]
  EXPECT_EQ(slot_shape(kExpertsW2, config_, 1), (Shape{4, 64, 32}));   // [E, D, F]
}

// ---- Known collisions: names that share pieces land in different slots ----

TEST_F(NameTableTest, SharedExpertsAreNotRoutedExperts) {
  EXPECT_EQ(param_of(NamingConvention::kOfficial, "layers.1.ffn.shared_experts.w1.weight"),
            kSharedW1);
  EXPECT_EQ(param_of(NamingConvention::kOfficial, "layers.1.ffn.experts.0.w1.weight"), kExpertsW13);
  EXPECT_EQ(
      param_of(NamingConvention::kStateDict, "model.layers.1.mlp.shared_experts.gate_proj.weight"),
      kSharedW1);
  EXPECT_EQ(param_of(NamingConvention::kStateDict, "model.layers.1.mlp.experts.0.gate_proj.weight"),
            kExpertsW13);
  // No double prefix: the shared expert has exactly one name per convention.
  EXPECT_FALSE(
      where(NamingConvention::kStateDict, "model.layers.1.mlp.ffn.shared_experts.w1.weight"));
}

TEST_F(NameTableTest, AttentionWkvCompressorWkvAndIndexerCompressorWkvAreThreeSlots) {
  for (NamingConvention c : {NamingConvention::kOfficial, NamingConvention::kPretrained}) {
    const std::string p = c == NamingConvention::kOfficial ? "layers.1." : "model.layers.1.";
    EXPECT_EQ(param_of(c, p + "attn.wkv.weight"), kWkv);
    EXPECT_EQ(param_of(c, p + "attn.compressor.wkv.weight"), kCompressorWkv);
    EXPECT_EQ(param_of(c, p + "attn.indexer.compressor.wkv.weight"), kIndexerCompressorWkv);
  }
  const NamingConvention s = NamingConvention::kStateDict;
  EXPECT_EQ(param_of(s, "model.layers.1.self_attn.kv_proj.weight"), kWkv);
  EXPECT_EQ(param_of(s, "model.layers.1.self_attn.compressor.kv_proj.weight"), kCompressorWkv);
  EXPECT_EQ(param_of(s, "model.layers.1.self_attn.compressor.indexer.kv_proj.weight"),
            kIndexerCompressorWkv);
}

TEST_F(NameTableTest, CompressorAndIndexerDoNotShadowEachOther) {
  const NamingConvention s = NamingConvention::kStateDict;
  EXPECT_EQ(param_of(s, "model.layers.1.self_attn.compressor.position_bias"), kCompressorApe);
  EXPECT_EQ(param_of(s, "model.layers.1.self_attn.compressor.indexer.position_bias"),
            kIndexerCompressorApe);
  EXPECT_EQ(param_of(s, "model.layers.1.self_attn.compressor.kv_norm.weight"), kCompressorNorm);
  EXPECT_EQ(param_of(s, "model.layers.1.self_attn.compressor.indexer.kv_norm.weight"),
            kIndexerCompressorNorm);
  EXPECT_EQ(param_of(NamingConvention::kOfficial, "layers.1.attn.compressor.ape"), kCompressorApe);
  EXPECT_EQ(param_of(NamingConvention::kOfficial, "layers.1.attn.indexer.compressor.ape"),
            kIndexerCompressorApe);
  // The attention kv_norm vs the compressor norms (pretrained writes it as attn.norm).
  EXPECT_EQ(param_of(NamingConvention::kPretrained, "model.layers.1.attn.norm.weight"), kKvNorm);
  EXPECT_EQ(param_of(NamingConvention::kPretrained, "model.layers.1.attn.compressor.norm.weight"),
            kCompressorNorm);
}

TEST_F(NameTableTest, GateIsNotGateUpNorAnyGateProj) {
  const NamingConvention s = NamingConvention::kStateDict;
  EXPECT_EQ(param_of(s, "model.layers.1.mlp.gate.weight"), kGate);
  EXPECT_EQ(param_of(s, "model.layers.1.mlp.experts.gate_up_proj"), kExpertsW13);
  EXPECT_EQ(param_of(s, "model.layers.1.mlp.shared_experts.gate_proj.weight"), kSharedW1);
  EXPECT_EQ(param_of(s, "model.layers.1.self_attn.compressor.gate_proj.weight"), kCompressorWgate);
  EXPECT_EQ(param_of(s, "model.layers.1.self_attn.compressor.indexer.gate_proj.weight"),
            kIndexerCompressorWgate);
}

TEST_F(NameTableTest, LmHeadLivesAtTheTopLevel) {
  EXPECT_EQ(param_of(NamingConvention::kStateDict, "lm_head.weight"), kHead);
  EXPECT_FALSE(where(NamingConvention::kStateDict, "model.lm_head.weight"));
  EXPECT_EQ(param_of(NamingConvention::kPretrained, "head.weight"), kHead);
  EXPECT_FALSE(where(NamingConvention::kPretrained, "model.head.weight"));
}

TEST_F(NameTableTest, IndexerWeightsProjOldAndScorerNamesAreOneSlot) {
  const NamingConvention s = NamingConvention::kStateDict;
  EXPECT_EQ(param_of(s, "model.layers.1.self_attn.compressor.indexer.scorer.weights_proj.weight"),
            kIndexerWeightsProj);
  EXPECT_EQ(param_of(s, "model.layers.1.self_attn.compressor.indexer.weights_proj.weight"),
            kIndexerWeightsProj);
}

TEST_F(NameTableTest, HyperConnectionSpellingsDoNotMix) {
  EXPECT_FALSE(where(NamingConvention::kStateDict, "model.layers.0.hc_attn_base"));
  EXPECT_FALSE(where(NamingConvention::kPretrained, "model.layers.0.attn_hc.base"));
  EXPECT_FALSE(where(NamingConvention::kStateDict, "model.hc_head_base"));
  EXPECT_FALSE(where(NamingConvention::kStateDict, "model.layers.0.hc_attn.base"));
}

TEST_F(NameTableTest, SlotsExistOnlyOnTheirLayers) {
  EXPECT_FALSE(
      where(NamingConvention::kOfficial, "layers.0.attn.compressor.wkv.weight"));         // sliding
  EXPECT_FALSE(where(NamingConvention::kOfficial, "layers.2.attn.indexer.wq_b.weight"));  // HCA
  EXPECT_FALSE(where(NamingConvention::kOfficial, "layers.0.ffn.gate.bias"));             // hash
  EXPECT_FALSE(where(NamingConvention::kOfficial, "layers.1.ffn.gate.tid2eid"));          // score
  EXPECT_FALSE(where(NamingConvention::kOfficial, "layers.0.ffn.experts.4.w1.weight"));   // E = 4
  EXPECT_FALSE(where(NamingConvention::kOfficial, "layers.3.attn_norm.weight"));          // L = 3
}

TEST(SiblingTest, ScaleSuffixesPointAtTheirWeight) {
  auto only = [](std::string_view key) {
    const std::vector<SiblingMatch> m = sibling_candidates(key);
    EXPECT_EQ(m.size(), 1u) << key;
    return m.empty() ? SiblingMatch{} : m[0];
  };
  EXPECT_EQ(only("layers.0.attn.wq_a.scale").weight_name, "layers.0.attn.wq_a.weight");
  EXPECT_EQ(only("layers.0.ffn.experts.1.w1.weight_scale").role, SiblingRole::kBlockScale);
  EXPECT_EQ(only("layers.0.ffn.experts.1.w1.weight_scale_2").role, SiblingRole::kGlobalScale);
  EXPECT_EQ(only("layers.0.ffn.experts.1.w1.input_scale").role, SiblingRole::kInputScale);
  EXPECT_EQ(only("x.q_a_proj.weight_scale_inv").weight_name, "x.q_a_proj.weight");
  const SiblingMatch fused = only("model.layers.0.mlp.experts.gate_up_proj_weight_scale_2");
  EXPECT_EQ(fused.weight_name, "model.layers.0.mlp.experts.gate_up_proj");
  EXPECT_EQ(fused.role, SiblingRole::kGlobalScale);
  EXPECT_TRUE(sibling_candidates("layers.0.hc_attn_scale").empty());
}

// `mtp.N.*` is bound (expected_keys with_mtp); MTP blocks under other names are ignored.
TEST(IgnoreTest, MtpBlocksUnderOtherNamesAreIgnoredWithAReasonAndNothingElseIs) {
  const ModelConfig config = testing::tiny_config();  // 3 layers + 1 MTP
  for (const char* key :
       {"model.mtp.0.enorm.weight", "layers.3.attn.wq_a.weight", "model.layers.3.self_attn.sinks"}) {
    const std::optional<std::string> reason = ignore_reason(key, config);
    ASSERT_TRUE(reason.has_value()) << key;
    EXPECT_TRUE(reason->starts_with("MTP draft block")) << *reason;
  }
  for (const char* key : {"mtp.0.e_proj.weight", "layers.4.attn.wq_a.weight",
                          "layers.2.attn.wq_a.weight", "xmtp.0.w", "layers.3x.attn",
                          "model.layers.-1.a", "model.rotary_emb.inv_freq"}) {
    EXPECT_FALSE(ignore_reason(key, config).has_value()) << key;
  }
}

TEST(IgnoreTest, MtpTensorsOfAConfigWithoutMtpLayersAreIgnored) {
  std::string json = testing::kTinyConfigJson;
  const std::string from = "\"num_nextn_predict_layers\": 1";
  json.replace(json.find(from), from.size(), "\"num_nextn_predict_layers\": 0");
  const ModelConfig config = testing::parsed_config(json, "tiny, no MTP");
  const std::optional<std::string> reason = ignore_reason("mtp.0.e_proj.weight", config);
  ASSERT_TRUE(reason.has_value());
  EXPECT_EQ(*reason, "MTP draft block: the config has num_nextn_predict_layers 0");
}

TEST(ExpectedKeysTest, MtpNamesAreTheOfficialOnesInEveryConvention) {
  const ModelConfig config = testing::tiny_config();
  for (NamingConvention c : kAllConventions) {
    const ExpectedKeys without = expected_keys(config, c);
    const ExpectedKeys with = expected_keys(config, c, true);
    EXPECT_EQ(without.by_name.count("mtp.0.e_proj.weight"), 0u);
    for (const char* key : {"mtp.0.e_proj.weight", "mtp.0.hnorm.weight", "mtp.0.hc_head_scale",
                            "mtp.0.attn.wkv.weight", "mtp.0.ffn.gate.bias",
                            "mtp.0.ffn.experts.3.w3.weight", "mtp.0.hc_ffn_fn"}) {
      ASSERT_EQ(with.by_name.count(key), 1u) << key << " in " << convention_name(c);
      EXPECT_EQ(with.slots[with.by_name.at(key).slot_idx].layer, config.n_layer) << key;
    }
    // The MTP block is sliding and score-routed: no compressor, no tid2eid.
    EXPECT_EQ(with.by_name.count("mtp.0.attn.compressor.ape"), 0u);
    EXPECT_EQ(with.by_name.count("mtp.0.ffn.gate.tid2eid"), 0u);
  }
}

// Every row's accessor reaches a field of its own, of the type its storage says: the loader and
// the device copy trust the table for both.
TEST(WeightTableTest, EverySlotReachesItsOwnFieldOfItsType) {
  ModelWeights weights;
  weights.config = testing::tiny_config();
  make_blocks(weights, static_cast<size_t>(weights.config.n_mtp_layers));
  std::set<const Tensor*> fields;
  size_t n_slots = 0;
  for (int64_t layer = -1; layer < weights.config.n_layer + weights.config.n_mtp_layers; ++layer) {
    for (const SlotSpec* spec : block_slots(weights.config, layer)) {
      SCOPED_TRACE(slot_label(spec->param, layer));
      const WeightRef field = weight_ref(weights, spec->param, layer);
      ++n_slots;
      EXPECT_TRUE(fields.insert(field.values).second);
      EXPECT_EQ(field.linear != nullptr, spec->storage == Storage::kLinear);
      if (field.linear) {
        EXPECT_EQ(static_cast<Tensor*>(field.linear), field.values);
      }
      EXPECT_EQ(field.nvfp4 != nullptr, spec->storage == Storage::kExperts);
      EXPECT_EQ(field.static_input_scale != nullptr, spec->storage == Storage::kExperts);
      EXPECT_FALSE(field.read_by_linear && field.linear);
    }
  }
  EXPECT_EQ(fields.size(), n_slots);
  EXPECT_GT(n_slots, static_cast<size_t>(kNumParams));  // every scope, MTP block included
}

TEST(ConventionTest, NamesRoundTrip) {
  for (NamingConvention c : kAllConventions) EXPECT_EQ(parse_convention(convention_name(c)), c);
  EXPECT_FALSE(parse_convention("hf"));
}

}  // namespace
}  // namespace dsv4::checkpoint
