#include "grammar/utf8_ranges.h"

#include <algorithm>
#include <utility>

#include "tokenizer/utf8.h"

namespace dsv4::grammar {

std::vector<CodepointRange> normalize(std::vector<CodepointRange> ranges) {
  std::vector<CodepointRange> cut;
  for (const CodepointRange& r : ranges) {
    const uint32_t hi = std::min(r.hi, kMaxCodepoint);
    if (r.lo > hi) continue;
    // Drop the surrogates.
    if (r.lo < 0xD800 && hi >= 0xD800) {
      cut.push_back({r.lo, 0xD7FF});
      if (hi > 0xDFFF) cut.push_back({0xE000, hi});
    } else if (r.lo >= 0xD800 && r.lo <= 0xDFFF) {
      if (hi > 0xDFFF) cut.push_back({0xE000, hi});
    } else {
      cut.push_back({r.lo, hi});
    }
  }
  std::sort(cut.begin(), cut.end(),
            [](const CodepointRange& a, const CodepointRange& b) { return a.lo < b.lo; });
  std::vector<CodepointRange> merged;
  for (const CodepointRange& r : cut) {
    if (!merged.empty() && r.lo <= merged.back().hi + 1) {
      merged.back().hi = std::max(merged.back().hi, r.hi);
    } else {
      merged.push_back(r);
    }
  }
  return merged;
}

std::vector<CodepointRange> complement(const std::vector<CodepointRange>& ranges) {
  std::vector<CodepointRange> out;
  uint32_t next = 0;
  for (const CodepointRange& r : ranges) {
    if (r.lo > next) out.push_back({next, r.lo - 1});
    next = r.hi + 1;
  }
  if (next <= kMaxCodepoint) out.push_back({next, kMaxCodepoint});
  return normalize(std::move(out));
}

std::string utf8_encode(uint32_t codepoint) {
  std::string s;
  tokenizer::append_utf8(codepoint, s);
  return s;
}

namespace {

// [lo, hi] within one encoded length: split until every byte position ranges independently.
void split_same_length(uint32_t lo, uint32_t hi, std::vector<Expr>& out) {
  const size_t n = utf8_encode(lo).size();
  for (size_t i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;  // the low i continuation bytes
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split_same_length(lo, lo | m, out);
        split_same_length((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split_same_length(lo, (hi & ~m) - 1, out);
        split_same_length(hi & ~m, hi, out);
        return;
      }
    }
  }
  const std::string a = utf8_encode(lo), b = utf8_encode(hi);
  std::vector<Expr> bytes;
  for (size_t i = 0; i < a.size(); ++i) {
    bytes.push_back(Expr::byte_range(static_cast<uint8_t>(a[i]), static_cast<uint8_t>(b[i])));
  }
  out.push_back(Expr::seq(std::move(bytes)));
}

}  // namespace

Expr utf8_expr(const std::vector<CodepointRange>& ranges) {
  static constexpr uint32_t kLengthEnds[] = {0x7F, 0x7FF, 0xFFFF, kMaxCodepoint};
  std::vector<Expr> out;
  for (const CodepointRange& r : ranges) {
    uint32_t lo = r.lo;
    for (const uint32_t end : kLengthEnds) {
      if (lo > r.hi) break;
      if (lo > end) continue;
      const uint32_t hi = std::min(r.hi, end);
      split_same_length(lo, hi, out);
      lo = hi + 1;
    }
  }
  if (out.empty()) return Expr::alt({});  // no code point: matches nothing
  return Expr::alt(std::move(out));
}

}  // namespace dsv4::grammar
