// Sessions stepped together (runtime/session.h): one forward that decodes a token for one
// sequence while it prefills another's prompt gives each the numbers transformers recorded,
// and a step past a session's context is refused without running.
#include "runtime/session.h"

#include <gtest/gtest.h>

#include <vector>

#include "checkpoint/loader.h"
#include "model/golden.h"
#include "testing/compare.h"
#include "testing/tolerance.h"

namespace dsv4::runtime {
namespace {

using testing::golden_tensor;
using testing::max_row_rel_error;

std::vector<int64_t> ids_of(const Tensor& t) {
  return {t.data_as<int64_t>(), t.data_as<int64_t>() + t.numel()};
}

TEST(SessionTest, DecodeAndPrefillInOneStepMatchTransformers) {
  auto loaded = checkpoint::load_model(testing::golden_path("tiny_d_state_dict/model"));
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  const model::Model model(loaded->weights, model::ModelOptions{});
  const auto ref = testing::open_golden("tiny_d_state_dict/reference.safetensors");
  const std::vector<int64_t> a = ids_of(golden_tensor(ref, "prompt_0"));
  const std::vector<int64_t> a_greedy = ids_of(golden_tensor(ref, "greedy_0"));
  const std::vector<int64_t> b = ids_of(golden_tensor(ref, "prompt_1"));
  const int64_t v = model.config().vocab_size;

  auto sa = Session::create(model, 64), sb = Session::create(model, 64);
  ASSERT_TRUE(sa.ok() && sb.ok());
  const StepInput prefill_a[] = {{&*sa, a, false}};
  ASSERT_TRUE(step(model, prefill_a).ok());
  const StepInput mixed[] = {{&*sa, {&a_greedy[0], 1}, false}, {&*sb, b, true}};
  ASSERT_TRUE(step(model, mixed).ok());

  const Tensor want_a = golden_tensor(ref, "greedy_logits_0");  // row 1: after greedy_0[0]
  const Tensor want_b = golden_tensor(ref, "logits_1");
  EXPECT_EQ(sa->n_tokens(), static_cast<int64_t>(a.size()) + 1);
  EXPECT_EQ(sb->logits().size(), b.size() * v);
  EXPECT_LT(max_row_rel_error(sa->next_token_logits().data(), want_a.data_as<float>() + v, 1, v),
            testing::kGoldenLogitsRelTol);
  EXPECT_LT(max_row_rel_error(sb->logits().data(), want_b.data_as<float>(),
                              static_cast<int64_t>(b.size()), v),
            testing::kGoldenLogitsRelTol);

  // Past the context: refused, and neither session moved.
  const std::vector<int64_t> too_many(64, 2);
  const StepInput overflow[] = {{&*sb, {&a[0], 1}, false}, {&*sa, too_many, false}};
  EXPECT_EQ(step(model, overflow).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(sa->n_tokens(), static_cast<int64_t>(a.size()) + 1);
  EXPECT_EQ(sb->n_tokens(), static_cast<int64_t>(b.size()));
}

}  // namespace
}  // namespace dsv4::runtime
