#include "server/messages_json.h"

namespace dsv4::server {

using format::Json;

std::string tool_use_id(const std::string& id, size_t index) {
  return "toolu_" + id + "_" + std::to_string(index);
}

Result<Json> tool_use_json(const ToolCall& call, const std::string& id) {
  DSV4_ASSIGN_OR_RETURN(Json input, format::parse_json(call.arguments, "a tool call's arguments"));
  if (!input.is_object()) {
    return internal_error("the arguments of tool call " + call.name + " are not a JSON object");
  }
  return Json{{"type", "tool_use"}, {"id", id}, {"name", call.name}, {"input", std::move(input)}};
}

Result<Json> message_content_json(const ChatReply& reply, ThinkingMode thinking,
                                  const std::string& id) {
  Json content = Json::array();
  if (thinking == ThinkingMode::kThinking) {
    content.push_back(
        {{"type", "thinking"}, {"thinking", reply.reasoning_content}, {"signature", ""}});
  }
  if (!reply.content.empty() || reply.tool_calls.empty()) {
    content.push_back({{"type", "text"}, {"text", reply.content}});
  }
  for (size_t i = 0; i < reply.tool_calls.size(); ++i) {
    DSV4_ASSIGN_OR_RETURN(Json call, tool_use_json(reply.tool_calls[i], tool_use_id(id, i)));
    content.push_back(std::move(call));
  }
  return content;
}

const char* stop_reason(const ChatReply& reply, const Generation& out,
                        const std::string& stop_found) {
  if (!reply.tool_calls.empty()) return "tool_use";
  if (stop_found == tool_calls_marker()) return "end_turn";
  if (!stop_found.empty()) return "stop_sequence";
  return out.stopped_at_eos ? "end_turn" : "max_tokens";
}

Json stop_sequence_json(const std::string& stop_found) {
  if (stop_found.empty() || stop_found == tool_calls_marker()) return nullptr;
  return stop_found;
}

Json message_usage_json(int64_t input_tokens, int64_t output_tokens) {
  return {{"input_tokens", input_tokens}, {"output_tokens", output_tokens}};
}

Json messages_error_json(int status, const std::string& message) {
  const char* type = status == 401   ? "authentication_error"
                     : status == 404 ? "not_found_error"
                     : status == 413 ? "request_too_large"
                     : status == 503 ? "overloaded_error"
                     : status >= 500 ? "api_error"
                                     : "invalid_request_error";
  return {{"type", "error"}, {"error", {{"type", type}, {"message", message}}}};
}

}  // namespace dsv4::server
