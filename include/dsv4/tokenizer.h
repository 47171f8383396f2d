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
  // The bytes a vocabulary token writes into decoded text, as they are: a byte-level token may
  // hold part of a UTF-8 character, which decode() would show as U+FFFD. nullopt for an added
  // token (special tokens such as eos), for an id the vocabulary lacks, and for every token of a
  // tokenizer without a ByteLevel decoder (whose decode() joins tokens with spaces). Structured
  // outputs match these bytes against a grammar.
  std::optional<std::string> token_bytes(int64_t id) const;

 private:
  struct State;
  explicit Tokenizer(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// Token ids -> text, one id at a time, for streamed responses: each piece of text handed out is
// final, never splits a UTF-8 character, and the pieces concatenate to exactly what
// Tokenizer::decode gives for all the ids at once (U+FFFD only where that has it).
//
// How: a byte-level token may carry part of a character (a CJK character or an emoji is often
// two or three tokens), which decode() shows as U+FFFD at the end of the text. While the text
// ends with U+FFFD the ids are held; once it does not, the text up to there can no longer change
// (decoding is left to right and the text ends on a whole character) and goes out. finish()
// hands out what is held, with decode()'s U+FFFD for bytes that never completed a character. A
// U+FFFD the model really wrote is held for one token longer, which changes nothing.
//
// Each step decodes a window, not every id so far: from the first id of the last piece handed out
// (a character boundary, so the window decodes as the whole text does from there) to the end;
// that piece's text is cut off the front. The work per token stays small, and a tokenizer
// without a decoder, which joins tokens with spaces, still puts its space before the new ids.
class IncrementalDecoder {
 public:
  explicit IncrementalDecoder(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}

  // Adds `id`; returns the text that became final (empty while a character is incomplete). An id
  // the tokenizer does not know is an error naming it.
  Result<std::string> add(int64_t id);
  // The text of the ids still held, at the end of the stream.
  Result<std::string> finish();
  // Whether ids are held whose text has not been handed out.
  bool holding() const { return read_ < ids_.size(); }

 private:
  // The text of ids_[prefix_, end) past that of ids_[prefix_, read_), and whether it is final.
  Result<std::string> text_after_read(bool final_only);

  const Tokenizer& tokenizer_;
  std::vector<int64_t> ids_;
  size_t prefix_ = 0;  // the window's first id
  size_t read_ = 0;    // ids before this one have had their text handed out
};

}  // namespace dsv4
