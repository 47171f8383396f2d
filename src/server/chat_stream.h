// A chat reply's text, as it streams, split into the reasoning_content and content deltas of
// OpenAI's chat.completion.chunk, by the markers DeepSeek-V4's format puts between them:
//   [reasoning</think>] content [\n\n<｜DSML｜tool_calls>...]
// Text that may be the start of a marker is held until the next piece says. The tool-call block
// is not streamed: it is held whole and its calls come in the last delta, from the reply that
// decode_chat_reply reads once generation ends (the same reading as the non-streamed answer).
//
// The deltas concatenate to that reply's reasoning_content and content. The one exception is a
// reply that breaks the format after reasoning went out (no </think> before the end, a special
// token in the text, a malformed tool-call block): the non-streamed answer gives the whole text
// as content, which sent deltas cannot take back; the stream then sends the text it still holds
// as content, so no text is lost.
#pragma once

#include <string>
#include <string_view>

#include "dsv4/chat.h"

namespace dsv4::server {

struct ChatDelta {
  std::string reasoning_content;
  std::string content;
};

class ChatStream {
 public:
  explicit ChatStream(ThinkingMode thinking)
      : part_(thinking == ThinkingMode::kThinking ? Part::kReasoning : Part::kContent) {}

  // The next piece of the reply's text (the eos token's excluded); what can be sent now.
  ChatDelta add(std::string_view text);
  // The rest of each, given `reply`, decode_chat_reply's reading of the whole reply.
  ChatDelta finish(const ChatReply& reply) const;

 private:
  enum class Part { kReasoning, kContent, kToolCalls };

  // Moves what is certain to be reasoning or content from held_ to `out`.
  void release(ChatDelta& out);

  Part part_;
  std::string held_;  // text not sent: maybe a marker's start, or the tool-call block
  ChatDelta sent_;    // all that was sent
};

}  // namespace dsv4::server
