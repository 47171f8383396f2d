// Structured outputs: replies that match a JSON Schema, any JSON object or a regex by
// construction (grammar-constrained decoding, docs/structured_outputs.md). A format is compiled
// once per request into a TokenConstraint; the engine applies it before every draw of a
// sequence that carries it (SamplingParams::constraint), so that a token that could not continue
// a matching text gets no probability, and eos only once the text is complete.
//
//   auto vocab = dsv4::ConstraintVocabulary::build(tokenizer, engine.vocab_size(),
//                                                  engine.eos_token_id());   // once
//   auto c = vocab.compile({dsv4::OutputFormat::Kind::kJsonSchema, schema_text});
//   if (!c.ok()) return c.status();    // names the keyword it does not support, and where
//   request.sampling.constraint = *c;
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "dsv4/status.h"

namespace dsv4 {

class Tokenizer;

// One sequence's place in its constraint.
class TokenConstraintState {
 public:
  virtual ~TokenConstraintState() = default;
  // Sets bit t % 32 of word t / 32 of `allowed` ([ceil(V / 32)] words) for each token t that
  // may come next, eos exactly when the text so far is complete; clears the others.
  virtual void allowed_tokens(std::span<uint32_t> allowed) = 0;
  // Moves past `token`; false when it was not allowed (nothing changes then).
  virtual bool advance(int64_t token) = 0;
  // The most advances rollback() can undo: speculative decoding advances past drafted tokens
  // (at most 4 a step) before it knows they stay.
  static constexpr int64_t kMaxRollback = 8;
  // Undoes the last n successful advances (n <= kMaxRollback and no more than were made): the
  // state is then exactly as it was before them, as if they had never been made.
  virtual void rollback(int64_t n) = 0;
};

// A compiled format, shared by the sequences that use it (a request's n choices); thread-safe.
class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  virtual std::unique_ptr<TokenConstraintState> start() const = 0;
  // The V its masks are for (the engine's vocabulary).
  virtual int64_t vocab_size() const = 0;
};

struct OutputFormat {
  enum class Kind {
    kJsonObject,  // any JSON object (OpenAI's response_format json_object)
    kJsonSchema,  // a document valid against the JSON Schema in `text`
    kRegex,       // text the regex in `text` matches whole (vLLM's guided regex)
    // A chat reply whose DSML tool calls keep to their tools' schemas (strict tools); `text` is
    // {"tools": [OpenAI function objects], "forced_tool": null | "" | name} (chat's
    // tool_call_grammar.h).
    kToolCalls,
  };
  Kind kind = Kind::kJsonObject;
  std::string text;
};

// The bytes every token writes, arranged for matching (a trie): built once per tokenizer (a
// fraction of a second at DeepSeek's 129,280 tokens), then every request's format compiles
// against it.
class ConstraintVocabulary {
 public:
  // Tokens [0, vocab_size) as `tokenizer` decodes them; added tokens (special tokens) are never
  // allowed, but for eos_token_id, which ends a constrained reply where the format allows.
  static ConstraintVocabulary build(const Tokenizer& tokenizer, int64_t vocab_size,
                                    int64_t eos_token_id);
  // Errors: what the compiler does not support, refused by name and place (unimplemented:
  // `JSON Schema keyword "minimum" at #/properties/age is not supported`); a malformed schema
  // or pattern (invalid argument); a format whose automaton would be too large (resource
  // exhausted).
  Result<std::shared_ptr<const TokenConstraint>> compile(const OutputFormat& format) const;

  struct State;  // opaque: the trie, shared with the constraints compiled against it

 private:
  explicit ConstraintVocabulary(std::shared_ptr<const State> state) : state_(std::move(state)) {}
  std::shared_ptr<const State> state_;
};

}  // namespace dsv4
