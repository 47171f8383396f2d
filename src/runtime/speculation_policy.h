// Whether a step of the running batch speculates, decided from the batch's own step times.
// A speculative step costs more than a plain one (its verify forward feeds k + 1 tokens a
// sequence, then the MTP block drafts) and emits τ tokens a sequence instead of one, so it pays
// when τ · plain > speculative, per unit of time: at batch 1 of a large model the verify forward
// costs about a plain step and speculation pays; where the verify forward's k extra rows a
// sequence and the drafting cost more than the kept drafts save (a large batch, whose step is
// no longer bound by reading the weights once; few drafts kept; a tiny model, whose steps are
// host work), it does not. The policy measures both kinds of step at each batch size (sizes grouped by powers
// of two), each a few times first, then keeps the faster per token, trying the other once in a
// while so that a change (longer contexts, another acceptance rate) is seen: after
// kFirstRetry steps, then twice as long after each retry that kept the choice (up to
// kLastRetry: the slower kind's cost then stays within a few percent), and from kFirstRetry
// again after one that turned it. Only steps that ran no prompt tokens are measured.
#pragma once

#include <cstdint>
#include <map>

namespace dsv4::runtime {

class SpeculationPolicy {
 public:
  // Steps of each kind measured at a batch size before the choice is made.
  static constexpr int64_t kFirstSteps = 3;
  // Steps of the chosen kind between retries of the other: the first and the longest gap.
  static constexpr int64_t kFirstRetry = 32, kLastRetry = 512;

  // Whether the next step of n_decoding decoding sequences (> 0) speculates.
  bool speculate(int64_t n_decoding);
  // A step that ran no prompt tokens: its kind, its time, and the tokens it emitted a sequence.
  void record(int64_t n_decoding, bool speculated, double seconds, double tokens_a_sequence);

 private:
  // Each kind's time (and the speculative steps' tokens): a running mean of the chosen kind's
  // steps (the newest weighs kWeight), the last retry's for the other.
  struct Group {
    double plain_seconds = 0, speculative_seconds = 0, speculative_tokens = 0;
    int64_t n_plain = 0, n_speculative = 0;
    int64_t since_retry = 0, retry_gap = kFirstRetry;
  };
  static constexpr double kWeight = 0.2;
  static int64_t group_of(int64_t n_decoding);
  static bool measured(const Group& g);
  static bool pays(const Group& g);
  std::map<int64_t, Group> groups_;
};

}  // namespace dsv4::runtime
