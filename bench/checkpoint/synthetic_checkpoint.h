// A synthetic DeepSeek-V4 checkpoint: a real config's layer shapes, cut to a few layers, with
// random weights, so the engine can be timed at V4-Flash / V4-Pro shapes without the real
// checkpoint. Every key the official naming expects is written exactly once (the name table,
// checkpoint/tensor_names.h, says which); dense weights in their release dtype, but the
// linears the release stores in FP8 in bf16 unless fp8_linears asks for FP8, routed experts
// in the ModelOpt NVFP4 layout `dsv4 quantize` writes. The values keep a forward finite and the
// routing roughly uniform over the experts (synthetic_checkpoint.cpp says how).
//
// The bytes depend on the config, the layer count and the seed only: each tensor's values are
// drawn in row chunks, each chunk from its own generator seeded by (seed, tensor, chunk), so the
// thread count that drew them does not matter. Shards (one for the global weights, one per
// layer) are streamed to disk a window at a time, never held whole.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "dsv4/status.h"

namespace dsv4::bench {

// One shard, as written.
struct SyntheticShard {
  std::string file;             // the shard's file name inside the output directory
  size_t index = 0, count = 0;  // this is shard index + 1 of count
  size_t n_tensors = 0;
  size_t bytes = 0;  // tensor data
  double seconds = 0;
};

struct SyntheticOptions {
  std::string config_path;  // a DeepSeek-V4 config.json
  std::string out_dir;      // must be empty or absent
  int64_t n_layers = 0;     // 1 .. the config's num_hidden_layers
  int64_t n_mtp_layers = 0;  // 0 .. the config's num_nextn_predict_layers (the MTP blocks)
  uint64_t seed = 0;
  // The linears the release stores in FP8 (attention, the indexer's wq_b, the shared expert,
  // MTP's projections) as e4m3 with 128 × 128 block scales, as the release stores them; else
  // in bf16. The engine keeps FP8 linears FP8 on the GPU (docs/numerics.md).
  bool fp8_linears = false;
  std::function<void(const SyntheticShard&)> on_shard;  // after each shard (progress)
};

struct SyntheticSummary {
  size_t n_tensors = 0;
  size_t n_shards = 0;
  size_t tensor_bytes = 0;
};

// Writes out_dir/config.json (the config cut to n_layers and n_mtp_layers, a ModelOpt NVFP4
// quantization_config), the shards and model.safetensors.index.json.
Result<SyntheticSummary> write_synthetic_checkpoint(const SyntheticOptions& options);

}  // namespace dsv4::bench
