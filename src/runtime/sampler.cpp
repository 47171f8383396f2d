#include "runtime/sampler.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "base/check.h"

namespace dsv4::runtime {

Sampler::Sampler(const SamplingParams& params, std::shared_ptr<const TokenMask> drawable)
    : params_(params),
      rng_(params.seed),
      drawable_(std::move(drawable)),
      constraint_(params.constraint ? params.constraint->start() : nullptr) {
  for (const auto& [token, bias] : params_.logit_bias) {
    const auto t = static_cast<size_t>(token);
    if (bias_.size() <= t) bias_.resize(t + 1, 0.0f);
    bias_[t] += bias;
  }
}

namespace {

// The first index of the largest of x[0, n) other than NaN and its value (index −1 when all
// are NaN). A greedy step scans a 129280-wide row a sequence, on the host between two decode
// steps; std::max_element's one dependent compare an element is ~0.1 ms of that a row. kLanes
// independent running maxima (each keeping its first largest, from its first number on)
// vectorize, and the lanes' winners then give the largest value's smallest index.
struct Best {
  int64_t index;
  float value;
};
__attribute__((target_clones("avx2", "default"))) Best first_max(const float* x, int64_t n) {
  constexpr int kLanes = 16;
  Best best{-1, 0.0f};
  int64_t i = 0;
  if (n >= 2 * kLanes && n <= std::numeric_limits<int32_t>::max()) {
    float most[kLanes];
    int32_t at[kLanes];  // −1: no number yet
    for (int j = 0; j < kLanes; ++j) {
      most[j] = 0.0f;
      at[j] = -1;
    }
    for (; i + kLanes <= n; i += kLanes) {
      for (int j = 0; j < kLanes; ++j) {
        const float v = x[i + j];
        const bool larger = v > most[j] || (at[j] < 0 && v == v);
        most[j] = larger ? v : most[j];
        at[j] = larger ? static_cast<int32_t>(i + j) : at[j];
      }
    }
    for (int j = 0; j < kLanes; ++j) {
      if (at[j] >= 0 && (best.index < 0 || most[j] > best.value ||
                         (most[j] == best.value && at[j] < best.index))) {
        best = {at[j], most[j]};
      }
    }
  }
  for (; i < n; ++i) {
    if (x[i] == x[i] && (best.index < 0 || x[i] > best.value)) best = {i, x[i]};
  }
  return best;
}

}  // namespace

int64_t argmax(std::span<const float> logits) {
  // std::max_element's choice: a NaN is never larger, and the first element stands if it is one.
  if (logits.empty() || std::isnan(logits[0])) return 0;
  return first_max(logits.data(), static_cast<int64_t>(logits.size())).index;
}

// ---- Masks ----

void Sampler::make_mask(TokenMask& mask) {
  mask.resize(static_cast<size_t>((params_.constraint->vocab_size() + 31) / 32));
  constraint_->allowed_tokens(mask);
  if (!drawable_) return;
  DSV4_CHECK(drawable_->size() == mask.size(), "the drawable ids have %zu words, the mask %zu",
             drawable_->size(), mask.size());
  for (size_t w = 0; w < mask.size(); ++w) mask[w] &= (*drawable_)[w];
}

const TokenMask* Sampler::mask_at(std::span<const int64_t> ahead) {
  if (!constraint_) return drawable_.get();
  DSV4_CHECK(static_cast<int64_t>(ahead.size()) <= TokenConstraintState::kMaxRollback,
             "%zu tokens ahead of the constraint", ahead.size());
  size_t common = 0;
  while (common < ahead.size() && common < ahead_.size() && ahead[common] == ahead_[common]) {
    ++common;
  }
  if (common == ahead.size() && !masks_[common].empty()) return &masks_[common];  // made
  // The constraint stands past ahead_: back to where ahead_ and `ahead` part, then on.
  if (common < ahead_.size()) {
    constraint_->rollback(static_cast<int64_t>(ahead_.size() - common));
    ahead_.resize(common);
    masks_.resize(common + 1);
  }
  for (size_t i = common; i < ahead.size(); ++i) {
    const bool moved = constraint_->advance(ahead[i]);
    DSV4_CHECK(moved, "drafted token %lld is outside the constraint's mask",
               static_cast<long long>(ahead[i]));
    ahead_.push_back(ahead[i]);
    masks_.emplace_back();
  }
  make_mask(masks_.back());
  return &masks_.back();
}

void Sampler::prepare_masks() {
  const std::lock_guard<std::mutex> lock(*mutex_);
  // Where the constraint stands: the next token's mask, or past the drafts the bonus token's
  // (the drafts' own positions made theirs as they were drawn).
  if (constraint_ && masks_.back().empty()) make_mask(masks_.back());
}

void Sampler::commit_locked(int64_t token) {
  if (!params_.logit_bias.empty() || params_.presence_penalty != 0.0f ||
      params_.frequency_penalty != 0.0f) {
    const int64_t count = ++counts_[token];
    const auto t = static_cast<size_t>(token);
    if (penalty_.size() <= t) penalty_.resize(t + 1, 0.0f);
    penalty_[t] = params_.presence_penalty + params_.frequency_penalty * static_cast<float>(count);
  }
  if (!constraint_) return;
  if (!ahead_.empty() && ahead_.front() == token) {
    // A kept draft: the constraint is past it already, and its successors' masks stand.
    ahead_.erase(ahead_.begin());
    masks_.erase(masks_.begin());
    return;
  }
  // Any other token: the drafts go, as if never drawn.
  if (!ahead_.empty()) constraint_->rollback(static_cast<int64_t>(ahead_.size()));
  ahead_.clear();
  masks_.resize(1);
  const bool moved = constraint_->advance(token);
  DSV4_CHECK(moved, "token %lld was drawn outside the constraint's mask",
             static_cast<long long>(token));
  masks_.front().clear();
}

void Sampler::commit(int64_t token) {
  const std::lock_guard<std::mutex> lock(*mutex_);
  commit_locked(token);
}

// ---- Draws ----

template <typename F>
void Sampler::for_each_allowed(const TokenMask* mask, size_t n, F&& f) {
  if (mask == nullptr) {
    for (size_t t = 0; t < n; ++t) f(t);
    return;
  }
  DSV4_CHECK(mask->size() == (n + 31) / 32, "a mask of %zu words for %zu logits", mask->size(), n);
  for (size_t w = 0; w < mask->size(); ++w) {
    uint32_t bits = (*mask)[w];
    if (bits == ~0u && w * 32 + 32 <= n) {
      for (size_t t = w * 32; t < w * 32 + 32; ++t) f(t);
      continue;
    }
    while (bits != 0) {
      const size_t t = w * 32 + static_cast<size_t>(std::countr_zero(bits));
      bits &= bits - 1;
      if (t < n) f(t);
    }
  }
}

float Sampler::adjusted(std::span<const float> logits, size_t t) const {
  float x = logits[t];
  if (t < penalty_.size()) x -= penalty_[t];
  if (t < bias_.size()) x += bias_[t];
  return x;
}

int64_t Sampler::best_masked(std::span<const float> logits, const TokenMask* mask) const {
  int64_t best = -1;
  float best_logit = 0.0f;
  auto consider = [&](size_t t, float x) {
    if (best < 0 || x > best_logit) {
      best = static_cast<int64_t>(t);
      best_logit = x;
    }
  };
  if (penalty_.empty() && bias_.empty()) {
    if (mask == nullptr) return argmax(logits);
    // The row's first largest is the first largest the mask allows where the mask allows it and
    // its first allowed logit is a number (consider() keeps the first allowed whatever it is):
    // then one vector scan serves, as it nearly always does under the drawable-ids mask.
    DSV4_CHECK(mask->size() == (logits.size() + 31) / 32, "a mask of %zu words for %zu logits",
               mask->size(), logits.size());
    const auto allows = [&](size_t t) { return ((*mask)[t / 32] >> (t % 32)) & 1; };
    const auto top = static_cast<size_t>(argmax(logits));
    const auto word = std::find_if(mask->begin(), mask->end(), [](uint32_t w) { return w != 0; });
    if (word != mask->end()) {
      const size_t first = static_cast<size_t>(word - mask->begin()) * 32 +
                           static_cast<size_t>(std::countr_zero(*word));
      if (first < logits.size() && !std::isnan(logits[first]) && allows(top)) {
        return static_cast<int64_t>(top);
      }
    }
    for_each_allowed(mask, logits.size(), [&](size_t t) { consider(t, logits[t]); });
  } else {
    for_each_allowed(mask, logits.size(), [&](size_t t) { consider(t, adjusted(logits, t)); });
  }
  DSV4_CHECK(best >= 0, "no token may come next");
  return best;
}

void Sampler::candidates(std::span<const float> logits, const TokenMask* mask,
                         std::vector<int64_t>& order, std::vector<double>& prob) const {
  // Candidates by descending logit; the top-k cut first, then the nucleus (the order
  // transformers' TopK- and TopPLogitsWarper apply them in).
  order.clear();
  for_each_allowed(mask, logits.size(), [&](size_t t) { order.push_back(static_cast<int64_t>(t)); });
  DSV4_CHECK(!order.empty(), "no token may come next");
  auto value = [&](int64_t t) { return adjusted(logits, static_cast<size_t>(t)); };
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return value(a) > value(b); });
  size_t n_keep = order.size();
  if (params_.top_k > 0) n_keep = std::min(n_keep, static_cast<size_t>(params_.top_k));
  // Probabilities of the kept candidates, in double, max-subtracted.
  prob.resize(n_keep);
  const double max = value(order[0]);
  double sum = 0.0;
  for (size_t i = 0; i < n_keep; ++i) {
    sum += prob[i] = std::exp((value(order[i]) - max) / params_.temperature);
  }
  if (params_.top_p < 1.0f) {
    // Smallest prefix whose mass reaches top_p (always at least one token).
    double mass = 0.0;
    size_t n_nucleus = 0;
    while (n_nucleus < n_keep && mass < params_.top_p * sum) mass += prob[n_nucleus++];
    n_keep = std::max<size_t>(n_nucleus, 1);
    prob.resize(n_keep);
  }
  order.resize(prob.size());
}

int64_t Sampler::draw(std::span<const float> logits, const TokenMask* mask) {
  if (greedy()) return best_masked(logits, mask);
  std::vector<int64_t> order;
  std::vector<double> prob;
  candidates(logits, mask, order, prob);
  std::discrete_distribution<size_t> pick(prob.begin(), prob.end());
  return order[pick(rng_)];
}

int64_t Sampler::sample(std::span<const float> logits) {
  const std::lock_guard<std::mutex> lock(*mutex_);
  const int64_t token = draw(logits, mask_at({}));
  commit_locked(token);
  return token;
}

int64_t Sampler::best(std::span<const float> logits, std::span<const int64_t> ahead) {
  const std::lock_guard<std::mutex> lock(*mutex_);
  return best_masked(logits, mask_at(ahead));
}

std::vector<double> Sampler::distribution(std::span<const float> logits,
                                          std::span<const int64_t> ahead) {
  const std::lock_guard<std::mutex> lock(*mutex_);
  const TokenMask* mask = mask_at(ahead);
  std::vector<double> out(logits.size(), 0.0);
  if (greedy()) {
    out[static_cast<size_t>(best_masked(logits, mask))] = 1.0;
    return out;
  }
  std::vector<int64_t> order;
  std::vector<double> prob;
  candidates(logits, mask, order, prob);
  const double sum = std::accumulate(prob.begin(), prob.end(), 0.0);
  for (size_t i = 0; i < order.size(); ++i) out[static_cast<size_t>(order[i])] = prob[i] / sum;
  return out;
}

int64_t Sampler::draw_from(std::span<const double> weights) {
  const std::lock_guard<std::mutex> lock(*mutex_);
  std::discrete_distribution<int64_t> pick(weights.begin(), weights.end());
  return pick(rng_);
}

bool Sampler::accept(double p) {
  const std::lock_guard<std::mutex> lock(*mutex_);
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng_) < p;
}

}  // namespace dsv4::runtime
