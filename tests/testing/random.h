// SeededRng: the random source of every test. A fresh seed each run (std::random_device) so
// repeated runs explore different inputs; the seed is attached to every failure message through
// SCOPED_TRACE, and DSV4_TEST_SEED=<n> replays it.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <source_location>
#include <string>

namespace dsv4::testing {

class SeededRng {
 public:
  explicit SeededRng(std::source_location where = std::source_location::current())
      : seed_(pick_seed()),
        engine_(seed_),
        trace_(where.file_name(), static_cast<int>(where.line()),
               "DSV4_TEST_SEED=" + std::to_string(seed_)) {}
  SeededRng(const SeededRng&) = delete;
  SeededRng& operator=(const SeededRng&) = delete;

  uint64_t seed() const { return seed_; }
  std::mt19937_64& engine() { return engine_; }
  // Uniform in [lo, hi].
  int64_t uniform_int(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(engine_);
  }
  double uniform(double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(engine_);
  }

 private:
  static uint64_t pick_seed() {
    if (const char* fixed = std::getenv("DSV4_TEST_SEED")) return std::strtoull(fixed, nullptr, 10);
    std::random_device device;
    return (uint64_t{device()} << 32) | device();
  }

  uint64_t seed_;
  std::mt19937_64 engine_;
  ::testing::ScopedTrace trace_;
};

}  // namespace dsv4::testing
