// An MTP block for a golden model (whose checkpoint has none: transformers drops it): random
// projections, norms and hc_head, and as its V4 block a copy of the model's last score-routed
// layer with that layer's attention less the compressor (the MTP block is sliding-window only,
// §2.7). What it drafts is arbitrary; the tests need a block with the right shapes and the
// model's statistics, not a trained one.
#pragma once

#include <cmath>

#include <gtest/gtest.h>

#include <string>

#include "base/buffer.h"
#include "checkpoint/loader.h"
#include "checkpoint/weights.h"
#include "model/golden.h"
#include "testing/random.h"

namespace dsv4::testing {

inline Tensor clone(const Tensor& t) {
  if (t.empty_tensor()) return Tensor();
  Result<Tensor> out = Tensor::empty(t.dtype(), t.shape(), t.device());
  DSV4_CHECK(out.ok() && copy_tensor(out->view(), t.view()).ok(), "clone %s",
             t.shape().to_string().c_str());
  return std::move(out).value();
}

// f32 host values uniform in [center − spread, center + spread].
inline Tensor random_values(SeededRng& rng, Shape shape, double center, double spread) {
  Tensor t = Tensor::host(DType::kF32, shape);
  for (int64_t i = 0; i < t.numel(); ++i) {
    t.data_as<float>()[i] = static_cast<float>(center + rng.uniform(-spread, spread));
  }
  return t;
}

inline checkpoint::MtpWeights random_mtp_block(const checkpoint::ModelWeights& w, SeededRng& rng) {
  const checkpoint::ModelConfig& c = w.config;
  const int64_t d = c.hidden_size, m = c.hc_mult;
  int64_t source = c.n_layer - 1;
  while (c.layers[static_cast<size_t>(source)].routing != checkpoint::RoutingType::kScore) --source;
  const checkpoint::LayerWeights& l = w.layers[static_cast<size_t>(source)];
  checkpoint::MtpWeights mtp;
  const double projection = 1.0 / std::sqrt(static_cast<double>(d));
  mtp.e_proj = random_values(rng, {d, d}, 0.0, projection);
  mtp.h_proj = random_values(rng, {d, d}, 0.0, projection);
  mtp.enorm = random_values(rng, {d}, 1.0, 0.2);
  mtp.hnorm = random_values(rng, {d}, 1.0, 0.2);
  mtp.norm = clone(w.norm);
  mtp.hc_head = {random_values(rng, {m, m * d}, 0.0, 0.05), random_values(rng, {m}, 0.0, 0.5),
                 random_values(rng, {1}, 1.0, 0.5)};
  checkpoint::LayerWeights& b = mtp.block;
  b.hc_attn = {clone(l.hc_attn.fn), clone(l.hc_attn.base), clone(l.hc_attn.scale)};
  b.hc_ffn = {clone(l.hc_ffn.fn), clone(l.hc_ffn.base), clone(l.hc_ffn.scale)};
  b.attn_norm = clone(l.attn_norm);
  b.ffn_norm = clone(l.ffn_norm);
  const checkpoint::AttentionWeights& a = l.attn;
  b.attn = {clone(a.attn_sink), clone(a.wq_a), clone(a.q_norm), clone(a.wq_b),
            clone(a.wkv),       clone(a.kv_norm), clone(a.wo_a), clone(a.wo_b),
            std::nullopt,       std::nullopt};
  DSV4_CHECK(!l.ffn.experts.is_nvfp4(), "the fixture copies dense experts only");
  b.ffn.gate = clone(l.ffn.gate);
  b.ffn.bias = clone(l.ffn.bias);
  b.ffn.experts.w13 = clone(l.ffn.experts.w13);
  b.ffn.experts.w2 = clone(l.ffn.experts.w2);
  b.ffn.shared_expert = {clone(l.ffn.shared_expert.w1), clone(l.ffn.shared_expert.w3),
                         clone(l.ffn.shared_expert.w2)};
  return mtp;
}

// The golden model of `folder` with a random MTP block.
inline checkpoint::LoadedModel load_with_mtp_block(const std::string& folder, SeededRng& rng) {
  auto loaded = checkpoint::load_model(golden_path(folder + "/model"));
  EXPECT_TRUE(loaded.ok()) << loaded.status().to_string();
  if (!loaded.ok()) return {};
  loaded->weights.mtp.push_back(random_mtp_block(loaded->weights, rng));
  return std::move(loaded).value();
}

}  // namespace dsv4::testing
