// Text <-> token ids through a checkpoint's tokenizer.json (Hugging Face's format, as DeepSeek
// ships it: byte-level BPE, Split pre-tokenizers, added special tokens such as
// <｜begin▁of▁sentence｜>), with the ids Hugging Face tokenizers gives (checked against it on
// DeepSeek's own file: tests/tokenizer/deepseek_tokenizer_test.cpp). What the file asks for and
// this class does not implement is refused at load with the field named, never approximated.
//
//   auto tok = dsv4::Tokenizer::load("path/to/model/tokenizer.json");
//   auto ids = tok->encode("<｜begin▁of▁sentence｜>Hello");   // added tokens match literally
//   auto text = tok->decode(*ids);
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dsv4/status.h"

namespace dsv4 {

class Tokenizer {
 public:
  static Result<Tokenizer> load(const std::string& path);
  // The same from the file's text; `what` names it in messages.
  static Result<Tokenizer> parse(std::string_view json_text, const std::string& what);
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  // As Hugging Face tokenizers' Tokenizer.encode(text, add_special_tokens).ids: added tokens are
  // found first (leftmost, longest), the rest is pre-tokenized and BPE-encoded; with
  // add_special_tokens, a post_processor template adds its special tokens around the result.
  Result<std::vector<int64_t>> encode(std::string_view text, bool add_special_tokens = true) const;
  // As tokenizers' decode(ids, skip_special_tokens=False): the text the ids stand for (added
  // tokens as their text), bytes that are not valid UTF-8 (a character cut between tokens)
  // replaced by U+FFFD. An id the tokenizer does not know is an error naming it.
  Result<std::string> decode(const std::vector<int64_t>& ids) const;
  // The id of a vocabulary or added token, spelled as in the file.
  std::optional<int64_t> token_id(std::string_view token) const;

 private:
  struct State;
  explicit Tokenizer(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace dsv4
