// The choices of a streamed answer ("stream": true), one endpoint's kind each, built as the
// engine draws tokens; a request's n choices are n of these, each with its index. The server wraps
// each choice in a chunk object (id, object, created, model) and sends it as one server-sent event;
// these classes know what a choice says:
//   /v1/completions       {"index": 0, "text", "token_ids", "logprobs": null, "finish_reason"}
//                         after each token (the ids wait while their text is an incomplete
//                         character, and go with it), finish_reason on the last.
//   /v1/chat/completions  {"index": 0, "delta", "logprobs": null, "finish_reason"}: the first
//                         delta is {"role": "assistant", "content": ""}, then reasoning_content
//                         and content as the text comes (ChatStream, dsv4/chat.h), the last one the
//                         rest, the tool calls and finish_reason.
// The streamed text and ids concatenate to the non-streamed answer's (see ChatStream in dsv4/chat.h
// for the one exception, a reply that breaks DeepSeek's format).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dsv4/chat.h"
#include "dsv4/engine.h"
#include "dsv4/status.h"
#include "dsv4/tokenizer.h"
#include "format/json.h"

namespace dsv4::server {

class StreamChoices {
 public:
  virtual ~StreamChoices() = default;
  // Before the first token.
  virtual std::vector<format::Json> start() = 0;
  // After `token` was drawn (with its logprob when the request asked for them, else null): what
  // can be sent now (maybe nothing). An error ends the stream.
  virtual Result<std::vector<format::Json>> add(int64_t token, const TokenLogprob* logprob) = 0;
  // Once generation ended with `out` (which add() saw token by token): the last choices.
  virtual Result<std::vector<format::Json>> finish(const Generation& out) = 0;
  // A stop string ended the text (generated_text.h): generation should end here.
  virtual bool stopped() const = 0;
};

// A token's text in logprobs (the server's: what the id decodes to alone). Null: the request
// asked for no logprobs, and every choice's "logprobs" is null.
using TokenText = std::function<std::string(int64_t)>;

// `tokenizer` may be null: the text stays empty, each token is a chunk of its id (and `stop`
// must be empty). The text ends before the first of the `stop` strings. Each chunk carries the
// logprobs of its tokens (text_offset counting on from the chunk before). A non-empty `echo`
// (the prompt's text) is the first chunk. `hidden_token` adds no text (eos ending a formatted
// reply); -1 for none.
std::unique_ptr<StreamChoices> completion_choices(const Tokenizer* tokenizer,
                                                  std::vector<std::string> stop, size_t index,
                                                  TokenText logprob_text = nullptr,
                                                  std::string echo = "", int64_t hidden_token = -1);

// `id` is the response's (it names the tool calls); `eos_token_id` the engine's, whose text the
// reply's parser stands in for itself. The reply's text ends before the first of the `stop`
// strings.
// The reply to `conversation` (ChatStream(conversation), dsv4/chat.h: read after its forced tool
// call's start or its prefill, the prefill never sent). Each chunk carries {"content": [...]} for
// the tokens drawn since the chunk before.
std::unique_ptr<StreamChoices> chat_choices(const Tokenizer& tokenizer,
                                            const Conversation& conversation, std::string id,
                                            int64_t eos_token_id, std::vector<std::string> stop,
                                            size_t index, TokenText logprob_text = nullptr);

// What an Anthropic message stream starts with: the response's id ("msg_<id>"; it names the tool
// calls too), the model's name and the prompt's tokens.
struct MessageStart {
  std::string id;
  std::string model;
  int64_t input_tokens = 0;
};

// Anthropic's streamed message (/v1/messages, message_events.cpp): not OpenAI choices but the
// message's events, each a JSON object whose "type" names its server-sent event: message_start,
// content_block_start / _delta / _stop for the thinking, text and tool_use blocks, message_delta
// (stop_reason, stop_sequence, output_tokens) and message_stop. The text ends before the first of
// the `stop` strings.
// The reply to `conversation` is read as chat_choices reads it.
std::unique_ptr<StreamChoices> message_events(const Tokenizer& tokenizer,
                                              const MessageStart& message,
                                              const Conversation& conversation,
                                              int64_t eos_token_id, std::vector<std::string> stop);

}  // namespace dsv4::server
