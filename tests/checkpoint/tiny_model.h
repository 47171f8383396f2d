// A tiny DeepSeek-V4 config for the loader tests: three layers that cover every slot scope
// (layer 0 sliding + hash-routed, layer 1 CSA, layer 2 HCA), four experts, hc_mult 2, sizes that
// are multiples of 32 so every quantized form applies. Also helpers to bind a header-only name
// list (no data) and to read a tests/golden keys.txt as one.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "checkpoint/binding.h"
#include "checkpoint/config.h"
#include "checkpoint/official_inventory.h"

namespace dsv4::testing {

inline constexpr const char* kTinyConfigJson = R"({
  "model_type": "deepseek_v4", "vocab_size": 32, "hidden_size": 64, "num_hidden_layers": 3,
  "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 32, "qk_rope_head_dim": 8,
  "q_lora_rank": 32, "o_groups": 2, "o_lora_rank": 16, "sliding_window": 8,
  "n_routed_experts": 4, "n_shared_experts": 1, "num_experts_per_tok": 2,
  "moe_intermediate_size": 32, "scoring_func": "sqrtsoftplus", "routed_scaling_factor": 1.5,
  "hc_mult": 2, "hc_sinkhorn_iters": 20, "index_n_heads": 2, "index_head_dim": 16,
  "index_topk": 4, "rope_theta": 10000.0, "compress_rope_theta": 160000.0,
  "max_position_embeddings": 4096, "num_nextn_predict_layers": 1,
  "layer_types": ["sliding_attention", "compressed_sparse_attention",
                  "heavily_compressed_attention"],
  "compress_rates": {"compressed_sparse_attention": 4, "heavily_compressed_attention": 8},
  "mlp_layer_types": ["hash_moe", "moe", "moe"],
  "rope_parameters": {"rope_type": "yarn", "factor": 16.0,
                      "original_max_position_embeddings": 256, "beta_fast": 32, "beta_slow": 1}
})";

inline checkpoint::ModelConfig parsed_config(const std::string& text, const std::string& what) {
  Result<checkpoint::ModelConfig> config = checkpoint::parse_model_config(text, what);
  EXPECT_TRUE(config.ok()) << config.status().to_string();
  return config.ok() ? *config : checkpoint::ModelConfig{};
}

inline checkpoint::ModelConfig tiny_config() { return parsed_config(kTinyConfigJson, "tiny"); }

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// A header-only checkpoint: TensorInfos without data, bound as "model-00001.safetensors".
class HeaderList {
 public:
  explicit HeaderList(const std::vector<NamedShape>& list) {
    infos_.reserve(list.size());
    for (const NamedShape& t : list) infos_.push_back({t.name, t.dtype, t.shape, nullptr, 0});
  }
  Result<checkpoint::Binding> bind(const checkpoint::ModelConfig& config,
                                   std::optional<checkpoint::NamingConvention> force = {}) const {
    std::vector<const format::TensorInfo*> pointers;
    for (const format::TensorInfo& t : infos_) pointers.push_back(&t);
    return checkpoint::bind_tensors(pointers, config, force,
                                    [](std::string_view) { return "model-00001.safetensors"; });
  }

 private:
  std::vector<format::TensorInfo> infos_;
};

// tests/golden/<name>/keys.txt lines "name<TAB>DTYPE<TAB>[a, b]" as a name list.
inline std::vector<NamedShape> golden_keys(const std::string& path) {
  std::vector<NamedShape> out;
  std::istringstream lines(read_text(path));
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string name, dtype, dims;
    std::getline(fields, name, '\t');
    std::getline(fields, dtype, '\t');
    std::getline(fields, dims);
    Shape shape;
    std::string dim;
    std::istringstream dim_list(dims.substr(1, dims.size() - 2));
    while (std::getline(dim_list, dim, ',')) shape.dims[shape.rank++] = std::stoll(dim);
    out.push_back({name, parse_dtype(dtype).value(), shape});
  }
  return out;
}

inline std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) out += line + "\n";
  return out;
}

}  // namespace dsv4::testing
