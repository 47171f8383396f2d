// The body of POST /v1/messages (Anthropic's Messages API, which DeepSeek's own API also serves,
// so that Anthropic clients such as Claude Code can use the model), checked field by field into a
// dsv4::Conversation (include/dsv4/chat.h) and sampling parameters:
//   system        a string or an array of text blocks: the system message.
//   messages      user and assistant messages, content a string or an array of blocks: user
//                 text and tool_result (content a string or text blocks; is_error is read but
//                 DeepSeek's format has no place for it), assistant text, thinking (its
//                 reasoning; redacted_thinking, opaque, is dropped) and tool_use (input an object:
//                 the call's arguments). The last message is the user's: a final assistant
//                 message (a prefill to continue) is refused. Errors name the message's index and
//                 block ("messages[2].content[1].input").
//   tools         custom tools {name, description, input_schema, strict}, written into the prompt
//                 as the OpenAI function objects {name, description, parameters} DeepSeek's format
//                 takes; with strict true, the calls' input keeps to input_schema (structured
//                 outputs, output_format.h). Anthropic's server tools (a type other than
//                 "custom") are refused.
//   tool_choice   {"type": "auto"}, "none" (the reply ends where a call would begin), "any" or
//                 "tool" with a name (the reply then opens with that call: thinking off only).
//   thinking      {"type": "enabled", "budget_tokens": N} or {"type": "disabled"} (the default).
//                 The budget is read, not enforced: the model ends its reasoning itself, within
//                 max_tokens.
//   max_tokens (required; the server cuts it to what the context leaves after the prompt, as
//   Anthropic's clients ask for more than any context), temperature, top_p, top_k,
//   stop_sequences (at most 4), stream;
//   model and metadata are read and ignored; cache_control is accepted on any block (prefix
//   caching is automatic). Unknown fields and block types are refused by name.
// POST /v1/messages/count_tokens takes the same body without max_tokens, sampling and stream.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "dsv4/chat.h"
#include "dsv4/engine.h"
#include "dsv4/structured_output.h"
#include "server/request_fields.h"

namespace dsv4::server {

struct MessagesRequest {
  Conversation conversation;
  SamplingParams sampling;
  std::vector<std::string> stop;  // stop_sequences (stop_strings.h)
  bool stream = false;
  std::optional<OutputFormat> format;  // strict tools' (output_format.h)
};

// Parses and checks a /v1/messages body within the engine's `limits`.
std::variant<MessagesRequest, RequestError> parse_messages_request(std::string_view body,
                                                                   const RequestLimits& limits);

// Parses and checks a /v1/messages/count_tokens body: the conversation alone.
std::variant<Conversation, RequestError> parse_count_tokens_request(std::string_view body);

}  // namespace dsv4::server
