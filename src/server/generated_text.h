// A generation's text as the engine draws its tokens: decoded one id at a time
// (IncrementalDecoder, dsv4/tokenizer.h) and cut at the first stop string (stop_strings.h).
// Streamed and whole answers both read their text through it, so the two always agree.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dsv4/status.h"
#include "dsv4/tokenizer.h"
#include "server/stop_strings.h"

namespace dsv4::server {

class GeneratedText {
 public:
  // `hidden_token` adds no text (chat's eos token, which the reply's parser reads as the end of
  // sentence); -1 for none.
  GeneratedText(const Tokenizer& tokenizer, std::vector<std::string> stop,
                int64_t hidden_token = -1)
      : decoder_(tokenizer), stop_(std::move(stop)), hidden_token_(hidden_token) {}

  // Adds the next token; returns the text that can go out now (maybe none). An id the tokenizer
  // does not know is an error.
  Result<std::string> add(int64_t token);
  // Once generation ended: the rest of the text.
  Result<std::string> finish();

  // A stop string ended the text: generation should end too.
  bool stopped() const { return stop_.stopped(); }
  // Which one ("" before a stop).
  const std::string& stop_found() const { return stop_.found(); }
  // Token ids are held whose text (an incomplete character) has not gone out.
  bool holding() const { return decoder_.holding(); }

 private:
  IncrementalDecoder decoder_;
  StopStrings stop_;
  int64_t hidden_token_;
};

}  // namespace dsv4::server
