// A golden model's dense linears in FP8, as an FP8 checkpoint of it would hold them: every
// LinearWeight rounded to e4m3 with power-of-two 128 × 128 block scales (testing/fp8_weight.h).
// Two host forms of the same weights: `decoded`, the f32 values load_model gives of such a
// checkpoint (what copy_weights widened to bf16 on a GPU), and `kept`, the codes and scales
// load_model_on keeps (LoadOptions::keep_fp8).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>

#include "checkpoint/loader.h"
#include "checkpoint/to_device.h"
#include "model/golden.h"
#include "testing/fp8_weight.h"

namespace dsv4::testing {

// Calls fn on every dense linear of w that is present.
inline void for_each_linear(checkpoint::ModelWeights& w,
                            const std::function<void(checkpoint::LinearWeight&)>& fn) {
  const auto visit = [&](checkpoint::LinearWeight& l) {
    if (!l.empty_tensor()) fn(l);
  };
  const auto layer = [&](checkpoint::LayerWeights& l) {
    for (checkpoint::LinearWeight* p :
         {&l.attn.wq_a, &l.attn.wq_b, &l.attn.wkv, &l.attn.wo_a, &l.attn.wo_b,
          &l.ffn.shared_expert.w1, &l.ffn.shared_expert.w3, &l.ffn.shared_expert.w2}) {
      visit(*p);
    }
    if (l.attn.compressor) {
      visit(l.attn.compressor->wkv);
      visit(l.attn.compressor->wgate);
    }
    if (l.attn.indexer) {
      for (checkpoint::LinearWeight* p :
           {&l.attn.indexer->wq_b, &l.attn.indexer->weights_proj, &l.attn.indexer->compressor.wkv,
            &l.attn.indexer->compressor.wgate}) {
        visit(*p);
      }
    }
  };
  visit(w.head);
  for (checkpoint::LayerWeights& l : w.layers) layer(l);
  for (checkpoint::MtpWeights& m : w.mtp) {
    visit(m.e_proj);
    visit(m.h_proj);
    layer(m.block);
  }
}

struct Fp8Golden {
  checkpoint::ModelWeights decoded;
  checkpoint::ModelWeights kept;
};

// The golden model `name` (a tests/golden folder) with its linears in FP8, on the host.
inline Fp8Golden fp8_golden(const std::string& name) {
  auto loaded = checkpoint::load_model(golden_path(name + "/model"));
  EXPECT_TRUE(loaded.ok()) << loaded.status().to_string();
  auto decoded = checkpoint::copy_weights(loaded->weights, Device::kCpu);
  auto kept = checkpoint::copy_weights(loaded->weights, Device::kCpu);
  EXPECT_TRUE(decoded.ok() && kept.ok());
  for_each_linear(*decoded, [](checkpoint::LinearWeight& l) {
    const Fp8Weight fp8 = fp8_weight_of(l.data_as<const float>(), l.shape()[0], l.shape()[1]);
    std::copy(fp8.decoded.begin(), fp8.decoded.end(), l.data_as<float>());
  });
  for_each_linear(*kept, [](checkpoint::LinearWeight& l) {
    const Fp8Weight fp8 = fp8_weight_of(l.data_as<const float>(), l.shape()[0], l.shape()[1]);
    checkpoint::LinearWeight codes(Tensor::host(DType::kF8E4M3, l.shape()));
    std::copy(fp8.codes.begin(), fp8.codes.end(), codes.data_as<uint8_t>());
    codes.block_scales = Tensor::host(DType::kF32, {(fp8.n + 127) / 128, fp8.scale_cols()});
    std::copy(fp8.scales.begin(), fp8.scales.end(), codes.block_scales.data_as<float>());
    l = std::move(codes);
  });
  return {std::move(decoded).value(), std::move(kept).value()};
}

}  // namespace dsv4::testing
