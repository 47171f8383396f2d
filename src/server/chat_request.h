// The body of POST /v1/chat/completions (OpenAI's chat API), checked field by field into a
// dsv4::Conversation (include/dsv4/chat.h) and sampling parameters.
//   messages      system, user, assistant (content, reasoning_content, tool_calls) and tool
//                 messages; content is a string (assistant: or null); the last message is the
//                 user's or a tool's, which the model answers. Errors name the message's index
//                 and field ("messages[2].tool_calls[0].function.arguments").
//   tools         type "function" tools; their function objects go into the prompt as given.
//   thinking      DeepSeek's API switch {"type": "enabled" | "disabled"}, or vLLM's
//                 chat_template_kwargs {"thinking": bool} / {"enable_thinking": bool}; both may
//                 be given if they agree. Off by default.
//   reasoning_effort  DeepSeek's mapping: "low", "medium", "high" -> high (the default),
//                 "xhigh", "max" -> max.
// Sampling fields as for /v1/completions (request_fields.h); max_completion_tokens is
// max_tokens' newer name; stop, n, stream and stream_options as there too; logprobs and
// top_logprobs (streamed too, each chunk with the tokens drawn since the one before); tool_choice
// "auto", "none" (the reply ends where a call would begin), "required" or a named function (the
// reply then opens with that call: chat mode only); response_format and vLLM's
// structured_outputs (server/output_format.h) hold the reply's content to a format, in chat mode
// without tool calls or a prefill (the format is the whole reply); tools whose function has
// "strict": true hold the reply's tool calls to their parameters (output_format.h). Fields that
// would change the
// answer and are not implemented (parallel_tool_calls false) are refused by name, as are unknown
// fields and roles (developer, function).
#pragma once

#include <cstdint>
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

struct ChatRequest {
  Conversation conversation;
  SamplingParams sampling;
  StreamOptions stream;
  std::vector<std::string> stop;  // stop strings (stop_strings.h)
  int64_t logprobs = -1;  // "logprobs": true: each token's logprob and top_logprobs alternatives
  // Neither max_tokens nor max_completion_tokens given: the reply may fill the context (OpenAI's
  // chat default), which the server sets once it knows the prompt's length.
  bool max_tokens_given = false;
  int64_t n = 1;                       // choices, each drawn with its own seed (seed + index)
  std::optional<OutputFormat> format;  // the text the reply must be (structured outputs)
  std::string format_field = "response_format";  // what asked for it: response_format or tools
};

// Parses and checks `body` within the engine's `limits`.
std::variant<ChatRequest, RequestError> parse_chat_request(std::string_view body,
                                                           const RequestLimits& limits);

}  // namespace dsv4::server
