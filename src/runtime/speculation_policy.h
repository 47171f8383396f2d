// Whether a step of the running batch speculates, decided from the batch's own step times.
// A speculative step costs more than a plain one (its verify forward feeds k + 1 tokens a
// sequence, then the MTP block drafts) and emits τ tokens a sequence instead of one, so it pays
// when τ · plain > speculative, per unit of time: at batch 1 of a large model the verify forward
// costs about a plain step and speculation pays; where the verify forward grows with the batch
// (its multi-token rows attend sequence by sequence) or the host dominates (a tiny model), it
// does not. The policy measures both kinds of step at each batch size (sizes grouped by powers
// of two), each a few times first, then keeps the faster per token, trying the other now and
// then so that a change (longer contexts, another acceptance rate) is seen. Only steps that
// ran no prompt tokens are measured.
#pragma once

#include <cstdint>
#include <map>

namespace dsv4::runtime {

class SpeculationPolicy {
 public:
  // Steps of each kind measured at a batch size before the choice is made.
  static constexpr int64_t kFirstSteps = 3;
  // Once chosen, every this many steps at that size run the other kind once.
  static constexpr int64_t kRetryEvery = 32;

  // Whether the next step of n_decoding decoding sequences (> 0) speculates.
  bool speculate(int64_t n_decoding);
  // A step that ran no prompt tokens: its kind, its time, and the tokens it emitted a sequence.
  void record(int64_t n_decoding, bool speculated, double seconds, double tokens_a_sequence);

 private:
  // Running means (exponential: the newest step weighs kWeight, or kRetryWeight for the kind not
  // chosen, whose rare steps must turn the choice within a few retries) of one batch-size group.
  struct Group {
    double plain_seconds = 0, speculative_seconds = 0, speculative_tokens = 0;
    int64_t n_plain = 0, n_speculative = 0, n_chosen = 0;
  };
  static constexpr double kWeight = 0.2, kRetryWeight = 0.5;
  static int64_t group_of(int64_t n_decoding);
  static bool pays(const Group& g);
  std::map<int64_t, Group> groups_;
};

}  // namespace dsv4::runtime
