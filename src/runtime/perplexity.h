// A text's perplexity under the engine, streamed in windows (dsv4 eval).
//
// The ids are scored as Hugging Face's "perplexity of fixed-length models" scores them: the
// windows end at `window`, `window + stride`, ... and the last at the end of the ids; each one runs
// the `window` ids before its end and scores the targets no earlier window scored, so every
// target but the first window's has at least `window - stride` ids of context. The first id (the
// caller's <BOS>) is context only. scripts/train_small.py's perplexity() is the same loop, which
// is how transformers' numbers in docs/quality.md were made.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "dsv4/engine.h"
#include "dsv4/status.h"

namespace dsv4::runtime {

struct EvalWindow {
  int64_t begin = 0;         // the window runs ids [begin, end)
  int64_t first_target = 0;  // and scores the targets [first_target, end)
  int64_t end = 0;
};

// The windows over n_ids ids. Needs 2 <= window <= n_ids and 1 <= stride <= window.
Result<std::vector<EvalWindow>> eval_windows(int64_t n_ids, int64_t window, int64_t stride);

struct PerplexityResult {
  int64_t scored = 0;   // targets scored: every id but the first
  int64_t windows = 0;  // forwards run
  double nll = 0.0;     // their summed negative log-likelihood, in nats
  double perplexity() const;
};

// Scores `ids` window by window, `batch` windows to a generate_batch call; `progress` (may be
// empty) hears the windows done and their total after each call.
Result<PerplexityResult> perplexity(Engine& engine, std::span<const int64_t> ids, int64_t window,
                                    int64_t stride, int64_t batch,
                                    const std::function<void(int64_t, int64_t)>& progress);

}  // namespace dsv4::runtime
