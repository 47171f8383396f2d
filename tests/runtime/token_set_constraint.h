// A test constraint (structured outputs' interface, dsv4/structured_output.h) that allows a
// fixed set of tokens at every step and counts the tokens it was advanced by (less those
// rolled back).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "dsv4/structured_output.h"

namespace dsv4::testing {

class TokenSet final : public TokenConstraint {
 public:
  // allowed[t]: token t may be drawn; its size is the vocabulary's.
  explicit TokenSet(std::vector<bool> allowed) : allowed_(std::move(allowed)) {}

  std::unique_ptr<TokenConstraintState> start() const override {
    return std::make_unique<State>(*this);
  }
  int64_t vocab_size() const override { return static_cast<int64_t>(allowed_.size()); }
  bool allows(int64_t token) const { return allowed_[static_cast<size_t>(token)]; }
  // Tokens advanced by, over every sequence that used it.
  int64_t n_advanced() const { return n_advanced_.load(); }

 private:
  struct State final : TokenConstraintState {
    explicit State(const TokenSet& s) : set(s) {}
    void allowed_tokens(std::span<uint32_t> words) override {
      std::fill(words.begin(), words.end(), 0u);
      for (size_t t = 0; t < set.allowed_.size(); ++t) {
        if (set.allowed_[t]) words[t / 32] |= 1u << (t % 32);
      }
    }
    bool advance(int64_t token) override {
      if (!set.allows(token)) return false;
      ++set.n_advanced_;
      return true;
    }
    void rollback(int64_t n) override { set.n_advanced_ -= n; }
    const TokenSet& set;
  };

  std::vector<bool> allowed_;
  mutable std::atomic<int64_t> n_advanced_{0};
};

}  // namespace dsv4::testing
