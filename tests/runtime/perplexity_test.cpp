// runtime/perplexity.h: the window plan against hand-derived spans and against its contract on
// random sizes; and the shipped Brown model (tests/golden/brown_small) on a held-out excerpt
// against transformers (transformers.json): the same ids from its tokenizer, the same perplexity
// to 1e-4 relative. The latter is also the test that keeps the shipped model from drifting.
#include "runtime/perplexity.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "dsv4/tokenizer.h"
#include "format/json.h"
#include "testing/random.h"
#include "testing/source_dir.h"

namespace dsv4::runtime {
namespace {

void expect_windows(int64_t n, int64_t window, int64_t stride,
                    const std::vector<std::vector<int64_t>>& expected) {
  Result<std::vector<EvalWindow>> got = eval_windows(n, window, stride);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  ASSERT_EQ(got->size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ((*got)[i].begin, expected[i][0]) << "window " << i;
    EXPECT_EQ((*got)[i].first_target, expected[i][1]) << "window " << i;
    EXPECT_EQ((*got)[i].end, expected[i][2]) << "window " << i;
  }
}

TEST(EvalWindowsTest, EachWindowScoresWhatTheLastDidNot) {
  expect_windows(10, 4, 2, {{0, 1, 4}, {2, 4, 6}, {4, 6, 8}, {6, 8, 10}});
  expect_windows(9, 4, 3, {{0, 1, 4}, {3, 4, 7}, {5, 7, 9}});  // the last ends at the text's end
  expect_windows(8, 4, 4, {{0, 1, 4}, {4, 4, 8}});
  expect_windows(5, 5, 2, {{0, 1, 5}});
}

TEST(EvalWindowsTest, EveryTargetOnceWithAtLeastWindowLessStrideBeforeIt) {
  testing::SeededRng rng;
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t window = rng.uniform_int(2, 40);
    const int64_t stride = rng.uniform_int(1, window);
    const int64_t n = rng.uniform_int(window, 300);
    Result<std::vector<EvalWindow>> windows = eval_windows(n, window, stride);
    ASSERT_TRUE(windows.ok()) << windows.status().to_string();
    std::vector<int> times(static_cast<size_t>(n), 0);
    for (const EvalWindow& w : *windows) {
      ASSERT_EQ(w.end - w.begin, window);
      ASSERT_GE(w.begin, 0);
      ASSERT_LE(w.end, n);
      for (int64_t t = w.first_target; t < w.end; ++t) {
        ++times[static_cast<size_t>(t)];
        if (w.begin > 0) {
          EXPECT_GE(t - w.begin, window - stride) << "target " << t;
        }
      }
    }
    EXPECT_EQ(times[0], 0);
    for (int64_t t = 1; t < n; ++t) ASSERT_EQ(times[static_cast<size_t>(t)], 1) << "target " << t;
  }
}

TEST(EvalWindowsTest, RefusesATextShorterThanAWindowAndBadStrides) {
  const Result<std::vector<EvalWindow>> short_text = eval_windows(3, 4, 2);
  ASSERT_FALSE(short_text.ok());
  EXPECT_NE(short_text.status().message().find("3 ids, fewer than one window of 4"),
            std::string::npos);
  EXPECT_FALSE(eval_windows(10, 4, 0).ok());
  EXPECT_FALSE(eval_windows(10, 4, 5).ok());
  EXPECT_FALSE(eval_windows(10, 1, 1).ok());
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct Shipped {
  std::string dir = testing::source_path("tests/golden/brown_small");
  std::string text = read_file(dir + "/heldout_excerpt.txt");
  format::Json oracle = [this] {
    Result<format::Json> j = format::parse_json(read_file(dir + "/transformers.json"), "oracle");
    return j.ok() ? *j : format::Json();
  }();
};

TEST(PerplexityTest, ShippedTokenizerGivesTransformersIdsAndRoundTrips) {
  const Shipped shipped;
  ASSERT_TRUE(shipped.oracle.contains("excerpt_ids"));
  const auto expected = shipped.oracle["excerpt_ids"].get<std::vector<int64_t>>();
  Result<Tokenizer> tok = Tokenizer::load(shipped.dir + "/model/tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  EXPECT_EQ(tok->token_id("<｜begin▁of▁sentence｜>"), expected[0]);
  EXPECT_EQ(tok->token_id("<｜end▁of▁sentence｜>"), 1);
  for (const char* chat : {"<｜User｜>", "<｜Assistant｜>", "<think>", "</think>"}) {
    EXPECT_TRUE(tok->token_id(chat).has_value()) << chat;
  }
  Result<std::vector<int64_t>> ids = tok->encode(shipped.text, false);
  ASSERT_TRUE(ids.ok()) << ids.status().to_string();
  EXPECT_EQ(*ids, std::vector<int64_t>(expected.begin() + 1, expected.end()));
  Result<std::string> back = tok->decode(*ids);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, shipped.text);
}

TEST(PerplexityTest, ShippedModelMatchesTransformersOnAHeldOutExcerpt) {
  const Shipped shipped;
  const format::Json& expected = shipped.oracle["w4a16"]["excerpt_w512_s256"];
  ASSERT_TRUE(expected.is_object());
  const auto ids = shipped.oracle["excerpt_ids"].get<std::vector<int64_t>>();
  EngineOptions options;
  options.model_dir = shipped.dir + "/model";
  options.max_context = 512;
  options.max_batch = 4;
  options.max_step_tokens = 4 * 512;
  options.prefix_cache_mb = 0;
  Result<Engine> engine = Engine::open(options);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  std::vector<int64_t> progress;
  Result<PerplexityResult> r = perplexity(*engine, ids, 512, 256, 4, [&](int64_t done, int64_t) {
    progress.push_back(done);
  });
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->scored, expected["scored"].get<int64_t>());
  EXPECT_EQ(r->windows, expected["windows"].get<int64_t>());
  EXPECT_EQ(progress, (std::vector<int64_t>{4, 6}));
  const double want = expected["perplexity"].get<double>();
  EXPECT_LT(std::abs(r->perplexity() / want - 1.0), 1e-4)
      << "dsv4 " << r->perplexity() << ", transformers " << want;
}

}  // namespace
}  // namespace dsv4::runtime
