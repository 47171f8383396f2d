// DeepSeek-V4's chat format: a conversation -> the prompt text, and the model's reply text ->
// reasoning, content and tool calls. DeepSeek ships no Jinja template for it; the format is its
// Python module encoding_dsv4.py, and these functions give byte for byte what its
// encode_messages and parse_message_from_completion_text give (tests/chat/golden).
//
//   dsv4::Conversation chat;
//   chat.messages = {{.role = dsv4::ChatRole::kUser, .content = "1+1=?"}};
//   chat.thinking = dsv4::ThinkingMode::kThinking;
//   auto prompt = dsv4::encode_chat(chat);
//   // "<｜begin▁of▁sentence｜><｜User｜>1+1=?<｜Assistant｜><think>"
//   auto ids = dsv4::tokenize_chat_prompt(tokenizer, *prompt);
//   ... generate from *ids ...
//   auto reply = dsv4::decode_chat_reply(tokenizer, out.tokens, out.stopped_at_eos,
//                                        chat.thinking);  // reasoning_content, content
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dsv4/status.h"
#include "dsv4/tokenizer.h"

namespace dsv4 {

// The end-of-sentence token's text: a reply the model finished ends with it.
inline constexpr std::string_view kEndOfSentence = "<｜end▁of▁sentence｜>";

enum class ChatRole { kSystem, kUser, kAssistant, kTool };

struct ToolCall {
  std::string id;         // the caller's id, matched by a tool message's tool_call_id
  std::string name;       // the function
  std::string arguments;  // a JSON object's text, as OpenAI's API carries it
};

struct ChatMessage {
  ChatRole role = ChatRole::kUser;
  std::string content;
  std::string reasoning_content;     // assistant: its thinking (the format drops some)
  std::vector<ToolCall> tool_calls;  // assistant
  std::string tool_call_id;          // tool: the call this is the result of
};

// "chat" answers at once; "thinking" reasons inside <think>...</think> first.
enum class ThinkingMode { kChat, kThinking };

// kHigh is the model's default (the encoder adds nothing); kMax puts DeepSeek's "absolute
// maximum" instruction before the conversation, in thinking mode only.
enum class ReasoningEffort { kHigh, kMax };

struct Conversation {
  std::vector<ChatMessage> messages;
  // Each tool's OpenAI function object ({"name", "description", "parameters"}) as JSON text. It
  // is written into the prompt as Python's json.dumps writes it, keys in the order given here.
  std::vector<std::string> tools;
  ThinkingMode thinking = ThinkingMode::kChat;
  ReasoningEffort effort = ReasoningEffort::kHigh;
  // The reply must call a tool (OpenAI's tool_choice "required" or a named function, Anthropic's
  // "any" or "tool"): "" for any of them, else the one named. The prompt then ends with the
  // reply's tool-call block opened (reply_opening), in chat mode only. Unset: the model chooses.
  std::optional<std::string> forced_tool;
  // The reply must not call a tool (tool_choice "none"): the tools stay in the prompt, and
  // generation stops where a tool-call block would begin (tool_calls_marker), as at a stop string.
  bool no_tool_calls = false;
  // The reply continues this text (a prefill: Anthropic's final assistant message, OpenAI's
  // continue_final_message): the prompt ends with it (reply_opening), in chat mode only and
  // without a forced tool; the answer's content is the continuation alone.
  std::string prefill;
};

// The text that begins a reply's tool-call block: where a reply of a conversation with
// no_tool_calls ends.
std::string_view tool_calls_marker();

// What a reply to `conversation` starts with before the model writes a token: empty, the
// tool-call block a forced tool opens, or the prefill. encode_chat ends the prompt with it, and
// the reply's text is read after it (read_reply).
std::string reply_opening(const Conversation& conversation);

// The prompt text, starting with <｜begin▁of▁sentence｜>. When the last message is a user's or a
// tool's, it ends with the assistant's turn opened (<｜Assistant｜> and <think> or </think>, then
// reply_opening). Tool schemas and arguments that are not valid JSON, or not objects, are errors
// naming them; so is a forced tool in thinking mode, without tools or not among them.
Result<std::string> encode_chat(const Conversation& conversation);

// The prompt's token ids. The encoder writes the begin-of-sentence token itself, as DeepSeek's
// does, so tokenizer.json's post-processor adds none (add_special_tokens false).
Result<std::vector<int64_t>> tokenize_chat_prompt(const Tokenizer& tokenizer,
                                                  const std::string& prompt);

struct ChatReply {
  std::string reasoning_content;  // thinking mode: the text before </think>
  std::string content;
  std::vector<ToolCall> tool_calls;  // ids are left empty: the caller names them
};

// Reads the text the model generated after the prompt. A finished reply ends with
// kEndOfSentence, and is read exactly as DeepSeek's parser reads it. One cut short (no
// kEndOfSentence) gives what it has so far: in thinking mode without </think> yet, all of it is
// reasoning. A malformed tool-call block, a special token inside the text or text after the end
// of sentence is an error saying where.
Result<ChatReply> parse_chat_reply(std::string_view text, ThinkingMode thinking);

// The reply from the generated text (without the end of sentence); `finished`: generation ended
// with it. A reply parse_chat_reply refuses (the model broke its format) comes back whole as
// content, so no generated text is lost.
ChatReply read_chat_reply(std::string text, bool finished, ThinkingMode thinking);

// The reply to `conversation` from its generated text: read_chat_reply of reply_opening and the
// text, with the prefill taken off the content's start (the answer is the continuation; none
// where the prefill holds all the content, having opened the tool-call block).
ChatReply read_reply(const Conversation& conversation, const std::string& generated, bool finished);

// The reply from the generated ids; `finished`: the last id is the eos token, which stands for
// kEndOfSentence whatever tokenizer.json calls it. As read_chat_reply; only an id the tokenizer
// does not know is an error.
Result<ChatReply> decode_chat_reply(const Tokenizer& tokenizer, std::vector<int64_t> tokens,
                                    bool finished, ThinkingMode thinking);

// A chat reply's text, as it streams, split into the reasoning_content and content deltas of
// OpenAI's chat.completion.chunk, by the markers DeepSeek-V4's format puts between them:
//   [reasoning</think>] content [\n\n<｜DSML｜tool_calls>...]
// Text that may be the start of a marker is held until the next piece says. The tool-call block
// is not streamed: it is held whole and its calls come in the last delta, from the reply that
// read_chat_reply reads once generation ends (the same reading as the non-streamed answer).
//
// A prefill and the deltas concatenate to that reply's reasoning_content and content. The one
// exception is a reply that breaks the format after reasoning went out (no </think> before the end,
// a special token in the text, a malformed tool-call block): the non-streamed answer gives the
// whole text as content, which sent deltas cannot take back; the stream then sends the text it
// still holds as content, so no text is lost.
struct ChatDelta {
  std::string reasoning_content;
  std::string content;
};

class ChatStream {
 public:
  explicit ChatStream(ThinkingMode thinking);
  // The reply to `conversation`: its text is read after reply_opening, whose prefill the client
  // has (never sent) and whose forced tool-call start it has not (sent as content only where
  // the format breaks, as the whole answer would hold it).
  explicit ChatStream(const Conversation& conversation);

  // The next piece of the reply's text (the eos token's excluded); what can be sent now.
  ChatDelta add(std::string_view text);

  // Once generation ended (`finished`: at the end of sentence): the whole text's reply, as
  // read_chat_reply reads it, and what of each part add() did not send.
  struct End {
    ChatReply reply;
    ChatDelta rest;
  };
  End finish(bool finished) const;

 private:
  enum class Part { kReasoning, kContent, kToolCalls };

  // Moves what is certain to be reasoning or content from held_ to `out`.
  void release(ChatDelta& out);
  // Moves held_'s first n bytes to `to` and `sent`, but the prefill's to `sent` only.
  void release_text(size_t n, std::string& to, std::string& sent);

  ThinkingMode thinking_;
  std::string text_;  // all of it
  Part part_;
  std::string held_;         // text not sent: maybe a marker's start, or the tool-call block
  ChatDelta sent_;           // all that was sent, the opening's part included
  size_t held_opening_ = 0;  // bytes at held_'s start from the prefill: never to be sent
};

}  // namespace dsv4
