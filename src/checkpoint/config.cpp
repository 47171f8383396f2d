// config.json -> ModelConfig. Both styles resolve to the same struct:
//   transformers (DeepseekV4Config, transformers 5.x): layer_types, compress_rates,
//     mlp_layer_types, rope_parameters {main, compress} or flat, partial_rotary_factor;
//   official / legacy: compress_ratios (one entry per layer plus the MTP layers),
//     num_hash_layers, rope_scaling, compress_rope_theta, qk_rope_head_dim.
// An absent key takes DeepseekV4Config's default (configuration_deepseek_v4.py), so a config
// means the same here as in transformers. A key whose value transformers would silently bend
// (a non-integral rope dim, a list shorter than the layers) is an error here instead.
#include "checkpoint/config.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>

#include "format/json.h"

namespace dsv4::checkpoint {
namespace {

using format::Json;

// More layers than any V4 model has by an order of magnitude; also bounds what a corrupt count
// can make us allocate.
constexpr int64_t kMaxLayers = 1024;
constexpr int64_t kMaxCompressRatio = int64_t{1} << 16;

constexpr const char* kSliding = "sliding_attention";
constexpr const char* kCsa = "compressed_sparse_attention";
constexpr const char* kHca = "heavily_compressed_attention";

// Reads typed fields of one JSON object. The first error is kept and later reads are no-ops in
// effect (they return the fallback), so a parser reads straight through and checks once.
class FieldReader {
 public:
  FieldReader(const Json& json, std::string prefix) : json_(json), prefix_(std::move(prefix)) {}

  bool has(const char* key) const { return get(key) != nullptr; }
  const Status& status() const { return status_; }
  void fail(Status status) {
    if (status_.ok()) status_ = std::move(status);
  }
  std::string name(const std::string& key) const { return prefix_ + key; }

  int64_t integer(const char* key, int64_t fallback) {
    const Json* v = checked(key, "an integer", [](const Json& j) {
      return j.is_number_integer() && !(j.is_number_unsigned() && j.get<uint64_t>() > INT64_MAX);
    });
    return v ? v->get<int64_t>() : fallback;
  }
  double number(const char* key, double fallback) {
    const Json* v = checked(key, "a number", [](const Json& j) { return j.is_number(); });
    return v ? v->get<double>() : fallback;
  }
  bool boolean(const char* key, bool fallback) {
    const Json* v = checked(key, "true or false", [](const Json& j) { return j.is_boolean(); });
    return v ? v->get<bool>() : fallback;
  }
  std::string text(const char* key, const std::string& fallback) {
    const Json* v = checked(key, "a string", [](const Json& j) { return j.is_string(); });
    return v ? v->get<std::string>() : fallback;
  }
  // nullptr when absent (or null) or, after recording an error, not of the asked kind.
  const Json* object(const char* key) {
    return checked(key, "an object", [](const Json& j) { return j.is_object(); });
  }
  const Json* array(const char* key) {
    return checked(key, "a list", [](const Json& j) { return j.is_array(); });
  }

 private:
  const Json* get(const char* key) const {
    const auto it = json_.find(key);
    return it == json_.end() || it->is_null() ? nullptr : &*it;
  }
  // The value of `key` when present and `is` it; nullptr when absent, or after recording that it
  // must be `what`.
  template <typename Is>
  const Json* checked(const char* key, const char* what, Is is) {
    const Json* v = get(key);
    if (v == nullptr || is(*v)) return v;
    fail(invalid_argument(name(key) + " must be " + what + ", got " + v->dump()));
    return nullptr;
  }

  const Json& json_;
  std::string prefix_;
  Status status_;
};

// The value must be `expected`; anything else is a variant this engine does not run.
void require_text(FieldReader& r, const char* key, const std::string& fallback,
                  const std::string& expected) {
  const std::string value = r.text(key, fallback);
  if (r.status().ok() && value != expected) {
    r.fail(
        unimplemented(r.name(key) + " '" + value + "' is not supported (only '" + expected + "')"));
  }
}

void read_dimensions(FieldReader& r, ModelConfig& c) {
  c.vocab_size = r.integer("vocab_size", 129280);
  c.hidden_size = r.integer("hidden_size", 4096);
  c.n_layer = r.integer("num_hidden_layers", 43);
  c.n_head = r.integer("num_attention_heads", 64);
  c.head_dim = r.integer("head_dim", 512);
  c.q_lora_rank = r.integer("q_lora_rank", 1024);
  c.o_groups = r.integer("o_groups", 8);
  c.o_lora_rank = r.integer("o_lora_rank", 1024);
  c.sliding_window = r.integer("sliding_window", 128);
  c.max_position_embeddings = r.integer("max_position_embeddings", 1048576);
  c.index_n_heads = r.integer("index_n_heads", 64);
  c.index_head_dim = r.integer("index_head_dim", 128);
  c.index_topk = r.integer("index_topk", 512);
  c.hc_mult = r.integer("hc_mult", 4);
  c.hc_sinkhorn_iters = r.integer("hc_sinkhorn_iters", 20);
  c.hc_eps = r.number("hc_eps", 1e-6);
  c.rms_norm_eps = r.number("rms_norm_eps", 1e-6);
  c.bos_token_id = r.integer("bos_token_id", 0);
  c.eos_token_id = r.integer("eos_token_id", 1);
  c.tie_word_embeddings = r.boolean("tie_word_embeddings", false);
  c.n_mtp_layers = r.integer("num_nextn_predict_layers", 1);
  const int64_t n_kv_heads = r.integer("num_key_value_heads", 1);
  if (r.status().ok() && n_kv_heads != 1) {
    r.fail(unimplemented("num_key_value_heads (" + std::to_string(n_kv_heads) +
                         ") is not supported (V4 has one shared K=V head)"));
  }
}

void read_moe(FieldReader& r, ModelConfig& c) {
  c.n_routed_experts = r.integer("n_routed_experts", 256);
  c.n_shared_experts = r.integer("n_shared_experts", 1);
  c.n_expert_used = r.integer("num_experts_per_tok", 6);
  c.moe_intermediate_size = r.integer("moe_intermediate_size", 2048);
  c.routed_scaling_factor = r.number("routed_scaling_factor", 1.5);
  c.swiglu_limit = r.number("swiglu_limit", 10.0);
  c.norm_topk_prob = r.boolean("norm_topk_prob", true);
  require_text(r, "scoring_func", "sqrtsoftplus", "sqrtsoftplus");
  require_text(r, "topk_method", "noaux_tc", "noaux_tc");
  require_text(r, "hidden_act", "silu", "silu");
  require_text(r, "model_type", "deepseek_v4", "deepseek_v4");
  for (const char* key : {"attention_bias", "mlp_bias"}) {
    if (r.boolean(key, false)) r.fail(unimplemented(std::string(key) + " true is not supported"));
  }
}

// partial_rotary_factor (transformers) and qk_rope_head_dim (official) say the same thing; when
// both are given they must agree. transformers truncates head_dim * factor; a product that is
// not whole is refused here rather than truncated.
void read_rope_head_dim(FieldReader& r, ModelConfig& c) {
  const bool has_factor = r.has("partial_rotary_factor");
  const double factor = r.number("partial_rotary_factor", 64.0 / 512.0);
  const double product = static_cast<double>(c.head_dim) * factor;
  const int64_t from_factor = std::llround(product);
  if (std::abs(product - static_cast<double>(from_factor)) > 1e-6) {
    r.fail(invalid_argument("partial_rotary_factor (" + std::to_string(factor) +
                            ") times head_dim (" + std::to_string(c.head_dim) +
                            ") is not a whole number of dims"));
  }
  c.rope_head_dim = r.integer("qk_rope_head_dim", from_factor);
  if (has_factor && r.status().ok() && c.rope_head_dim != from_factor) {
    r.fail(invalid_argument("qk_rope_head_dim (" + std::to_string(c.rope_head_dim) +
                            ") disagrees with partial_rotary_factor x head_dim (" +
                            std::to_string(from_factor) + ")"));
  }
}

// One rope parameter set ("rope_type" default or yarn). `theta` is its base when the set does
// not carry rope_theta; `force_theta` overrides it (the flat style's compress rope, whose base is
// always compress_rope_theta).
RopeConfig read_rope(FieldReader& r, const Json& json, const std::string& field, double theta,
                     bool force_theta, const ModelConfig& c) {
  FieldReader p(json, field + ".");
  static const char* kKnown[] = {
      "rope_type", "type",      "rope_theta",       "factor",   "original_max_position_embeddings",
      "beta_fast", "beta_slow", "attention_factor", "truncate", "partial_rotary_factor"};
  for (const auto& item : json.items()) {
    const std::string& key = item.key();  // a plain name: clang 14 cannot capture a binding
    if (std::find_if(std::begin(kKnown), std::end(kKnown),
                     [&](const char* k) { return key == k; }) == std::end(kKnown)) {
      p.fail(unimplemented(field + "." + key + " is not supported"));
    }
  }
  RopeConfig rope;
  const std::string type = p.text("rope_type", p.text("type", "default"));
  if (type != "default" && type != "yarn") {
    p.fail(unimplemented(field + ".rope_type '" + type + "' is not supported (default, yarn)"));
  }
  rope.theta = force_theta ? theta : p.number("rope_theta", theta);
  rope.yarn = type == "yarn";
  if (rope.yarn) {
    rope.factor = p.number("factor", 1.0);
    rope.original_max_position =
        p.integer("original_max_position_embeddings", c.max_position_embeddings);
    rope.beta_fast = p.number("beta_fast", 32.0);
    rope.beta_slow = p.number("beta_slow", 1.0);
  }
  // The reference never scales cos/sin by YaRN's mscale; transformers pins attention_factor to 1
  // only for the flat style. A nested yarn set without the key would make transformers derive
  // 0.1·ln(factor) + 1 (≈ 1.277 at factor 16), which no V4 checkpoint was trained with: refuse
  // it rather than silently compute something else than transformers.
  if (rope.yarn && !force_theta && !json.contains("attention_factor")) {
    p.fail(unimplemented(field + ".attention_factor is absent: transformers would scale cos/sin "
                                 "by YaRN's mscale; set it to 1.0"));
  }
  if (p.number("attention_factor", 1.0) != 1.0) {
    p.fail(unimplemented(field + ".attention_factor other than 1.0 is not supported"));
  }
  if (!p.boolean("truncate", true))
    p.fail(unimplemented(field + ".truncate false is not supported"));
  const double factor = p.number("partial_rotary_factor", 0.0);
  if (factor != 0.0 && std::llround(factor * static_cast<double>(c.head_dim)) != c.rope_head_dim) {
    p.fail(invalid_argument(field + ".partial_rotary_factor (" + std::to_string(factor) +
                            ") disagrees with the rope head dim " +
                            std::to_string(c.rope_head_dim)));
  }
  r.fail(p.status());
  return rope;
}

// transformers' resolution (DeepseekV4Config.__post_init__ and RotaryEmbeddingConfigMixin):
// rope_scaling wins over rope_parameters; a dict with both "main" and "compress" is used as is,
// each set defaulting its base to rope_theta; otherwise the dict is the YaRN of the compressed
// layers, with base compress_rope_theta, and the sliding layers get plain RoPE at rope_theta.
void read_ropes(FieldReader& r, ModelConfig& c) {
  const double rope_theta = r.number("rope_theta", 10000.0);
  const double compress_theta = r.number("compress_rope_theta", 160000.0);
  const Json* scaling = r.object("rope_scaling");
  const Json* params = r.object("rope_parameters");
  const char* field = scaling != nullptr && !scaling->empty() ? "rope_scaling" : "rope_parameters";
  const Json* source = field == std::string("rope_scaling") ? scaling : params;
  const Json empty = Json::object();
  if (source == nullptr) source = &empty;
  const auto main = source->find("main");
  const auto compress = source->find("compress");
  if (main != source->end() && compress != source->end() && main->is_object() &&
      compress->is_object()) {
    c.rope_sliding = read_rope(r, *main, std::string(field) + ".main", rope_theta, false, c);
    c.rope_compressed =
        read_rope(r, *compress, std::string(field) + ".compress", rope_theta, false, c);
    return;
  }
  Json yarn = *source;
  yarn.erase("main");
  yarn.erase("compress");
  c.rope_sliding = RopeConfig{};
  c.rope_sliding.theta = rope_theta;
  c.rope_compressed = read_rope(r, yarn, field, compress_theta, /*force_theta=*/true, c);
}

// compress ratios per attention type: compress_rates, or the legacy scalar keys.
void read_rates(FieldReader& r, int64_t& csa_rate, int64_t& hca_rate) {
  csa_rate = 4;
  hca_rate = 128;
  if (const Json* rates = r.object("compress_rates")) {
    FieldReader rr(*rates, "compress_rates.");
    for (const auto& [key, value] : rates->items()) {
      if (key != kCsa && key != kHca) {
        r.fail(invalid_argument("compress_rates." + key + " is not a compressed attention type"));
      }
    }
    csa_rate = rr.integer(kCsa, csa_rate);
    hca_rate = rr.integer(kHca, hca_rate);
    r.fail(rr.status());
  }
  csa_rate = r.integer("compress_rate_csa", csa_rate);
  hca_rate = r.integer("compress_rate_hca", hca_rate);
}

// A per-layer list of strings (layer_types, mlp_layer_types). transformers keeps the first
// num_hidden_layers entries; fewer is an error.
std::vector<std::string> read_names(FieldReader& r, const char* key, int64_t n_layer) {
  std::vector<std::string> names;
  const Json* list = r.array(key);
  if (list == nullptr) return names;
  for (size_t i = 0; i < list->size(); ++i) {
    if (!(*list)[i].is_string()) {
      r.fail(invalid_argument(std::string(key) + "[" + std::to_string(i) + "] is not a string"));
      return {};
    }
    if (static_cast<int64_t>(i) < n_layer) names.push_back((*list)[i].get<std::string>());
  }
  if (static_cast<int64_t>(names.size()) < n_layer) {
    r.fail(invalid_argument(std::string(key) + " has " + std::to_string(list->size()) +
                            " entries, fewer than num_hidden_layers (" + std::to_string(n_layer) +
                            ")"));
  }
  return names;
}

// compress_ratios: the official per-layer ratios, num_hidden_layers + num_nextn_predict_layers
// entries (the MTP layers last). Kept raw in the config.
void read_compress_ratios(FieldReader& r, ModelConfig& c) {
  const Json* list = r.array("compress_ratios");
  if (list == nullptr) return;
  for (size_t i = 0; i < list->size(); ++i) {
    if (!(*list)[i].is_number_integer()) {
      r.fail(invalid_argument("compress_ratios[" + std::to_string(i) + "] is not an integer"));
      return;
    }
    c.compress_ratios.push_back((*list)[i].get<int64_t>());
  }
  const int64_t expected = c.n_layer + c.n_mtp_layers;
  if (static_cast<int64_t>(c.compress_ratios.size()) != expected) {
    r.fail(invalid_argument("compress_ratios has " + std::to_string(list->size()) +
                            " entries; expected num_hidden_layers (" + std::to_string(c.n_layer) +
                            ") + num_nextn_predict_layers (" + std::to_string(c.n_mtp_layers) +
                            ") = " + std::to_string(expected)));
  }
}

// The attention kind and ratio of each layer: layer_types + compress_rates when given, else the
// official compress_ratios (ratio 0 sliding, 4 CSA as in the reference's `overlap = ratio == 4`,
// any other HCA), else transformers' default (two HCA layers, then HCA/CSA alternating).
void read_attention_schedule(FieldReader& r, ModelConfig& c) {
  int64_t csa_rate = 0;
  int64_t hca_rate = 0;
  read_rates(r, csa_rate, hca_rate);
  read_compress_ratios(r, c);
  std::vector<std::string> types = read_names(r, "layer_types", c.n_layer);
  if (!r.status().ok()) return;
  const bool from_types = r.has("layer_types");
  c.layers.assign(static_cast<size_t>(c.n_layer), LayerSchedule{});
  for (int64_t i = 0; i < c.n_layer; ++i) {
    LayerSchedule& layer = c.layers[static_cast<size_t>(i)];
    std::string type;
    if (from_types) {
      type = types[static_cast<size_t>(i)];
    } else if (!c.compress_ratios.empty()) {
      const int64_t ratio = c.compress_ratios[static_cast<size_t>(i)];
      type = ratio == 0 ? kSliding : ratio == 4 ? kCsa : kHca;
    } else {
      type = i < 2 || (i - 2) % 2 == 0 ? kHca : kCsa;
    }
    if (type == kSliding) {
      layer = {AttentionType::kSliding, 0, layer.routing};
    } else if (type == kCsa) {
      layer = {AttentionType::kCompressedSparse, csa_rate, layer.routing};
    } else if (type == kHca) {
      layer = {AttentionType::kHeavilyCompressed, hca_rate, layer.routing};
    } else {
      r.fail(unimplemented("layer_types[" + std::to_string(i) + "] '" + type +
                           "' is not a DeepSeek-V4 attention type"));
      return;
    }
    if (!from_types && !c.compress_ratios.empty()) {
      layer.compress_ratio = c.compress_ratios[static_cast<size_t>(i)];
    } else if (!c.compress_ratios.empty() &&
               c.compress_ratios[static_cast<size_t>(i)] != layer.compress_ratio) {
      r.fail(invalid_argument("compress_ratios[" + std::to_string(i) + "] (" +
                              std::to_string(c.compress_ratios[static_cast<size_t>(i)]) +
                              ") disagrees with layer_types[" + std::to_string(i) + "] (" + type +
                              ", ratio " + std::to_string(layer.compress_ratio) + ")"));
      return;
    }
  }
}

// The MTP blocks: score-routed (hash routing is for the first layers), attention as the official
// compress_ratios' trailing entries say (the release's is 0: sliding window only), else sliding.
// num_nextn_predict_layers is in [0, kMaxLayers] here (parse_model_config checks).
void read_mtp_schedule(ModelConfig& c) {
  c.mtp_layers.assign(static_cast<size_t>(c.n_mtp_layers), LayerSchedule{});
  if (c.compress_ratios.empty()) return;
  for (size_t i = 0; i < c.mtp_layers.size(); ++i) {
    const int64_t ratio = c.compress_ratios[static_cast<size_t>(c.n_layer) + i];
    const AttentionType type = ratio == 0   ? AttentionType::kSliding
                               : ratio == 4 ? AttentionType::kCompressedSparse
                                            : AttentionType::kHeavilyCompressed;
    c.mtp_layers[i] = {type, ratio, RoutingType::kScore};
  }
}

// Hash-routed layers: mlp_layer_types when given, else the first num_hash_layers (default 3).
void read_routing_schedule(FieldReader& r, ModelConfig& c) {
  const std::vector<std::string> types = read_names(r, "mlp_layer_types", c.n_layer);
  const int64_t n_hash = r.integer("num_hash_layers", 3);
  if (!r.status().ok()) return;
  const bool from_types = r.has("mlp_layer_types");
  for (int64_t i = 0; i < c.n_layer; ++i) {
    bool hash = i < n_hash;
    if (from_types) {
      const std::string& type = types[static_cast<size_t>(i)];
      if (type != "hash_moe" && type != "moe") {
        r.fail(unimplemented("mlp_layer_types[" + std::to_string(i) + "] '" + type +
                             "' is not supported (hash_moe, moe)"));
        return;
      }
      hash = type == "hash_moe";
    }
    c.layers[static_cast<size_t>(i)].routing = hash ? RoutingType::kHash : RoutingType::kScore;
  }
}

// ---- validate: the ranges this engine runs ----

std::string str(int64_t v) { return std::to_string(v); }

// A dimension's range: positive, and at most `limit` (kNoCeiling for the ones a later check
// bounds by another field).
struct DimensionRange {
  const char* name;
  int64_t value, limit;
};
constexpr int64_t kNoCeiling = std::numeric_limits<int64_t>::max();

// Every field positive first, then every ceiling, so a config with both kinds of fault reports
// the non-positive one.
Status check_ranges(std::initializer_list<DimensionRange> fields) {
  for (const DimensionRange& field : fields) {
    if (field.value <= 0) {
      return invalid_argument(std::string(field.name) + " (" + str(field.value) +
                              ") must be positive");
    }
  }
  for (const DimensionRange& field : fields) {
    if (field.value > field.limit) {
      return invalid_argument(std::string(field.name) + " (" + str(field.value) + ") is over " +
                              str(field.limit) + ", the most this engine supports");
    }
  }
  return ok_status();
}

Status validate_dimensions(const ModelConfig& c) {
  // Generous ceilings (V4-Pro's values are at most an eighth of each): they keep every slot's
  // element count far inside int64 and make a typo'd dimension an error instead of an endless
  // name inventory or an overflowing shape.
  DSV4_RETURN_IF_ERROR(check_ranges({
      {"vocab_size", c.vocab_size, int64_t{1} << 24},
      {"hidden_size", c.hidden_size, int64_t{1} << 16},
      {"num_hidden_layers", c.n_layer, kMaxLayers},
      {"num_attention_heads", c.n_head, int64_t{1} << 10},
      {"head_dim", c.head_dim, int64_t{1} << 12},
      {"qk_rope_head_dim", c.rope_head_dim, kNoCeiling},  // below head_dim
      {"q_lora_rank", c.q_lora_rank, int64_t{1} << 16},
      {"o_groups", c.o_groups, kNoCeiling},  // divides num_attention_heads
      {"o_lora_rank", c.o_lora_rank, int64_t{1} << 16},
      {"sliding_window", c.sliding_window, int64_t{1} << 20},
      {"n_routed_experts", c.n_routed_experts, int64_t{1} << 12},
      {"num_experts_per_tok", c.n_expert_used, kNoCeiling},  // at most n_routed_experts
      {"moe_intermediate_size", c.moe_intermediate_size, int64_t{1} << 16},
      {"hc_mult", c.hc_mult, 64},
      {"hc_sinkhorn_iters", c.hc_sinkhorn_iters, int64_t{1} << 10},
      {"index_n_heads", c.index_n_heads, int64_t{1} << 10},
      {"index_head_dim", c.index_head_dim, int64_t{1} << 12},
      {"index_topk", c.index_topk, int64_t{1} << 20},
      {"max_position_embeddings", c.max_position_embeddings, int64_t{1} << 24},
  }));
  if (c.head_dim <= c.rope_head_dim) {
    return invalid_argument("head_dim (" + str(c.head_dim) +
                            ") must be larger than qk_rope_head_dim (" + str(c.rope_head_dim) +
                            ")");
  }
  if (c.rope_head_dim % 2 != 0) {
    return invalid_argument("qk_rope_head_dim (" + str(c.rope_head_dim) + ") must be even");
  }
  if (c.n_head % c.o_groups != 0) {
    return invalid_argument("num_attention_heads (" + str(c.n_head) +
                            ") is not divisible by o_groups (" + str(c.o_groups) + ")");
  }
  if (c.index_head_dim < c.rope_head_dim) {
    return invalid_argument("index_head_dim (" + str(c.index_head_dim) +
                            ") is smaller than qk_rope_head_dim (" + str(c.rope_head_dim) + ")");
  }
  for (const auto& [name, id] :
       {std::pair("bos_token_id", c.bos_token_id), std::pair("eos_token_id", c.eos_token_id)}) {
    if (id < 0 || id >= c.vocab_size) {
      return invalid_argument(std::string(name) + " (" + str(id) + ") is outside the vocabulary (" +
                              str(c.vocab_size) + ")");
    }
  }
  return ok_status();
}

Status validate_moe(const ModelConfig& c) {
  if (c.n_expert_used > c.n_routed_experts) {
    return invalid_argument("num_experts_per_tok (" + str(c.n_expert_used) +
                            ") is more than n_routed_experts (" + str(c.n_routed_experts) + ")");
  }
  if (c.n_shared_experts != 1) {
    return unimplemented("n_shared_experts (" + str(c.n_shared_experts) + ") must be 1");
  }
  if (!(c.routed_scaling_factor > 0)) {
    return invalid_argument("routed_scaling_factor (" + std::to_string(c.routed_scaling_factor) +
                            ") must be positive");
  }
  if (!(c.swiglu_limit >= 0)) {
    return invalid_argument("swiglu_limit (" + std::to_string(c.swiglu_limit) + ") must be >= 0");
  }
  for (const auto& [name, eps] :
       {std::pair("hc_eps", c.hc_eps), std::pair("rms_norm_eps", c.rms_norm_eps)}) {
    if (!(eps > 0 && eps < 1)) {
      return invalid_argument(std::string(name) + " (" + std::to_string(eps) +
                              ") must be in (0, 1)");
    }
  }
  if (c.n_mtp_layers < 0 || c.n_mtp_layers > kMaxLayers) {
    return invalid_argument("num_nextn_predict_layers (" + str(c.n_mtp_layers) +
                            ") must be in [0, " + str(kMaxLayers) + "]");
  }
  return ok_status();
}

Status validate_rope(const RopeConfig& rope, const char* name) {
  const std::string field = name;
  if (!(rope.theta > 0)) return invalid_argument(field + " rope_theta must be positive");
  if (!rope.yarn) return ok_status();
  if (!(rope.factor >= 1)) {
    return invalid_argument(field + " factor (" + std::to_string(rope.factor) + ") must be >= 1");
  }
  if (rope.original_max_position <= 0) {
    return invalid_argument(field + " original_max_position_embeddings (" +
                            str(rope.original_max_position) + ") must be positive");
  }
  if (!(rope.beta_fast > rope.beta_slow && rope.beta_slow > 0)) {
    return invalid_argument(field + " beta_fast (" + std::to_string(rope.beta_fast) +
                            ") must exceed beta_slow (" + std::to_string(rope.beta_slow) + ") > 0");
  }
  return ok_status();
}

Status validate_schedule(const ModelConfig& c) {
  if (static_cast<int64_t>(c.layers.size()) != c.n_layer) {
    return invalid_argument("the layer schedule has " + str(static_cast<int64_t>(c.layers.size())) +
                            " entries, not num_hidden_layers (" + str(c.n_layer) + ")");
  }
  if (static_cast<int64_t>(c.mtp_layers.size()) != c.n_mtp_layers) {
    return invalid_argument("the MTP schedule has " + str(static_cast<int64_t>(c.mtp_layers.size())) +
                            " entries, not num_nextn_predict_layers (" + str(c.n_mtp_layers) + ")");
  }
  for (int64_t i = 0; i < c.n_layer + c.n_mtp_layers; ++i) {
    const LayerSchedule& layer = c.schedule(i);
    const bool sliding = layer.attention == AttentionType::kSliding;
    if (sliding ? layer.compress_ratio != 0
                : layer.compress_ratio < 2 || layer.compress_ratio > kMaxCompressRatio) {
      return invalid_argument("layer " + std::to_string(i) + ": compress ratio " +
                              str(layer.compress_ratio) + " does not fit its attention type (" +
                              (sliding ? "sliding needs 0" : "compressed needs 2 .. 65536") + ")");
    }
  }
  return ok_status();
}

// quantization_config's FP8 linears (ModelConfig::fp8_linears). Read leniently: the section only
// informs a memory plan, so a field of another shape means "not declared", not an error.
void read_quantization(const format::Json& json, ModelConfig& c) {
  const auto q = json.find("quantization_config");
  if (q == json.end() || !q->is_object()) return;
  const auto is = [&](const char* key, const char* value) {
    const auto it = q->find(key);
    return it != q->end() && it->is_string() && it->get<std::string>() == value;
  };
  c.fp8_linears = is("quant_method", "fp8") && is("scale_fmt", "ue8m0");
}

}  // namespace

Result<ModelConfig> parse_model_config(const std::string& json_text, const std::string& path) {
  Result<format::Json> json = format::parse_json(json_text, path);
  if (!json.ok()) return json.status();
  if (!json->is_object()) return invalid_argument(path + ": not a JSON object");
  FieldReader r(*json, "");
  ModelConfig c;
  read_dimensions(r, c);
  read_moe(r, c);
  read_quantization(*json, c);
  if (r.status().ok()) read_rope_head_dim(r, c);
  if (r.status().ok()) read_ropes(r, c);
  // The schedule is sized by num_hidden_layers + num_nextn_predict_layers (a sum that must not
  // overflow): validate() reports an out-of-range count.
  if (r.status().ok() && c.n_layer > 0 && c.n_layer <= kMaxLayers && c.n_mtp_layers >= 0 &&
      c.n_mtp_layers <= kMaxLayers) {
    read_attention_schedule(r, c);
    if (r.status().ok()) read_routing_schedule(r, c);
    if (r.status().ok()) read_mtp_schedule(c);
  }
  DSV4_RETURN_IF_ERROR(r.status().with_context(path));
  DSV4_RETURN_IF_ERROR(validate(c).with_context(path));
  return c;
}

Status validate(const ModelConfig& config) {
  DSV4_RETURN_IF_ERROR(validate_dimensions(config));
  DSV4_RETURN_IF_ERROR(validate_moe(config));
  DSV4_RETURN_IF_ERROR(validate_rope(config.rope_sliding, "rope (sliding layers)"));
  DSV4_RETURN_IF_ERROR(validate_rope(config.rope_compressed, "rope (compressed layers)"));
  return validate_schedule(config);
}

Result<ModelConfig> load_model_config(const std::string& model_dir) {
  const std::string path = model_dir + "/config.json";
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(path + ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_model_config(text.str(), path);
}

}  // namespace dsv4::checkpoint
