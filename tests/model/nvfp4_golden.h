// What the NVFP4 model tests share (CPU forward, CUDA forward, copy_weights): tiny_b's routed
// experts quantized to a ModelOpt-layout NVFP4 checkpoint with calibrated input scales, and a
// prompt's logits computed on the host.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "checkpoint/quantize.h"
#include "model/deepseek_v4.h"
#include "model/golden.h"
#include "testing/temp_dir.h"

namespace dsv4::testing {

// One static activation scale for every expert input: the SwiGLU outputs reach ~10 · silu(10)
// under tiny_b's clamp, so the range covers |x| ≈ 128 (block scales keep small rows precise).
inline constexpr float kTinyBInputScale = 128.0f / 2688.0f;

// tiny_b_state_dict quantized into `dir`/model; returns that directory (a failure is reported).
inline std::string quantized_tiny_b(const TempDir& dir) {
  checkpoint::QuantizeOptions options;
  options.input_scale = kTinyBInputScale;
  const std::string out = dir.path() + "/model";
  const auto summary =
      checkpoint::quantize_checkpoint(golden_path("tiny_b_state_dict/model"), out, options);
  EXPECT_TRUE(summary.ok()) << summary.status().to_string();
  return out;
}

// The prompt's logits [T, V] from a model whose weights are on the host.
inline Tensor host_prompt_logits(const checkpoint::ModelWeights& weights, model::ExpertMode mode,
                                 const std::vector<int64_t>& ids) {
  const model::Model model(weights, model::ModelOptions{mode});
  auto cache = model.new_cache(static_cast<int64_t>(ids.size()));
  EXPECT_TRUE(cache.ok());
  Tensor logits =
      Tensor::host(DType::kF32, {static_cast<int64_t>(ids.size()), model.config().vocab_size});
  const Status status = model.forward(ids, 0, *cache, logits.view());
  EXPECT_TRUE(status.ok()) << status.to_string();
  return logits;
}

}  // namespace dsv4::testing
