// `dsv4 quantize`: a bf16/f16/f32 checkpoint to a ModelOpt-layout NVFP4 checkpoint
// (docs/nvfp4.md). The routed experts (and, when asked, every other 2-D linear but the
// embedding, the head and the router) become
//   weight          u8       [N, K/2]   E2M1 codes, low nibble first
//   weight_scale    f8_e4m3  [N, K/16]  UE4M3 block scales, linear layout
//   weight_scale_2  f32      []         decode global scale amax / 2688 ([E] for a fused stack)
//   input_scale     f32      []         the static activation decode scale ([E] likewise)
// under the input's own names; w1 and w3 of one expert share one weight_scale_2 (the max of
// their amaxes), because the fused w13 GEMM applies one alpha to both halves. Everything else
// is copied byte for byte, shard by shard; config.json gains a quantization_config.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "checkpoint/tensor_names.h"
#include "dsv4/status.h"
#include "format/json.h"

namespace dsv4::checkpoint {

// The routed experts' calibrated activation decode scales (amax / 2688 of each expert's inputs
// over a calibration pass, runtime/calibration.h), [layer][expert]: of the gate-up (w1, w3)
// input and of the down (w2) input.
struct ExpertInputScales {
  std::vector<std::vector<float>> gate_up, down;
};

struct QuantizeOptions {
  // Also quantize every 2-D linear (attention, compressor, indexer, shared expert), not only
  // the routed experts. The embedding, the head and the router stay as they are.
  bool all_linears = false;
  // The activation decode scale written as every input_scale (ModelOpt's calibrated
  // amax_x / 2688), or, with calibrate_experts, as that of every linear but the routed experts;
  // finite and > 0 wherever it is written.
  float input_scale = 0.0f;
  // Write into an existing, non-empty output directory, replacing files of the same name.
  bool force = false;
  // When set, the routed experts' input scales come from a calibration pass (one per layer and
  // expert, finite and > 0; runtime/calibration.h). It is called once, after the input binds,
  // its routed experts are found dense and the output directory usable, and before anything is
  // written: a pass over a V4-size checkpoint is long, so every cheap refusal comes first.
  std::function<Result<ExpertInputScales>()> calibrate_experts;
};

struct QuantizeSummary {
  NamingConvention convention = NamingConvention::kOfficial;
  size_t n_quantized = 0;  // weight tensors turned into NVFP4
  size_t n_copied = 0;     // tensors copied unchanged
  size_t n_shards = 0;
  size_t tensor_bytes = 0;  // tensor data written over all shards (the index's total_size)
};

// ModelOpt's names for an NVFP4 weight's siblings: `X.weight` -> `X.weight_scale`,
// `X.weight_scale_2`, `X.input_scale`; a fused stack without a `.weight` suffix ->
// `X_weight_scale`, ... Each name is checked against the loader's table (sibling_candidates),
// so a checkpoint written with them binds; an internal error for a name no sibling rule fits.
struct Nvfp4SiblingNames {
  std::string block_scale, global_scale, input_scale;
};
Result<Nvfp4SiblingNames> nvfp4_sibling_names(const std::string& weight);

// The quantization_config written into config.json: ModelOpt's fields (the ones vLLM and
// ModelOpt read) and what the producer chose, in words: which weights are NVFP4 (`scope`) and
// where their input scales came from.
format::Json nvfp4_quantization_config(const std::string& producer, const std::string& scope,
                                       const std::string& input_scales);

// Reads `in_dir` (config.json + safetensors, sharded or not), writes `out_dir`. The input must
// bind without problems (as `dsv4 check` reports it); `out_dir` must be empty or absent unless
// options.force.
Result<QuantizeSummary> quantize_checkpoint(const std::string& in_dir, const std::string& out_dir,
                                            const QuantizeOptions& options);

}  // namespace dsv4::checkpoint
