// The parts of Anthropic's Messages API responses that the streamed and the whole answers share
// (POST /v1/messages), so both say the same: content blocks, stop reasons, usage, errors.
#pragma once

#include <cstdint>
#include <string>

#include "dsv4/chat.h"
#include "dsv4/engine.h"
#include "dsv4/status.h"
#include "format/json.h"

namespace dsv4::server {

// A reply's tool_use block id: toolu_<id>_<index>, `id` the response's.
std::string tool_use_id(const std::string& id, size_t index);

// A tool call's {"type": "tool_use", "id", "name", "input"}; its arguments must be a JSON object
// (the chat parser writes them so).
Result<format::Json> tool_use_json(const ToolCall& call, const std::string& id);

// The reply's content blocks: {"type": "thinking", "thinking", "signature": ""} in thinking
// mode, {"type": "text", "text"} unless the reply is tool calls alone, then its tool_use blocks.
Result<format::Json> message_content_json(const ChatReply& reply, ThinkingMode thinking,
                                          const std::string& id);

// "tool_use" when the reply calls tools, "stop_sequence" at one of the request's stop strings
// (`stop_found`, as GeneratedText::stop_found gives it), "end_turn" at the end of sentence or
// where a tool call would have begun (tool_choice "none"), "max_tokens" when max_tokens ran out.
const char* stop_reason(const ChatReply& reply, const Generation& out,
                        const std::string& stop_found);

// The response's "stop_sequence": the request's stop string that ended the text, else null.
format::Json stop_sequence_json(const std::string& stop_found);

// {"input_tokens", "output_tokens"}.
format::Json message_usage_json(int64_t input_tokens, int64_t output_tokens);

// {"type": "error", "error": {"type", "message"}}; the type follows the HTTP status
// (invalid_request_error, authentication_error, not_found_error, request_too_large,
// overloaded_error for 503, api_error from 500).
format::Json messages_error_json(int status, const std::string& message);

}  // namespace dsv4::server
