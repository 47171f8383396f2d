// GrammarBuilder::ordered (members in order, optional ones left out, a separator between the
// ones written) against a brute force written here: every document it should accept is listed
// by enumerating the subsets of the members, and every candidate - each sequence of members,
// with leading, trailing and doubled separators - must be accepted exactly when listed. Lists
// longer than a block (GrammarBuilder::kOrderedBlock), which go through rules calling each
// other, are checked the same way on random documents and their mutations.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <set>
#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "grammar_testing.h"
#include "testing/random.h"

namespace dsv4::grammar {
namespace {

using testing::matches;

Grammar ordered_grammar(const std::vector<std::string>& members, const std::vector<bool>& needed,
                        const std::string& separator) {
  GrammarBuilder b;
  std::vector<Expr> exprs;
  for (const std::string& m : members) exprs.push_back(Expr::literal(m));
  const int32_t root = b.add_rule("root");
  Result<Expr> body = b.ordered("members", std::move(exprs), needed, Expr::literal(separator));
  EXPECT_TRUE(body.ok()) << body.status().to_string();
  b.define(root, *std::move(body));
  Result<Grammar> g = b.build(root);
  EXPECT_TRUE(g.ok()) << g.status().to_string();
  return std::move(g).value();
}

std::string join(const std::vector<std::string>& members, const std::vector<size_t>& picked,
                 const std::string& separator) {
  std::string out;
  for (size_t i = 0; i < picked.size(); ++i) {
    if (i > 0) out.append(separator);
    out.append(members[picked[i]]);
  }
  return out;
}

// Whether `picked` is a document's members: increasing, every needed one there.
bool valid(const std::vector<size_t>& picked, const std::vector<bool>& needed) {
  for (size_t i = 1; i < picked.size(); ++i) {
    if (picked[i] <= picked[i - 1]) return false;
  }
  for (size_t j = 0; j < needed.size(); ++j) {
    if (needed[j] && std::find(picked.begin(), picked.end(), j) == picked.end()) return false;
  }
  return true;
}

// The document with `picked`'s members and its separator faults: one before, one after, and
// each gap's separator doubled.
std::vector<std::string> with_faults(const std::vector<std::string>& members,
                                     const std::vector<size_t>& picked,
                                     const std::string& separator) {
  const std::string doc = join(members, picked, separator);
  std::vector<std::string> out = {doc, std::string(separator).append(doc),
                                  std::string(doc).append(separator)};
  for (size_t gap = 1; gap < picked.size(); ++gap) {
    std::vector<size_t> head(picked.begin(), picked.begin() + static_cast<std::ptrdiff_t>(gap));
    std::vector<size_t> tail(picked.begin() + static_cast<std::ptrdiff_t>(gap), picked.end());
    out.push_back(join(members, head, separator)
                      .append(separator)
                      .append(separator)
                      .append(join(members, tail, separator)));
  }
  return out;
}

TEST(OrderedTest, AcceptsExactlyTheMembersInOrderUpToSix) {
  dsv4::testing::SeededRng rng;
  // Members that are prefixes of each other, so that the automaton reads them side by side.
  const std::vector<std::string> all = {"a", "ab", "b", "abc", "ba", "c"};
  const std::string separator = ",";
  for (size_t n = 0; n <= all.size(); ++n) {
    for (int trial = 0; trial < 3; ++trial) {
      const std::vector<std::string> members(all.begin(),
                                             all.begin() + static_cast<std::ptrdiff_t>(n));
      std::vector<bool> needed(n);
      for (size_t j = 0; j < n; ++j) needed[j] = trial > 0 && rng.uniform(0, 1) < 0.3;
      // Every valid document: the subsets (in order) that hold every needed member.
      std::set<std::string> documents;
      for (uint32_t mask = 0; mask < (1u << n); ++mask) {
        std::vector<size_t> picked;
        for (size_t j = 0; j < n; ++j) {
          if (mask >> j & 1) picked.push_back(j);
        }
        if (valid(picked, needed)) documents.insert(join(members, picked, separator));
      }
      const Grammar g = ordered_grammar(members, needed, separator);
      // Candidates: every sequence of up to n members (repeats and any order), with faults.
      std::vector<std::vector<size_t>> sequences = {{}};
      for (size_t at = 0; at < sequences.size(); ++at) {
        const std::vector<size_t> s = sequences[at];
        for (const std::string& text : with_faults(members, s, separator)) {
          SCOPED_TRACE("n " + std::to_string(n) + " trial " + std::to_string(trial) + ": " + text);
          EXPECT_EQ(matches(g, text), documents.count(text) == 1);
        }
        if (s.size() == n) continue;
        for (size_t j = 0; j < n; ++j) {
          sequences.push_back(s);
          sequences.back().push_back(j);
        }
      }
    }
  }
}

TEST(OrderedTest, ListsLongerThanABlockKeepTheSameLanguage) {
  dsv4::testing::SeededRng rng;
  const size_t n = 2 * GrammarBuilder::kOrderedBlock + 5;
  std::vector<std::string> members;
  for (size_t j = 0; j < n; ++j) members.push_back(std::string("k").append(std::to_string(j)));
  const std::string separator = ", ";
  for (const double p_needed : {0.0, 0.02, 0.2}) {
    std::vector<bool> needed(n);
    for (size_t j = 0; j < n; ++j) needed[j] = rng.uniform(0, 1) < p_needed;
    const Grammar g = ordered_grammar(members, needed, separator);
    for (int trial = 0; trial < 60; ++trial) {
      // A valid document (few members or many), then mutations of it.
      const double p_in = trial % 2 == 0 ? 0.03 : 0.5;
      std::vector<size_t> picked;
      for (size_t j = 0; j < n; ++j) {
        if (needed[j] || rng.uniform(0, 1) < p_in) picked.push_back(j);
      }
      std::vector<std::vector<size_t>> variants = {picked};
      if (!picked.empty()) {
        const auto at =
            static_cast<size_t>(rng.uniform_int(0, static_cast<int64_t>(picked.size()) - 1));
        std::vector<size_t> dropped = picked, repeated = picked;
        dropped.erase(dropped.begin() + static_cast<std::ptrdiff_t>(at));
        repeated.insert(repeated.begin() + static_cast<std::ptrdiff_t>(at), picked[at]);
        variants.push_back(dropped);
        variants.push_back(repeated);
        if (at + 1 < picked.size()) {
          std::vector<size_t> swapped = picked;
          std::swap(swapped[at], swapped[at + 1]);
          variants.push_back(swapped);
        }
      }
      for (const std::vector<size_t>& v : variants) {
        const std::vector<std::string> texts = with_faults(members, v, separator);
        for (size_t t = 0; t < texts.size(); ++t) {
          SCOPED_TRACE(texts[t]);
          EXPECT_EQ(matches(g, texts[t]), t == 0 && valid(v, needed));
        }
      }
    }
  }
}

}  // namespace
}  // namespace dsv4::grammar
