#include "server/openai_json.h"

namespace dsv4::server {

using format::Json;

Json usage_json(int64_t n_prompt, const Generation& out) {
  const auto n_out = static_cast<int64_t>(out.tokens.size());
  return {{"prompt_tokens", n_prompt},
          {"completion_tokens", n_out},
          {"total_tokens", n_prompt + n_out}};
}

const char* finish_reason(const Generation& out, bool stop_string) {
  return out.stopped_at_eos || stop_string ? "stop" : "length";
}

const char* chat_finish_reason(const ChatReply& reply, const Generation& out, bool stop_string) {
  return reply.tool_calls.empty() ? finish_reason(out, stop_string) : "tool_calls";
}

Json tool_calls_json(const std::vector<ToolCall>& calls, const std::string& id) {
  Json out = Json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    out.push_back({{"id", "call_" + id + "_" + std::to_string(i)},
                   {"type", "function"},
                   {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}});
  }
  return out;
}

Json error_json(int status, const std::string& message, const std::string& param) {
  return {{"error",
           {{"message", message},
            {"type", status < 500 ? "invalid_request_error" : "server_error"},
            {"param", param.empty() ? Json() : Json(param)},
            {"code", nullptr}}}};
}

}  // namespace dsv4::server
