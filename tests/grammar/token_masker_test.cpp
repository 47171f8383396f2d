// Token masks against brute force: at every step of random token-level walks, the mask the
// trie walk and its per-state cache give must equal, token for token, what advancing a copy of
// the matcher over each token's bytes says.
#include "grammar/token_masker.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "grammar/json_schema.h"
#include "grammar_testing.h"

namespace dsv4::grammar {
namespace {

// An object of more optional properties than GrammarBuilder::kOrderedBlock: its members go
// through rules that call each other, so several stacks read a key's first bytes.
std::string many_properties() {
  std::string properties;
  for (int i = 0; i < 100; ++i) {
    if (i > 0) properties.append(", ");
    properties.append("\"k")
        .append(std::to_string(i))
        .append(i % 2 ? "\": {\"type\": \"integer\"}" : "\": {\"type\": \"string\"}");
  }
  return std::string(R"({"type": "object", "required": ["k70"], "properties": {)")
      .append(properties)
      .append("}}");
}

const std::vector<std::string> kSchemas = {
    R"({"type": "object", "additionalProperties": false,
        "properties": {"name": {"type": "string"}, "n": {"type": "integer"},
                       "kids": {"type": "array", "items": {"$ref": "#"}, "maxItems": 2},
                       "kind": {"enum": ["a", "ab", "abc"]}},
        "required": ["name", "kids"]})",
    R"({"anyOf": [{"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"],
                   "additionalProperties": false},
                  {"type": "object", "properties": {"b": {"type": "number"}}, "required": ["b"],
                   "additionalProperties": false},
                  {"type": "array", "items": {"type": ["string", "null"]}}]})",
    R"({"type": "string", "pattern": "^[a-c]+(x|yz)?$"})",
    many_properties(),
};

// Single bytes (each id its byte, but one left out), then pieces of random documents: the
// multi-byte tokens a BPE vocabulary has for JSON (`":"`, `"},{"`, ...).
std::vector<std::string> test_vocabulary(dsv4::testing::SeededRng& rng) {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
  tokens['q'] = "";  // a special token: never allowed
  std::set<std::string> pieces;
  for (const std::string& schema : kSchemas) {
    Result<Grammar> g = json_schema_grammar(std::string_view(schema));
    EXPECT_TRUE(g.ok());
    for (int i = 0; i < 40; ++i) {
      std::string doc;
      if (!testing::random_document(*g, rng, doc, 24)) continue;
      for (int k = 0; k < 20; ++k) {
        const auto at =
            static_cast<size_t>(rng.uniform_int(0, static_cast<int64_t>(doc.size()) - 1));
        pieces.insert(doc.substr(at, static_cast<size_t>(rng.uniform_int(2, 8))));
      }
    }
  }
  for (const char* extra : {"\":\"", "\"},{\"", "\"}", "\"]}", "}]}", "null", "true", ", \""}) {
    pieces.insert(extra);
  }
  tokens.insert(tokens.end(), pieces.begin(), pieces.end());
  return tokens;
}

TEST(TokenMaskerTest, MasksEqualBruteForceAlongRandomWalks) {
  dsv4::testing::SeededRng rng;
  const TokenTrie trie(test_vocabulary(rng));
  const size_t words = static_cast<size_t>((trie.vocab_size() + 31) / 32);
  // Entries shared across the grammars by shape (a string's body, a number) must be right in
  // each of them.
  SharedMaskCache shared;
  for (const std::string& schema : kSchemas) {
    SCOPED_TRACE(schema);
    Result<Grammar> g = json_schema_grammar(std::string_view(schema));
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    TokenMasker masker(*g, trie, &shared);
    for (int walk = 0; walk < 8; ++walk) {
      SequenceMasker sequence(masker);
      Matcher m(*g);
      std::string text;
      for (int step = 0; step < 60; ++step) {
        std::vector<uint32_t> bits(words);
        sequence.fill(m, bits);
        std::vector<int64_t> allowed;
        for (int64_t id = 0; id < trie.vocab_size(); ++id) {
          Matcher copy = m;
          const bool expected = !trie.bytes(id).empty() && copy.advance(trie.bytes(id));
          const bool got = (bits[static_cast<size_t>(id >> 5)] >> (id & 31)) & 1;
          ASSERT_EQ(got, expected)
              << "after \"" << text << "\", token \"" << trie.bytes(id) << "\"";
          if (got) allowed.push_back(id);
        }
        if (allowed.empty() || (m.accepted() && rng.uniform(0, 1) < 0.3)) break;
        // Prefer long tokens, so walks get deep.
        int64_t pick = allowed[static_cast<size_t>(
            rng.uniform_int(0, static_cast<int64_t>(allowed.size()) - 1))];
        for (int tries = 0; tries < 3 && trie.bytes(pick).size() < 2; ++tries) {
          pick = allowed[static_cast<size_t>(
              rng.uniform_int(0, static_cast<int64_t>(allowed.size()) - 1))];
        }
        ASSERT_TRUE(m.advance(trie.bytes(pick)));
        text += trie.bytes(pick);
      }
    }
  }
}

}  // namespace
}  // namespace dsv4::grammar
