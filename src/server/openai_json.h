// The parts of OpenAI's response objects that the streamed and the whole answers share, so both
// say the same: usage, the finish reasons, tool calls and the error body.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dsv4/chat.h"
#include "dsv4/engine.h"
#include "format/json.h"

namespace dsv4::server {

// {"prompt_tokens", "completion_tokens", "total_tokens"}.
format::Json usage_json(int64_t n_prompt, const Generation& out);

// "stop" after the eos token or at a stop string (`stop_string`), "length" when max_tokens ran
// out.
const char* finish_reason(const Generation& out, bool stop_string);
// The same, or "tool_calls" when the reply calls tools.
const char* chat_finish_reason(const ChatReply& reply, const Generation& out, bool stop_string);

// The reply's calls as OpenAI's tool_calls array; `id` (the response's) names them uniquely
// within the server: call_<id>_<index>.
format::Json tool_calls_json(const std::vector<ToolCall>& calls, const std::string& id);

// {"error": {"message", "type", "param", "code"}}; the type follows the HTTP status (an
// invalid_request_error below 500, a server_error from 500).
format::Json error_json(int status, const std::string& message, const std::string& param = "");

}  // namespace dsv4::server
