// Implements include/dsv4/structured_output.h over the grammar library: a format's Grammar and
// its TokenMasker (the per-state mask cache) live in a GrammarConstraint shared by the requests'
// sequences; each sequence has a Matcher and a SequenceMasker of its own.
#include "dsv4/structured_output.h"

#include <algorithm>
#include <list>
#include <mutex>
#include <utility>
#include <vector>

#include "chat/tool_call_grammar.h"
#include "dsv4/tokenizer.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/token_masker.h"
#include "grammar/token_trie.h"

namespace dsv4 {

namespace {

// What every constraint compiled against a vocabulary shares.
struct Vocabulary {
  Vocabulary(grammar::TokenTrie t, int64_t eos) : trie(std::move(t)), eos_token_id(eos) {}
  grammar::TokenTrie trie;
  int64_t eos_token_id;
  mutable grammar::SharedMaskCache shared_masks;  // fills as constraints step; thread-safe
};

}  // namespace

struct ConstraintVocabulary::State {
  std::shared_ptr<const Vocabulary> vocab;
  // The last formats compiled, most recent first: an application sends the same schema again
  // and again, and a constraint that served one request has its masks of the states it visited
  // cached (the first visit of a string's body walks the whole trie: ~30 ms at 129,280 tokens).
  static constexpr size_t kKeptConstraints = 32;
  mutable std::mutex mutex;
  mutable std::list<std::pair<std::string, std::shared_ptr<const TokenConstraint>>> kept;
};

namespace {

class GrammarConstraint final : public TokenConstraint,
                                public std::enable_shared_from_this<GrammarConstraint> {
 public:
  GrammarConstraint(std::shared_ptr<const Vocabulary> vocab, grammar::Grammar g)
      : vocab_(std::move(vocab)),
        grammar_(std::move(g)),
        masker_(grammar_, vocab_->trie, &vocab_->shared_masks) {}

  std::unique_ptr<TokenConstraintState> start() const override;
  int64_t vocab_size() const override { return vocab_->trie.vocab_size(); }

  const grammar::Grammar& grammar() const { return grammar_; }
  grammar::TokenMasker& masker() const { return masker_; }
  const grammar::TokenTrie& trie() const { return vocab_->trie; }
  int64_t eos() const { return vocab_->eos_token_id; }

 private:
  std::shared_ptr<const Vocabulary> vocab_;
  grammar::Grammar grammar_;
  mutable grammar::TokenMasker masker_;  // its cache fills as sequences step; thread-safe
};

class GrammarConstraintState final : public TokenConstraintState {
 public:
  explicit GrammarConstraintState(std::shared_ptr<const GrammarConstraint> constraint)
      : c_(std::move(constraint)), matcher_(c_->grammar()), masker_(c_->masker()) {}

  void allowed_tokens(std::span<uint32_t> allowed) override {
    masker_.fill(matcher_, allowed);
    const auto eos = static_cast<uint64_t>(c_->eos());
    if ((matcher_.accepted() || none(allowed)) && eos / 32 < allowed.size()) {
      allowed[eos / 32] |= 1u << (eos % 32);
    }
  }

  bool advance(int64_t token) override {
    if (token < 0 || token >= c_->trie().vocab_size()) return false;
    if (token == c_->eos()) {
      // Nothing comes after eos: it reads no byte, but counts as a step for rollback().
      return (matcher_.accepted() || dead_end()) && matcher_.advance({});
    }
    const std::string& bytes = c_->trie().bytes(token);
    return !bytes.empty() && matcher_.advance(bytes);
  }

  void rollback(int64_t n) override { matcher_.rollback(static_cast<size_t>(n)); }

 private:
  static bool none(std::span<const uint32_t> bits) {
    return std::all_of(bits.begin(), bits.end(), [](uint32_t w) { return w == 0; });
  }
  // No token continues the text (a vocabulary without some byte): eos ends it rather than
  // leaving nothing to draw.
  bool dead_end() {
    std::vector<uint32_t> bits(static_cast<size_t>((c_->trie().vocab_size() + 31) / 32));
    masker_.fill(matcher_, bits);
    return none(bits);
  }

  std::shared_ptr<const GrammarConstraint> c_;
  grammar::Matcher matcher_;
  grammar::SequenceMasker masker_;
};

static_assert(grammar::Matcher::kMaxRollback >= TokenConstraintState::kMaxRollback);

std::unique_ptr<TokenConstraintState> GrammarConstraint::start() const {
  return std::make_unique<GrammarConstraintState>(shared_from_this());
}

Result<grammar::Grammar> compile_grammar(const OutputFormat& format) {
  switch (format.kind) {
    case OutputFormat::Kind::kJsonObject:
      return grammar::json_object_grammar();
    case OutputFormat::Kind::kJsonSchema:
      return grammar::json_schema_grammar(std::string_view(format.text));
    case OutputFormat::Kind::kRegex:
      return grammar::regex_grammar(format.text);
    case OutputFormat::Kind::kToolCalls:
      return chat::tool_call_grammar(format.text);
  }
  return invalid_argument("unknown output format");
}

}  // namespace

ConstraintVocabulary ConstraintVocabulary::build(const Tokenizer& tokenizer, int64_t vocab_size,
                                                 int64_t eos_token_id) {
  std::vector<std::string> bytes(static_cast<size_t>(vocab_size));
  for (int64_t id = 0; id < vocab_size; ++id) {
    if (std::optional<std::string> b = tokenizer.token_bytes(id))
      bytes[static_cast<size_t>(id)] = *b;
  }
  // eos ends the reply, whatever text a tokenizer gives it (a small test vocabulary's eos may be
  // an ordinary token): allowed only where the format is complete.
  if (eos_token_id >= 0 && eos_token_id < vocab_size)
    bytes[static_cast<size_t>(eos_token_id)].clear();
  auto state = std::make_shared<State>();
  state->vocab =
      std::make_shared<const Vocabulary>(grammar::TokenTrie(std::move(bytes)), eos_token_id);
  return ConstraintVocabulary(std::move(state));
}

Result<std::shared_ptr<const TokenConstraint>> ConstraintVocabulary::compile(
    const OutputFormat& format) const {
  const std::string key = std::to_string(static_cast<int>(format.kind)) + ":" + format.text;
  {
    const std::lock_guard<std::mutex> lock(state_->mutex);
    auto& kept = state_->kept;
    for (auto it = kept.begin(); it != kept.end(); ++it) {
      if (it->first != key) continue;
      kept.splice(kept.begin(), kept, it);
      return kept.front().second;
    }
  }
  DSV4_ASSIGN_OR_RETURN(grammar::Grammar g, compile_grammar(format));
  auto constraint = std::shared_ptr<const TokenConstraint>(
      std::make_shared<GrammarConstraint>(state_->vocab, std::move(g)));
  const std::lock_guard<std::mutex> lock(state_->mutex);
  state_->kept.emplace_front(key, constraint);
  if (state_->kept.size() > State::kKeptConstraints) state_->kept.pop_back();
  return constraint;
}

}  // namespace dsv4
