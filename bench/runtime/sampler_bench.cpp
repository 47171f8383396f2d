// sampler_bench: a greedy draw's host time at a real vocabulary, the part of a decode step that
// grows with the batch on the host (each sequence's row is drawn between two steps). Rows of V
// random logits (8, drawn in turn); each way first checked against std::max_element's first
// largest, then timed: µs a draw, the median of 5 runs of 400 draws. The ways: std::max_element
// (the same-run baseline: the scan argmax was), runtime::argmax, a greedy Sampler's draw
// without a mask and with the engine's drawable-ids mask allowing all but 64 ids; and a token's
// logprob (asked for each drawn token, and for every prompt row with prompt_logprobs) alone and
// with 5 alternatives (their first checked: the first largest).
// A program, not a test; results in docs/bench.md.
//   usage: sampler_bench [V=129280]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "runtime/logprobs.h"
#include "runtime/sampler.h"

namespace dsv4::bench {
namespace {

constexpr int kRows = 8, kDraws = 400, kRuns = 5;

// The median over kRuns of the µs a draw of `draw(row)` takes.
double median_us(const std::vector<std::vector<float>>& rows,
                 const std::function<int64_t(const std::vector<float>&)>& draw) {
  std::vector<double> runs;
  int64_t sink = 0;
  for (int run = 0; run < kRuns; ++run) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kDraws; ++i) sink += draw(rows[i % kRows]);
    const std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - start;
    runs.push_back(took.count() / kDraws);
  }
  std::sort(runs.begin(), runs.end());
  if (sink == -1) std::puts("");  // keeps the draws
  return runs[kRuns / 2];
}

int run(int64_t vocab) {
  std::mt19937_64 rng(std::random_device{}());
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<std::vector<float>> rows(kRows, std::vector<float>(static_cast<size_t>(vocab)));
  for (auto& row : rows) {
    for (float& x : row) x = normal(rng);
  }
  auto drawable = std::make_shared<runtime::TokenMask>(static_cast<size_t>((vocab + 31) / 32), ~0u);
  std::uniform_int_distribution<int64_t> id(0, vocab - 1);
  for (int hole = 0; hole < 64; ++hole) {
    const int64_t t = id(rng);
    (*drawable)[static_cast<size_t>(t / 32)] &= ~(1u << (t % 32));
  }
  const auto scan = [](const std::vector<float>& row) {
    return static_cast<int64_t>(std::max_element(row.begin(), row.end()) - row.begin());
  };
  runtime::Sampler plain(SamplingParams{});
  runtime::Sampler masked(SamplingParams{}, drawable);
  const std::vector<std::pair<std::string, std::function<int64_t(const std::vector<float>&)>>>
      ways = {
          {"std::max_element (before)", scan},
          {"runtime::argmax", [](const auto& row) { return runtime::argmax(row); }},
          {"greedy Sampler::sample", [&](const auto& row) { return plain.sample(row); }},
          {"greedy, all but 64 ids drawable", [&](const auto& row) { return masked.sample(row); }},
          {"token_logprob, the token's alone",
           [](const auto& row) { return runtime::token_logprob(row, 0, 0).token; }},
          {"token_logprob, 5 alternatives",
           [](const auto& row) { return runtime::token_logprob(row, 0, 5).top.front().first; }}};
  constexpr size_t kMasked = 3, kFirstLogprob = 4;  // ways[kFirstLogprob …]: the logprobs
  for (const auto& row : rows) {
    const int64_t want = scan(row);
    const bool allowed = ((*drawable)[static_cast<size_t>(want / 32)] >> (want % 32)) & 1;
    for (size_t w = 0; w < kFirstLogprob; ++w) {
      if ((w != kMasked || allowed) && ways[w].second(row) != want) {
        std::fprintf(stderr, "%s drew another token than the first largest\n",
                     ways[w].first.c_str());
        return 1;
      }
    }
    // The most likely alternative is the first largest, with the largest logprob.
    const dsv4::TokenLogprob lp = runtime::token_logprob(row, want, 5);
    if (lp.top.empty() || lp.top.front().first != want || lp.top.front().second != lp.logprob) {
      std::fprintf(stderr, "token_logprob ranked another token first\n");
      return 1;
    }
  }
  std::printf("greedy draws of a %lld-wide row, µs a draw (median of %d runs of %d)\n\n",
              static_cast<long long>(vocab), kRuns, kDraws);
  std::printf("| way | µs |\n|---|---:|\n");
  for (const auto& [name, draw] : ways)
    std::printf("| %s | %.1f |\n", name.c_str(), median_us(rows, draw));
  return 0;
}

}  // namespace
}  // namespace dsv4::bench

int main(int argc, char** argv) {
  const long long vocab = argc > 1 ? std::atoll(argv[1]) : 129280;
  if (vocab < 1 || vocab > (1LL << 30)) {
    std::fprintf(stderr, "sampler_bench: V must be 1 … 2^30, not %s\n", argv[1]);
    return 2;
  }
  return dsv4::bench::run(vocab);
}
