#include "server/openai_json.h"

namespace dsv4::server {

using format::Json;

Json usage_json(int64_t n_prompt, int64_t n_completion) {
  return {{"prompt_tokens", n_prompt},
          {"completion_tokens", n_completion},
          {"total_tokens", n_prompt + n_completion}};
}

const char* finish_reason(const Generation& out, bool stop_string) {
  return out.stopped_at_eos || stop_string ? "stop" : "length";
}

const char* chat_finish_reason(const ChatReply& reply, const Generation& out, bool stop_string) {
  return reply.tool_calls.empty() ? finish_reason(out, stop_string) : "tool_calls";
}

Json completion_logprobs_json(const std::vector<int64_t>& tokens,
                              const std::vector<const TokenLogprob*>& logprobs,
                              const std::function<std::string(int64_t)>& text_of,
                              size_t first_offset) {
  Json texts = Json::array(), values = Json::array(), tops = Json::array(), offsets = Json::array();
  size_t offset = first_offset;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string text = text_of(tokens[i]);
    texts.push_back(text);
    offsets.push_back(offset);
    offset += text.size();
    const TokenLogprob* lp = i < logprobs.size() ? logprobs[i] : nullptr;
    if (lp == nullptr) {
      values.push_back(nullptr);
      tops.push_back(nullptr);
      continue;
    }
    values.push_back(lp->logprob);
    Json top = Json::object();
    // Most likely first; a text two ids share keeps the likelier one's logprob.
    for (const auto& [id, logprob] : lp->top) {
      const std::string key = text_of(id);
      if (!top.contains(key)) top[key] = logprob;
    }
    if (!top.contains(text)) top[text] = lp->logprob;
    tops.push_back(std::move(top));
  }
  return {{"tokens", texts},
          {"token_logprobs", values},
          {"top_logprobs", tops},
          {"text_offset", offsets}};
}

Json chat_logprobs_json(const std::vector<TokenLogprob>& logprobs,
                        const std::function<std::string(int64_t)>& text_of) {
  const auto entry = [&](int64_t token, float logprob) {
    const std::string text = text_of(token);
    std::vector<int> bytes;  // as numbers 0-255: a token may hold part of a character
    for (const unsigned char byte : text) bytes.push_back(byte);
    return Json{{"token", text}, {"logprob", logprob}, {"bytes", bytes}};
  };
  Json content = Json::array();
  for (const TokenLogprob& lp : logprobs) {
    Json item = entry(lp.token, lp.logprob);
    item["top_logprobs"] = Json::array();
    for (const auto& [id, logprob] : lp.top) item["top_logprobs"].push_back(entry(id, logprob));
    content.push_back(std::move(item));
  }
  return {{"content", std::move(content)}};
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
