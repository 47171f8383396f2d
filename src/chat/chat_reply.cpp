// parse_chat_reply: the model's text after the prompt -> reasoning, content and tool calls, as
// encoding_dsv4.py's parse_message_from_completion_text reads a finished reply:
//   [reasoning</think>] content [\n\n<｜DSML｜tool_calls>...</｜DSML｜tool_calls>]
//   <｜end▁of▁sentence｜>
// A reply cut short (max_tokens) has no end of sentence; what it has so far is returned, so a
// client sees the partial reasoning or content rather than an error.
#include <initializer_list>

#include "chat/dsml.h"
#include "chat/special_tokens.h"
#include "dsv4/chat.h"

namespace dsv4 {
namespace {

using chat::kThinkEnd;
using chat::kToolCallsStart;

// The first of `stops` at or after `from`: where (npos if none) and which.
std::pair<size_t, std::string_view> first_of(std::string_view text, size_t from,
                                             std::initializer_list<std::string_view> stops) {
  std::pair<size_t, std::string_view> found{std::string_view::npos, {}};
  for (std::string_view stop : stops) {
    const size_t at = text.find(stop, from);
    if (at < found.first) found = {at, stop};
  }
  return found;
}

// DeepSeek's parser refuses a reply whose text holds one of the format's own tokens: the model
// lost the format, and passing the text on would show it as if it were content.
Status check_no_special_tokens(const ChatReply& reply) {
  for (std::string_view token :
       {chat::kBeginOfSentence, kEndOfSentence, chat::kThinkStart, kThinkEnd, chat::kDsml}) {
    for (const std::string* text : {&reply.reasoning_content, &reply.content}) {
      if (text->find(token) != std::string::npos) {
        return invalid_argument("reply: the special token " + std::string(token) + " inside the " +
                                (text == &reply.content ? "content" : "reasoning"));
      }
    }
  }
  return ok_status();
}

// What follows the content or the tool calls, from `at`: nothing (cut short) or exactly the end
// of sentence.
Status check_end(std::string_view text, size_t at) {
  const std::string_view rest = text.substr(at);
  if (rest.empty() || rest == kEndOfSentence) return ok_status();
  return invalid_argument("reply: unexpected text at byte " + std::to_string(at) +
                          " (expected the end of sentence)");
}

}  // namespace

Result<ChatReply> parse_chat_reply(std::string_view text, ThinkingMode thinking) {
  ChatReply reply;
  size_t at = 0;
  if (thinking == ThinkingMode::kThinking) {
    const auto [end, stop] = first_of(text, 0, {kThinkEnd, kToolCallsStart});
    if (end == std::string_view::npos) {
      if (text.find(kEndOfSentence) != std::string_view::npos) {
        return invalid_argument(
            "reply: the model finished without closing its reasoning (</think>)");
      }
      reply.reasoning_content = std::string(text);  // cut short while still reasoning
      if (Status s = check_no_special_tokens(reply); !s.ok()) return s;
      return reply;
    }
    if (stop != kThinkEnd) {
      return invalid_argument("reply: tool calls at byte " + std::to_string(end) +
                              " before the reasoning was closed (</think>)");
    }
    reply.reasoning_content = std::string(text.substr(0, end));
    at = end + kThinkEnd.size();
  }
  const auto [end, stop] = first_of(text, at, {kEndOfSentence, kToolCallsStart});
  reply.content =
      std::string(text.substr(at, end == std::string_view::npos ? text.npos : end - at));
  if (Status s = check_no_special_tokens(reply); !s.ok()) return s;
  if (end == std::string_view::npos) return reply;  // cut short in the content
  if (stop == kEndOfSentence) {
    if (Status s = check_end(text, end); !s.ok()) return s;
    return reply;
  }
  Result<chat::ParsedToolCalls> calls = chat::parse_tool_calls(text, end + kToolCallsStart.size());
  if (!calls.ok()) return calls.status().with_context("reply");
  if (Status s = check_end(text, calls->end); !s.ok()) return s;
  reply.tool_calls = std::move(calls->calls);
  return reply;
}

ChatReply read_chat_reply(std::string text, bool finished, ThinkingMode thinking) {
  Result<ChatReply> reply =
      parse_chat_reply(text + (finished ? std::string(kEndOfSentence) : ""), thinking);
  if (reply.ok()) return *std::move(reply);
  return ChatReply{"", std::move(text), {}};
}

ChatReply read_reply(const Conversation& conversation, const std::string& generated,
                     bool finished) {
  ChatReply reply =
      read_chat_reply(reply_opening(conversation) + generated, finished, conversation.thinking);
  if (reply.content.starts_with(conversation.prefill)) {
    reply.content.erase(0, conversation.prefill.size());
  } else if (conversation.prefill.starts_with(reply.content)) {
    reply.content.clear();  // the prefill opened the tool-call block: its content is the client's
  }
  return reply;
}

Result<ChatReply> decode_chat_reply(const Tokenizer& tokenizer, std::vector<int64_t> tokens,
                                    bool finished, ThinkingMode thinking) {
  if (finished && !tokens.empty()) tokens.pop_back();
  Result<std::string> text = tokenizer.decode(tokens);
  if (!text.ok()) return text.status();
  return read_chat_reply(*std::move(text), finished, thinking);
}

}  // namespace dsv4
