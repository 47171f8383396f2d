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
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dsv4/status.h"
#include "dsv4/tokenizer.h"

namespace dsv4::server {

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

}  // namespace dsv4::server
