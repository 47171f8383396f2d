// tests/chat/golden/chat_cases.json (DeepSeek's own encoder's prompts and parses) read into the
// public chat types.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

#include "dsv4/chat.h"
#include "format/json.h"
#include "testing/source_dir.h"

namespace dsv4::testing {

inline format::OrderedJson chat_golden() {
  std::ifstream in(source_path("tests/chat/golden/chat_cases.json"));
  std::stringstream text;
  text << in.rdbuf();
  return format::parse_ordered_json(text.str(), "chat_cases.json").value();
}

inline std::string string_or_empty(const format::OrderedJson& object, const char* key) {
  return object.contains(key) && object[key].is_string() ? object[key].get<std::string>() : "";
}

inline ToolCall golden_tool_call(const format::OrderedJson& call) {
  return {string_or_empty(call, "id"), call["function"]["name"].get<std::string>(),
          call["function"]["arguments"].get<std::string>()};
}

// One "encode" case's conversation (the golden messages are well formed; no checks here).
inline Conversation golden_conversation(const format::OrderedJson& c) {
  Conversation out;
  for (const auto& m : c["messages"]) {
    const std::string role = m["role"].get<std::string>();
    ChatMessage message;
    message.role = role == "system"      ? ChatRole::kSystem
                   : role == "user"      ? ChatRole::kUser
                   : role == "assistant" ? ChatRole::kAssistant
                                         : ChatRole::kTool;
    message.content = string_or_empty(m, "content");
    message.reasoning_content = string_or_empty(m, "reasoning_content");
    message.tool_call_id = string_or_empty(m, "tool_call_id");
    if (m.contains("tool_calls")) {
      for (const auto& call : m["tool_calls"]) message.tool_calls.push_back(golden_tool_call(call));
    }
    out.messages.push_back(message);
  }
  for (const auto& tool : c["tools"]) out.tools.push_back(tool["function"].dump());
  // "encode_json" cases give the tools as JSON text, whose numbers nlohmann would not keep.
  if (c.contains("tool_texts")) {
    for (const auto& text : c["tool_texts"]) out.tools.push_back(text.get<std::string>());
  }
  out.thinking = c["thinking"].get<bool>() ? ThinkingMode::kThinking : ThinkingMode::kChat;
  out.effort = c["reasoning_effort"] == "max" ? ReasoningEffort::kMax : ReasoningEffort::kHigh;
  return out;
}

}  // namespace dsv4::testing
