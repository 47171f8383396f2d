#include "runtime/perplexity.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace dsv4::runtime {

Result<std::vector<EvalWindow>> eval_windows(int64_t n_ids, int64_t window, int64_t stride) {
  if (window < 2) return invalid_argument("window " + std::to_string(window) + ": at least 2");
  if (stride < 1 || stride > window) {
    return invalid_argument("stride " + std::to_string(stride) + ": between 1 and the window (" +
                            std::to_string(window) + ")");
  }
  if (n_ids < window) {
    return invalid_argument(std::to_string(n_ids) + " ids, fewer than one window of " +
                            std::to_string(window));
  }
  std::vector<EvalWindow> windows;
  int64_t scored_to = 1;  // the first id is context only
  for (int64_t end = window;; end += stride) {
    end = std::min(end, n_ids);
    windows.push_back({end - window, scored_to, end});
    scored_to = end;
    if (end == n_ids) break;
  }
  return windows;
}

double PerplexityResult::perplexity() const {
  return std::exp(nll / static_cast<double>(scored));
}

Result<PerplexityResult> perplexity(Engine& engine, std::span<const int64_t> ids, int64_t window,
                                    int64_t stride, int64_t batch,
                                    const std::function<void(int64_t, int64_t)>& progress) {
  if (batch < 1) return invalid_argument("batch " + std::to_string(batch) + ": at least 1");
  DSV4_ASSIGN_OR_RETURN(std::vector<EvalWindow> windows,
                        eval_windows(static_cast<int64_t>(ids.size()), window, stride));
  PerplexityResult result;
  const auto total = static_cast<int64_t>(windows.size());
  for (int64_t first = 0; first < total; first += batch) {
    const int64_t last = std::min(first + batch, total);
    std::vector<GenerateRequest> requests;
    for (int64_t w = first; w < last; ++w) {
      const EvalWindow& span = windows[static_cast<size_t>(w)];
      GenerateRequest request;
      request.prompt.assign(ids.begin() + span.begin, ids.begin() + span.end);
      request.sampling.max_tokens = 0;
      request.logprobs = 0;
      request.prompt_logprobs = true;
      requests.push_back(std::move(request));
    }
    DSV4_ASSIGN_OR_RETURN(std::vector<Generation> outs, engine.generate_batch(requests));
    for (int64_t w = first; w < last; ++w) {
      const EvalWindow& span = windows[static_cast<size_t>(w)];
      const Generation& out = outs[static_cast<size_t>(w - first)];
      // prompt_logprobs[j] is the window's id j + 1 given the ids before it.
      if (static_cast<int64_t>(out.prompt_logprobs.size()) != window - 1) {
        return internal_error("window " + std::to_string(w) + ": " +
                              std::to_string(out.prompt_logprobs.size()) +
                              " prompt logprobs, expected " + std::to_string(window - 1));
      }
      for (int64_t t = span.first_target; t < span.end; ++t) {
        result.nll -= out.prompt_logprobs[static_cast<size_t>(t - span.begin - 1)].logprob;
      }
      result.scored += span.end - span.first_target;
    }
    result.windows = last;
    if (progress) progress(last, total);
  }
  return result;
}

}  // namespace dsv4::runtime
