// A test constraint (dsv4/structured_output.h) whose mask depends on every token before: the
// next token t must have t % kModulus == (the count plus the sum of the tokens so far) %
// kModulus. Two masks in a row differ unless the residue is kModulus - 1, so a mask taken at the
// wrong position, or a rolled-back token still counted, lets a wrong token through. Each state records the tokens it stands past, which the test reads back.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "dsv4/structured_output.h"

namespace dsv4::testing {

class ResidueConstraint final : public TokenConstraint {
 public:
  static constexpr int64_t kModulus = 3;

  explicit ResidueConstraint(int64_t vocab) : vocab_(vocab) {}

  // Whether `tokens` could have been drawn under this constraint from its start.
  static bool allows(std::span<const int64_t> tokens) {
    int64_t sum = 0;
    for (const int64_t t : tokens) {
      if (t % kModulus != sum % kModulus) return false;
      sum += t + 1;
    }
    return true;
  }

  std::unique_ptr<TokenConstraintState> start() const override {
    const std::lock_guard<std::mutex> lock(mutex_);
    histories_.push_back(std::make_shared<std::vector<int64_t>>());
    return std::make_unique<State>(histories_.back());
  }
  int64_t vocab_size() const override { return vocab_; }
  // The tokens each state (in start() order) stands past now.
  std::vector<std::vector<int64_t>> histories() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::vector<int64_t>> out;
    for (const auto& h : histories_) out.push_back(*h);
    return out;
  }

 private:
  struct State final : TokenConstraintState {
    explicit State(std::shared_ptr<std::vector<int64_t>> h) : history(std::move(h)) {}
    int64_t residue() const {
      int64_t sum = 0;
      for (const int64_t t : *history) sum += t + 1;
      return sum % kModulus;
    }
    void allowed_tokens(std::span<uint32_t> words) override {
      std::fill(words.begin(), words.end(), 0u);
      for (size_t t = static_cast<size_t>(residue()); t < words.size() * 32; t += kModulus) {
        words[t / 32] |= 1u << (t % 32);
      }
    }
    bool advance(int64_t token) override {
      if (token % kModulus != residue()) return false;
      history->push_back(token);
      return true;
    }
    void rollback(int64_t n) override {
      history->resize(history->size() - static_cast<size_t>(n));
    }
    std::shared_ptr<std::vector<int64_t>> history;
  };

  int64_t vocab_;
  mutable std::mutex mutex_;
  mutable std::vector<std::shared_ptr<std::vector<int64_t>>> histories_;  // under mutex_
};

}  // namespace dsv4::testing
