// Prints generated text on stdout as the engine draws its tokens (dsv4 generate, dsv4 chat): a
// plain prompt's continuation as it is, or a chat reply read as one, its reasoning between
// <think> and </think> lines in thinking mode.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "dsv4/chat.h"
#include "dsv4/engine.h"
#include "dsv4/tokenizer.h"

namespace dsv4::tools {

class ReplyPrinter {
 public:
  // `chat`: the reply's mode when the text is a chat reply; none for plain text.
  ReplyPrinter(const Tokenizer& tokenizer, std::optional<ThinkingMode> chat, int64_t eos_token_id);

  // The engine's on_token: false stops generation (an id the tokenizer does not know).
  bool token(int64_t id);

  // Prints the rest once generation ended with `out`, and a newline. A chat reply comes back
  // read (read_chat_reply); plain text as the reply's content.
  Result<ChatReply> finish(const Generation& out);

 private:
  void show(const std::string& piece);
  void print_delta(const ChatDelta& delta);
  void close_reasoning();

  IncrementalDecoder decoder_;
  std::optional<ChatStream> reply_;  // a chat reply
  std::string text_;                 // plain text, all of it
  int64_t eos_token_id_;
  bool thinking_;
  bool reasoning_closed_ = false;
  Status failed_ = ok_status();
};

}  // namespace dsv4::tools
