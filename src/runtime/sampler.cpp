#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "base/check.h"

namespace dsv4::runtime {

Sampler::Sampler(const SamplingParams& params)
    : params_(params),
      rng_(params.seed),
      constraint_(params.constraint ? params.constraint->start() : nullptr) {}

int64_t argmax(std::span<const float> logits) {
  return std::max_element(logits.begin(), logits.end()) - logits.begin();
}

int64_t Sampler::sample(std::span<const float> logits) {
  int64_t token = 0;
  if (constraint_) {
    std::vector<float> masked = adjusted(logits);
    mask(masked);
    token = draw(masked);
    const bool moved = constraint_->advance(token);
    DSV4_CHECK(moved, "token %lld was drawn outside the constraint's mask",
               static_cast<long long>(token));
  } else {
    token = adjusts() ? draw(adjusted(logits)) : draw(logits);
  }
  ++counts_[token];
  return token;
}

void Sampler::mask(std::vector<float>& logits) {
  allowed_.resize((logits.size() + 31) / 32);
  constraint_->allowed_tokens(allowed_);
  for (size_t t = 0; t < logits.size(); ++t) {
    if (((allowed_[t / 32] >> (t % 32)) & 1) == 0) logits[t] = -INFINITY;
  }
}

bool Sampler::adjusts() const {
  return params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f ||
         !params_.logit_bias.empty();
}

std::vector<float> Sampler::adjusted(std::span<const float> logits) const {
  std::vector<float> out(logits.begin(), logits.end());
  for (const auto& [token, count] : counts_) {
    out[static_cast<size_t>(token)] -=
        params_.presence_penalty + params_.frequency_penalty * static_cast<float>(count);
  }
  for (const auto& [token, bias] : params_.logit_bias) out[static_cast<size_t>(token)] += bias;
  return out;
}

void Sampler::candidates(std::span<const float> logits, std::vector<int64_t>& order,
                         std::vector<double>& prob) const {
  // Candidates by descending logit; the top-k cut first, then the nucleus (the order
  // transformers' TopK- and TopPLogitsWarper apply them in).
  order.resize(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return logits[a] > logits[b]; });
  size_t n_keep = order.size();
  if (params_.top_k > 0) n_keep = std::min(n_keep, static_cast<size_t>(params_.top_k));
  // Probabilities of the kept candidates, in double, max-subtracted.
  prob.resize(n_keep);
  const double max = logits[order[0]];
  double sum = 0.0;
  for (size_t i = 0; i < n_keep; ++i) {
    sum += prob[i] = std::exp((logits[order[i]] - max) / params_.temperature);
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

int64_t Sampler::draw(std::span<const float> logits) {
  if (greedy()) return argmax(logits);
  std::vector<int64_t> order;
  std::vector<double> prob;
  candidates(logits, order, prob);
  std::discrete_distribution<size_t> pick(prob.begin(), prob.end());
  return order[pick(rng_)];
}

int64_t Sampler::best(std::span<const float> logits) const {
  return adjusts() ? argmax(adjusted(logits)) : argmax(logits);
}

std::vector<double> Sampler::distribution(std::span<const float> logits) const {
  std::vector<double> out(logits.size(), 0.0);
  if (greedy()) {
    out[static_cast<size_t>(best(logits))] = 1.0;
    return out;
  }
  std::vector<int64_t> order;
  std::vector<double> prob;
  if (adjusts()) {
    candidates(adjusted(logits), order, prob);
  } else {
    candidates(logits, order, prob);
  }
  const double sum = std::accumulate(prob.begin(), prob.end(), 0.0);
  for (size_t i = 0; i < order.size(); ++i) out[static_cast<size_t>(order[i])] = prob[i] / sum;
  return out;
}

int64_t Sampler::draw_from(std::span<const double> weights) {
  std::discrete_distribution<int64_t> pick(weights.begin(), weights.end());
  return pick(rng_);
}

bool Sampler::accept(double p) {
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng_) < p;
}

}  // namespace dsv4::runtime
