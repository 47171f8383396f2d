#include "acceptance.h"

#include <cstdio>

namespace dsv4::tools {

double tokens_a_verify_step(const EngineStats& stats) {
  // Every verify step that drafted at all drafted a first token.
  const int64_t n_steps = stats.drafted_at.empty() ? 0 : stats.drafted_at.front();
  return n_steps > 0 ? 1.0 + static_cast<double>(stats.accepted_tokens) /
                                 static_cast<double>(n_steps)
                     : 1.0;
}

std::string describe_acceptance(const EngineStats& stats) {
  const auto percent = [](int64_t part, int64_t whole) {
    return whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
  };
  char text[256];
  std::snprintf(text, sizeof text, "%lld of %lld drafts accepted (%.1f%%), %.2f tokens a verify step",
                static_cast<long long>(stats.accepted_tokens),
                static_cast<long long>(stats.drafted_tokens),
                percent(stats.accepted_tokens, stats.drafted_tokens), tokens_a_verify_step(stats));
  std::string line = std::string(text) + "; by position:";
  for (size_t i = 0; i < stats.drafted_at.size(); ++i) {
    std::snprintf(text, sizeof text, " %zu: %.1f%% of %lld", i + 1,
                  percent(stats.accepted_at[i], stats.drafted_at[i]),
                  static_cast<long long>(stats.drafted_at[i]));
    line += text;
  }
  if (stats.draft_runs > 0) {
    std::snprintf(text, sizeof text, "; drafting %.3f ms a run (%lld runs)",
                  1e3 * stats.draft_seconds / static_cast<double>(stats.draft_runs),
                  static_cast<long long>(stats.draft_runs));
    line += text;
  }
  return line;
}

}  // namespace dsv4::tools
