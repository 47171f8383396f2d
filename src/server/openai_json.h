// The parts of OpenAI's response objects that the streamed and the whole answers share, so both
// say the same: usage, the finish reasons, tool calls and the error body.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dsv4/chat.h"
#include "dsv4/engine.h"
#include "format/json.h"

namespace dsv4::server {

// {"prompt_tokens", "completion_tokens", "total_tokens"}.
format::Json usage_json(int64_t n_prompt, int64_t n_completion);

// "stop" after the eos token or at a stop string (`stop_string`), "length" when max_tokens ran
// out.
const char* finish_reason(const Generation& out, bool stop_string);
// The same, or "tool_calls" when the reply calls tools.
const char* chat_finish_reason(const ChatReply& reply, const Generation& out, bool stop_string);

// OpenAI's legacy completion "logprobs" object {"tokens", "token_logprobs", "top_logprobs",
// "text_offset"} for `tokens` and their logprobs (null for none: an echoed prompt's first
// token), each token named by `text_of`; a token's top_logprobs holds it and its alternatives.
// text_offset: where each token's text starts in the choice's text, the first at first_offset
// (a stream's chunk goes on from the one before).
format::Json completion_logprobs_json(const std::vector<int64_t>& tokens,
                                      const std::vector<const TokenLogprob*>& logprobs,
                                      const std::function<std::string(int64_t)>& text_of,
                                      size_t first_offset = 0);

// The chat API's "logprobs" object {"content": [{"token", "logprob", "bytes", "top_logprobs":
// [{"token", "logprob", "bytes"}, ...]}, ...]}, a token's text from `text_of`.
format::Json chat_logprobs_json(const std::vector<TokenLogprob>& logprobs,
                                const std::function<std::string(int64_t)>& text_of);

// The reply's calls as OpenAI's tool_calls array; `id` (the response's) names them uniquely
// within the server: call_<id>_<index>.
format::Json tool_calls_json(const std::vector<ToolCall>& calls, const std::string& id);

// {"error": {"message", "type", "param", "code"}}; the type follows the HTTP status (an
// invalid_request_error below 500, a server_error from 500).
format::Json error_json(int status, const std::string& message, const std::string& param = "");

}  // namespace dsv4::server
