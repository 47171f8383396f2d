// Time of a structured-output token mask per step at a real vocabulary (DeepSeek's 129,280
// ids, its tokenizer.json): a nested JSON Schema compiled once, then random token-level walks
// through it, each step's mask timed. The masks are first checked against brute force (every
// token's bytes advanced through a copy of the matcher) on the first steps of the first walk.
// Walks after the first reuse the constraint's per-state cache, as a request's later tokens and
// its other choices do; the first walk's steps include filling it (cold). A last walk is made
// under the same schema compiled anew, whose own cache is empty but whose states of the shapes
// every schema shares (a free string, a number) come from the vocabulary's shared cache, as a
// new request's do on a running server; it takes the first walk's tokens again.
//
// Usage: token_mask_bench TOKENIZER_JSON [--vocab 129280] [--walks 8] [--steps 256] [--seed 1]
//                         [--schema bench/grammar/order_schema.json]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "dsv4/structured_output.h"
#include "dsv4/tokenizer.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/token_masker.h"
#include "grammar/token_trie.h"
#include "runtime/sampler.h"

namespace {

using namespace dsv4;
using Clock = std::chrono::steady_clock;

constexpr int64_t kEosId = 1;  // <｜end▁of▁sentence｜> in DeepSeek's tokenizer.json

// The schema's text: by default bench/grammar/order_schema.json, an order with nested objects,
// arrays of objects, enums, formats, a pattern, anyOf with null, and a recursive category tree
// through $ref (dsv4 bench --json-schema times the decode step under the same file).
Result<std::string> read_schema(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(path + ": cannot open");
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * static_cast<double>(v.size() - 1))];
}

bool bit(const std::vector<uint32_t>& bits, int64_t t) {
  return (bits[static_cast<size_t>(t / 32)] >> (t % 32)) & 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: %s TOKENIZER_JSON [--vocab V] [--walks N] [--steps N] [--seed S] "
                 "[--schema FILE]\n",
                 argv[0]);
    return 2;
  }
  int64_t vocab = 129280, walks = 8, steps = 256;
  uint64_t seed = 1;
  std::string schema_path = DSV4_ORDER_SCHEMA;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int64_t value = std::atoll(argv[i + 1]);
    if (flag == "--schema")
      schema_path = argv[i + 1];
    else if (flag == "--vocab")
      vocab = value;
    else if (flag == "--walks")
      walks = value;
    else if (flag == "--steps")
      steps = value;
    else if (flag == "--seed")
      seed = static_cast<uint64_t>(value);
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  Result<Tokenizer> tok = Tokenizer::load(argv[1]);
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", tok.status().to_string().c_str());
    return 1;
  }
  Result<std::string> schema = read_schema(schema_path);
  if (!schema.ok()) {
    std::fprintf(stderr, "%s\n", schema.status().to_string().c_str());
    return 1;
  }

  Clock::time_point t = Clock::now();
  std::vector<std::string> bytes(static_cast<size_t>(vocab));
  for (int64_t id = 0; id < vocab; ++id) {
    if (auto b = tok->token_bytes(id)) bytes[static_cast<size_t>(id)] = *b;
  }
  const grammar::TokenTrie trie(std::move(bytes));
  const double trie_ms = ms_since(t);
  t = Clock::now();
  Result<grammar::Grammar> g = grammar::json_schema_grammar(std::string_view(*schema));
  if (!g.ok()) {
    std::fprintf(stderr, "%s\n", g.status().to_string().c_str());
    return 1;
  }
  const double compile_ms = ms_since(t);
  std::printf(
      "vocab %lld, trie %zu nodes built in %.1f ms; schema: %zu states, compiled in %.2f ms\n",
      static_cast<long long>(vocab), trie.n_nodes(), trie_ms, g->states.size(), compile_ms);

  grammar::SharedMaskCache shared;
  grammar::TokenMasker masker(*g, trie, &shared);
  grammar::TokenMasker fresh(*g, trie, &shared);  // the schema compiled anew
  std::mt19937_64 rng(seed);
  std::vector<uint32_t> bits(static_cast<size_t>((vocab + 31) / 32));
  std::vector<double> cold, warm, anew;
  int64_t n_checked = 0, n_finished = 0, n_allowed_sum = 0;
  for (int64_t w = 0; w <= walks; ++w) {
    grammar::SequenceMasker sequence(w < walks ? masker : fresh);
    if (w == walks) rng.seed(seed);  // the first walk's tokens again
    grammar::Matcher m(*g);
    for (int64_t step = 0; step < steps; ++step) {
      t = Clock::now();
      sequence.fill(m, bits);
      (w == 0 ? cold : w < walks ? warm : anew).push_back(ms_since(t));
      std::vector<int64_t> allowed;
      for (int64_t id = 0; id < vocab; ++id) {
        if (bit(bits, id)) allowed.push_back(id);
      }
      n_allowed_sum += static_cast<int64_t>(allowed.size());
      if (w == 0 && step < 24) {  // check first: the mask is brute force's, token for token
        for (int64_t id = 0; id < vocab; ++id) {
          grammar::Matcher copy = m;
          const bool want = !trie.bytes(id).empty() && copy.advance(trie.bytes(id));
          if (want != bit(bits, id)) {
            std::fprintf(stderr, "mask differs from brute force at step %lld, token %lld\n",
                         static_cast<long long>(step), static_cast<long long>(id));
            return 1;
          }
        }
        ++n_checked;
      }
      if (m.accepted()) {
        ++n_finished;
        break;
      }
      if (allowed.empty()) break;
      // Mostly tokens of JSON's own bytes (a model writing JSON closes its strings), else any:
      // the walks then finish documents instead of writing one string forever.
      std::vector<int64_t> structural;
      for (const int64_t id : allowed) {
        const std::string& b = trie.bytes(id);
        if (b.find_first_not_of("\"{}[],: 0123456789-.") == std::string::npos) {
          structural.push_back(id);
        }
      }
      const std::vector<int64_t>& from =
          !structural.empty() && rng() % 10 < 7 ? structural : allowed;
      const int64_t pick = from[rng() % from.size()];
      if (!m.advance(trie.bytes(pick))) {
        std::fprintf(stderr, "advance refused an allowed token\n");
        return 1;
      }
    }
  }
  std::printf("checked %lld masks against brute force: equal\n", static_cast<long long>(n_checked));
  const size_t n_steps = cold.size() + warm.size() + anew.size();
  std::printf("%lld + 1 walks, %zu steps, %lld finished, %.0f tokens allowed per step on average\n",
              static_cast<long long>(walks), n_steps, static_cast<long long>(n_finished),
              static_cast<double>(n_allowed_sum) / static_cast<double>(n_steps));
  std::printf(
      "mask per step, first walk (filling the cache): median %.3f ms, p90 %.3f, p99 %.3f, max "
      "%.3f\n",
      percentile(cold, 0.5), percentile(cold, 0.9), percentile(cold, 0.99), percentile(cold, 1.0));
  std::printf(
      "mask per step, later walks (cache warm):        median %.3f ms, p90 %.3f, p99 %.3f, max "
      "%.3f\n",
      percentile(warm, 0.5), percentile(warm, 0.9), percentile(warm, 0.99), percentile(warm, 1.0));
  std::printf(
      "mask per step, schema compiled anew (shared):  median %.3f ms, p90 %.3f, p99 %.3f, max "
      "%.3f\n",
      percentile(anew, 0.5), percentile(anew, 0.9), percentile(anew, 0.99), percentile(anew, 1.0));
  // What filling the cache for every state at once would cost (a constraint warmed whole before
  // its first step, off the engine's thread).
  {
    grammar::SharedMaskCache empty;
    grammar::TokenMasker whole(*g, trie, &empty);
    t = Clock::now();
    for (int32_t state = 0; state < static_cast<int32_t>(g->states.size()); ++state)
      whole.entry(state);
    std::printf("every state's entry, from empty caches: %.1f ms for %zu states\n", ms_since(t),
                g->states.size());
  }
  // The sampler's part (runtime/sampler.h), per token at V logits: the mask made (what the
  // batch's helper thread does while the forward runs), then the greedy draw through it, which
  // reads the logits in place; beside it the unconstrained draw through the drawable ids alone,
  // a plain argmax, and what a draw cost before (a copy of the row, -inf where masked, argmax).
  {
    const ConstraintVocabulary vocabulary = ConstraintVocabulary::build(*tok, vocab, kEosId);
    Result<std::shared_ptr<const TokenConstraint>> constraint =
        vocabulary.compile({OutputFormat::Kind::kJsonSchema, *schema});
    if (!constraint.ok()) {
      std::fprintf(stderr, "%s\n", constraint.status().to_string().c_str());
      return 1;
    }
    auto drawable = std::make_shared<runtime::TokenMask>(bits.size(), 0u);
    for (int64_t id = 0; id < vocab; ++id) {
      if (tok->decode({id}).ok()) (*drawable)[static_cast<size_t>(id / 32)] |= 1u << (id % 32);
    }
    runtime::Sampler constrained({.constraint = *constraint}, drawable);
    runtime::Sampler free({}, drawable);
    std::normal_distribution<float> normal(0.0f, 2.0f);
    std::vector<float> logits(static_cast<size_t>(vocab));
    std::vector<double> mask_ms, draw_ms, free_ms, argmax_ms, copy_ms;
    for (int64_t step = 0; step < steps; ++step) {
      for (float& x : logits) x = normal(rng);
      t = Clock::now();
      constrained.prepare_masks();
      mask_ms.push_back(ms_since(t));
      t = Clock::now();
      const int64_t token = constrained.sample(logits);
      draw_ms.push_back(ms_since(t));
      t = Clock::now();
      free.sample(logits);
      free_ms.push_back(ms_since(t));
      t = Clock::now();
      volatile int64_t best = runtime::argmax(logits);
      argmax_ms.push_back(ms_since(t));
      t = Clock::now();
      std::vector<float> copy = logits;
      for (size_t i = 0; i < copy.size(); ++i) {
        if ((((*drawable)[i / 32] >> (i % 32)) & 1) == 0) copy[i] = -INFINITY;
      }
      best = runtime::argmax(copy);
      copy_ms.push_back(ms_since(t));
      (void)best;
      if (token == kEosId) break;
    }
    auto row = [](const char* what, const std::vector<double>& v) {
      std::printf("%-58s median %.3f ms, p90 %.3f, p99 %.3f, max %.3f\n", what, percentile(v, 0.5),
                  percentile(v, 0.9), percentile(v, 0.99), percentile(v, 1.0));
    };
    std::printf("sampler, %zu greedy steps of the schema on random logits:\n", mask_ms.size());
    row("  mask (prepare_masks: constraint AND drawable ids)", mask_ms);
    row("  draw through the mask, constrained", draw_ms);
    row("  draw through the drawable ids, unconstrained", free_ms);
    row("  plain argmax, no mask", argmax_ms);
    row("  before: copy the row, -inf where masked, argmax", copy_ms);
  }
  return 0;
}
