// One forward as continuous batching makes them, against transformers, on the model's device:
// a chunk longer than its cache's step (which runs in steps on its own) beside short ones
// (consecutive ones attend as one batched step), after them as the running batch orders them
// and before them (their batched step then starts at a later row). Each sequence's logits
// within kGoldenLogitsRelTol of the oracle's.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "format/safetensors.h"
#include "model/deepseek_v4.h"
#include "model/golden.h"
#include "testing/compare.h"
#include "testing/tolerance.h"

namespace dsv4::model {

inline void expect_mixed_batch_matches_transformers(const Model& model,
                                                    const format::SafetensorsFile& reference) {
  using testing::golden_tensor;
  using testing::kGoldenLogitsRelTol;
  using testing::max_row_rel_error;
  auto ids = [&](const std::string& name) {
    const Tensor t = golden_tensor(reference, name);
    return std::vector<int64_t>(t.data_as<int64_t>(), t.data_as<int64_t>() + t.numel());
  };
  const std::vector<int64_t> a = ids("prompt_0"), b = ids("prompt_1");
  const Tensor want_a = golden_tensor(reference, "logits_0");
  const Tensor want_b = golden_tensor(reference, "logits_1");
  const int64_t v = model.config().vocab_size;
  const int64_t na = static_cast<int64_t>(a.size()), nb = static_cast<int64_t>(b.size());
  const int64_t long_step = 3;
  ASSERT_GT(na, long_step);
  for (const bool long_first : {false, true}) {
    SCOPED_TRACE(long_first ? "long chunk first" : "long chunk last");
    auto cache_a = model.new_cache(na, long_step);
    auto cache_b = model.new_cache(nb), cache_c = model.new_cache(nb);
    ASSERT_TRUE(cache_a.ok() && cache_b.ok() && cache_c.ok());
    auto la = Tensor::empty(DType::kF32, {na, v}, model.device());
    auto lb = Tensor::empty(DType::kF32, {nb, v}, model.device());
    auto lc = Tensor::empty(DType::kF32, {1, v}, model.device());
    ASSERT_TRUE(la.ok() && lb.ok() && lc.ok());
    const SequenceChunk chunk_a{a, 0, &*cache_a, la->view()};
    const SequenceChunk chunk_b{b, 0, &*cache_b, lb->view()}, chunk_c{b, 0, &*cache_c, lc->view()};
    const std::vector<SequenceChunk> batch = long_first ? std::vector{chunk_a, chunk_b, chunk_c}
                                                        : std::vector{chunk_b, chunk_c, chunk_a};
    const Status forward = model.forward(batch);
    ASSERT_TRUE(forward.ok()) << forward.to_string();
    Tensor got_a = Tensor::host(DType::kF32, {na, v}), got_b = Tensor::host(DType::kF32, {nb, v});
    Tensor got_c = Tensor::host(DType::kF32, {1, v});
    ASSERT_TRUE(copy_tensor(got_a.view(), la->view()).ok() &&
                copy_tensor(got_b.view(), lb->view()).ok() &&
                copy_tensor(got_c.view(), lc->view()).ok());
    EXPECT_LT(max_row_rel_error(got_a.data_as<float>(), want_a.data_as<float>(), na, v),
              kGoldenLogitsRelTol);
    EXPECT_LT(max_row_rel_error(got_b.data_as<float>(), want_b.data_as<float>(), nb, v),
              kGoldenLogitsRelTol);
    EXPECT_LT(
        max_row_rel_error(got_c.data_as<float>(), want_b.data_as<float>() + (nb - 1) * v, 1, v),
        kGoldenLogitsRelTol);
  }
}

}  // namespace dsv4::model
