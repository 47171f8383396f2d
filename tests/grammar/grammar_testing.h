// Helpers of the grammar tests: whole-text matching and random walks through a grammar.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "testing/random.h"

namespace dsv4::grammar::testing {

// Whether `text` is a whole document of `g`.
inline bool matches(const Grammar& g, std::string_view text) {
  Matcher m(g);
  return m.advance(text) && m.accepted();
}

// The bytes `m` may read next.
inline std::vector<uint8_t> allowed_bytes(Matcher& m) {
  Stepper stepper(m.grammar());
  std::vector<uint8_t> out;
  StackSet next;
  for (int b = 0; b < 256; ++b) {
    stepper.step(m.pool(), m.set(), static_cast<uint8_t>(b), next);
    if (!next.stacks.empty() || next.accepted) out.push_back(static_cast<uint8_t>(b));
  }
  return out;
}

// A random document of `g`: random allowed bytes, ending when the text is complete with
// probability 1/4, and, past `soft_limit` bytes, taking bytes that close strings, arrays and
// objects when it can. False when no end came within `hard_limit` bytes.
inline bool random_document(const Grammar& g, dsv4::testing::SeededRng& rng, std::string& out,
                            size_t soft_limit = 64, size_t hard_limit = 4096) {
  Matcher m(g);
  out.clear();
  while (out.size() < hard_limit) {
    if (m.accepted() && (m.set().stacks.empty() || rng.uniform(0, 1) < 0.25)) return true;
    const std::vector<uint8_t> bytes = allowed_bytes(m);
    if (bytes.empty()) return false;
    uint8_t pick =
        bytes[static_cast<size_t>(rng.uniform_int(0, static_cast<int64_t>(bytes.size()) - 1))];
    if (out.size() > soft_limit) {
      for (const uint8_t closing : {'"', '}', ']', ','}) {
        if (std::find(bytes.begin(), bytes.end(), closing) != bytes.end() &&
            rng.uniform(0, 1) < 0.7) {
          pick = closing;
          break;
        }
      }
    }
    const char c = static_cast<char>(pick);
    if (!m.advance(std::string_view(&c, 1))) return false;
    out += c;
  }
  return false;
}

}  // namespace dsv4::grammar::testing
