#include "server/chat_request.h"

#include <optional>
#include <string>

#include "server/openai_fields.h"
#include "server/output_format.h"

namespace dsv4::server {
namespace {

using format::OrderedJson;
using Refusal = std::optional<RequestError>;

Refusal read_tool_call(const OrderedJson& call, const std::string& path, ToolCall& out) {
  if (auto bad = expect_object(call, path)) return bad;
  if (auto bad = refuse_unknown(call, {"id", "type", "function"}, path)) return bad;
  if (present(call, "type") && call["type"] != "function") {
    return request_error(path + ".type", path + ".type must be \"function\"");
  }
  if (auto bad = read_text(call, path, "id", false, out.id)) return bad;
  const std::string function = path + ".function";
  if (!present(call, "function")) return request_error(function, function + " is required");
  if (auto bad = expect_object(call["function"], function)) return bad;
  if (auto bad = refuse_unknown(call["function"], {"name", "arguments"}, function)) return bad;
  if (auto bad = read_text(call["function"], function, "name", true, out.name)) return bad;
  return read_text(call["function"], function, "arguments", true, out.arguments);
}

// A message's content: a string, or (as LangChain, the Vercel AI SDK and LiteLLM send it) an
// array of {"type": "text", "text"} parts, joined by newlines as vLLM joins them. Other parts
// (images, audio, files) are refused by type.
Refusal read_content(const OrderedJson& m, const std::string& path, bool required,
                     std::string& out) {
  if (!present(m, "content") || !m["content"].is_array()) {
    return read_text(m, path, "content", required, out);
  }
  const std::string field = path + ".content";
  for (size_t i = 0; i < m["content"].size(); ++i) {
    const OrderedJson& part = m["content"][i];
    const std::string at = indexed(field, i);
    if (auto bad = expect_object(part, at)) return bad;
    std::string type, text;
    if (auto bad = read_text(part, at, "type", true, type)) return bad;
    if (type != "text") {
      return request_error(at + ".type",
                           "content part type \"" + type + "\" is not supported (text only)");
    }
    if (auto bad = refuse_unknown(part, {"type", "text"}, at)) return bad;
    if (auto bad = read_text(part, at, "text", true, text)) return bad;
    out += (i == 0 ? "" : "\n") + text;
  }
  return std::nullopt;
}

Refusal read_assistant(const OrderedJson& m, const std::string& path, ChatMessage& out) {
  if (auto bad =
          refuse_unknown(m, {"role", "content", "reasoning_content", "tool_calls", "name"}, path)) {
    return bad;
  }
  if (auto bad = read_content(m, path, false, out.content)) return bad;
  if (auto bad = read_text(m, path, "reasoning_content", false, out.reasoning_content)) return bad;
  if (!present(m, "tool_calls")) return std::nullopt;
  const std::string calls = path + ".tool_calls";
  if (!m["tool_calls"].is_array()) return request_error(calls, calls + " must be an array");
  for (size_t i = 0; i < m["tool_calls"].size(); ++i) {
    ToolCall call;
    if (auto bad = read_tool_call(m["tool_calls"][i], indexed(calls, i), call)) return bad;
    out.tool_calls.push_back(std::move(call));
  }
  return std::nullopt;
}

Refusal read_message(const OrderedJson& m, const std::string& path, ChatMessage& out) {
  if (auto bad = expect_object(m, path)) return bad;
  std::string role, ignored;
  if (auto bad = read_text(m, path, "role", true, role)) return bad;
  // A name changes nothing: DeepSeek's encoder does not write it.
  if (auto bad = read_text(m, path, "name", false, ignored)) return bad;
  if (role == "assistant") {
    out.role = ChatRole::kAssistant;
    return read_assistant(m, path, out);
  }
  if (role == "tool") {
    out.role = ChatRole::kTool;
    if (auto bad = refuse_unknown(m, {"role", "content", "tool_call_id"}, path)) return bad;
    if (auto bad = read_text(m, path, "tool_call_id", true, out.tool_call_id)) return bad;
    return read_content(m, path, true, out.content);
  }
  // OpenAI's "developer" is the system message of its newer models.
  if (role != "system" && role != "developer" && role != "user") {
    return request_error(path + ".role", "role \"" + role +
                                             "\" is not supported (system, developer, user, "
                                             "assistant, tool)");
  }
  out.role = role == "user" ? ChatRole::kUser : ChatRole::kSystem;
  if (auto bad = refuse_unknown(m, {"role", "content", "name"}, path)) return bad;
  return read_content(m, path, true, out.content);
}

// continue_final_message (vLLM's switch) true: the last message, an assistant's text, is the
// prefill the reply continues. add_generation_prompt, when given, must say the opposite.
Refusal read_continue(const OrderedJson& body, bool& out) {
  if (auto bad = read_bool(body, "", "continue_final_message", out)) return bad;
  bool generation_prompt = !out;
  if (auto bad = read_bool(body, "", "add_generation_prompt", generation_prompt)) return bad;
  if (generation_prompt == out) {
    return request_error("add_generation_prompt",
                         "add_generation_prompt must be the opposite of continue_final_message: "
                         "a reply either opens a new assistant turn or continues the last one");
  }
  return std::nullopt;
}

Refusal read_messages(const OrderedJson& body, Conversation& c) {
  std::vector<ChatMessage>& out = c.messages;
  bool prefill = false;
  if (auto bad = read_continue(body, prefill)) return bad;
  if (!body.contains("messages")) return request_error("messages", "messages is required");
  const OrderedJson& messages = body["messages"];
  if (!messages.is_array() || messages.empty()) {
    return request_error("messages", "messages must be a non-empty array");
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    ChatMessage message;
    if (auto bad = read_message(messages[i], indexed("messages", i), message)) return bad;
    out.push_back(std::move(message));
  }
  const std::string last = indexed("messages", out.size() - 1);
  if (prefill) {
    const ChatMessage& reply = out.back();
    if (reply.role != ChatRole::kAssistant || !reply.tool_calls.empty() ||
        !reply.reasoning_content.empty() || out.size() < 2) {
      return request_error(last,
                           "continue_final_message needs the last message to be an "
                           "assistant's text after another message");
    }
    c.prefill = reply.content;
    out.pop_back();
  }
  if (out.back().role != ChatRole::kUser && out.back().role != ChatRole::kTool) {
    return request_error(indexed("messages", out.size() - 1) + ".role",
                         "the last message must be the user's or a tool's: the model "
                         "answers it");
  }
  return std::nullopt;
}

// Each tool's function object, kept as its JSON text in the order given.
Refusal read_tools(const OrderedJson& body, std::vector<std::string>& out) {
  return read_objects(
      body, "tools", [&](const OrderedJson& tool, const std::string& path) -> Refusal {
        if (auto bad = refuse_unknown(tool, {"type", "function"}, path)) return bad;
        if (tool.value("type", OrderedJson()) != "function") {
          return request_error(path + ".type", path + ".type must be \"function\"");
        }
        const std::string function = path + ".function";
        if (!present(tool, "function")) return request_error(function, function + " is required");
        if (auto bad = expect_object(tool["function"], function)) return bad;
        std::string name;
        if (auto bad = read_text(tool["function"], function, "name", true, name)) return bad;
        // A JSON Schema, which is an object (OpenAI refuses anything else).
        if (present(tool["function"], "parameters")) {
          if (auto bad = expect_object(tool["function"]["parameters"], function + ".parameters"))
            return bad;
        }
        if (present(tool["function"], "strict") && !tool["function"]["strict"].is_boolean()) {
          return request_error(function + ".strict", function + ".strict must be a boolean");
        }
        out.push_back(tool["function"].dump());
        return std::nullopt;
      });
}

// tool_choice: "auto" (the default), "none" (no call), "required" (a call to any tool) or
// {"type": "function", "function": {"name"}} (a call to that one). encode_chat checks the name
// against the tools and the mode.
Refusal read_tool_choice(const OrderedJson& body, Conversation& c) {
  if (!present(body, "tool_choice")) return std::nullopt;
  const OrderedJson& choice = body["tool_choice"];
  if (read_tool_mode(choice, "required", c)) return std::nullopt;
  if (choice.is_object()) {
    if (auto bad = refuse_unknown(choice, {"type", "function"}, "tool_choice")) return bad;
    if (choice.value("type", OrderedJson()) != "function") {
      return request_error("tool_choice.type", "tool_choice.type must be \"function\"");
    }
    if (!present(choice, "function")) {
      return request_error("tool_choice.function", "tool_choice.function is required");
    }
    if (auto bad = expect_object(choice["function"], "tool_choice.function")) return bad;
    std::string name;
    if (auto bad = read_text(choice["function"], "tool_choice.function", "name", true, name)) {
      return bad;
    }
    c.forced_tool = name;
    return std::nullopt;
  }
  return request_error("tool_choice",
                       "tool_choice must be \"auto\", \"none\", \"required\" or a named function, "
                       "got " +
                           choice.dump());
}

// Thinking on or off from either switch (they must agree), and the reasoning effort.
Refusal read_thinking(const OrderedJson& body, Conversation& c) {
  std::optional<bool> on;
  std::string set_by;
  const auto set = [&](bool value, const std::string& field) -> Refusal {
    if (on && *on != value) return request_error(field, field + " contradicts " + set_by);
    on = value;
    set_by = field;
    return std::nullopt;
  };
  if (present(body, "thinking")) {
    const OrderedJson& t = body["thinking"];
    if (auto bad = expect_object(t, "thinking")) return bad;
    if (auto bad = refuse_unknown(t, {"type"}, "thinking")) return bad;
    if (t.value("type", OrderedJson()) != "enabled" &&
        t.value("type", OrderedJson()) != "disabled") {
      return request_error("thinking.type", "thinking.type must be \"enabled\" or \"disabled\"");
    }
    if (auto bad = set(t["type"] == "enabled", "thinking.type")) return bad;
  }
  if (present(body, "chat_template_kwargs")) {
    const OrderedJson& kwargs = body["chat_template_kwargs"];
    if (auto bad = expect_object(kwargs, "chat_template_kwargs")) return bad;
    if (auto bad =
            refuse_unknown(kwargs, {"thinking", "enable_thinking"}, "chat_template_kwargs")) {
      return bad;
    }
    for (const char* key : {"thinking", "enable_thinking"}) {
      if (!present(kwargs, key)) continue;
      bool value = false;
      if (auto bad = read_bool(kwargs, "chat_template_kwargs", key, value)) return bad;
      if (auto bad = set(value, std::string("chat_template_kwargs.") + key)) return bad;
    }
  }
  c.thinking = on.value_or(false) ? ThinkingMode::kThinking : ThinkingMode::kChat;
  std::string effort;
  if (auto bad = read_string(body, "reasoning_effort", effort)) return bad;
  if (effort == "xhigh" || effort == "max") {
    c.effort = ReasoningEffort::kMax;
  } else if (!effort.empty() && effort != "low" && effort != "medium" && effort != "high") {
    return request_error("reasoning_effort",
                         "reasoning_effort must be low, medium, high (all high for DeepSeek-V4), "
                         "xhigh or max (both max), got \"" +
                             effort + "\"");
  }
  return std::nullopt;
}

// logprobs (true or false) and top_logprobs (0 ... kMaxLogprobs, with logprobs true).
Refusal read_logprobs(const OrderedJson& body, ChatRequest& request) {
  bool asked = false;
  if (auto bad = read_bool(body, "", "logprobs", asked)) return bad;
  int64_t top = 0;
  if (auto bad = read_integer(body, "top_logprobs", 0, kMaxLogprobs, top)) return bad;
  if (present(body, "top_logprobs") && !asked) {
    return request_error("top_logprobs", "top_logprobs needs logprobs true");
  }
  request.logprobs = asked ? top : -1;
  return std::nullopt;
}

// A format is the whole reply, from its first token: not with reasoning before it, nor beside a
// tool call or a prefill, which the format would forbid or not see.
Refusal check_output_format(const ChatRequest& request) {
  if (!request.format) return std::nullopt;
  const Conversation& c = request.conversation;
  const char* field = "response_format";
  if (c.thinking != ThinkingMode::kChat) {
    return request_error(field, "a response format with thinking is not supported");
  }
  if (!c.tools.empty() && !c.no_tool_calls) {
    return request_error(field,
                         "a response format beside tools is not supported (unless "
                         "tool_choice is none)");
  }
  if (!c.prefill.empty()) {
    return request_error(field, "a response format with continue_final_message is not supported");
  }
  return std::nullopt;
}

// Unknown fields, and the chat API's own unimplemented ones unless they ask for nothing.
Refusal refuse_unsupported(const OrderedJson& body) {
  if (auto unknown = refuse_unknown(body, kOpenAiSharedFields,
                                    {"messages",
                                     "max_completion_tokens",
                                     "top_logprobs",
                                     "tools",
                                     "tool_choice",
                                     "parallel_tool_calls",
                                     "chat_template_kwargs",
                                     "thinking",
                                     "reasoning_effort",
                                     "continue_final_message",
                                     "add_generation_prompt"})) {
    return unknown;
  }
  if (auto bad = check_model_and_user(body)) return bad;
  const auto asks = [&](const char* field, const OrderedJson& no_op) {
    return present(body, field) && body[field] != no_op;
  };
  if (asks("parallel_tool_calls", true)) {
    return request_error("parallel_tool_calls", "parallel_tool_calls false is not supported");
  }
  if (present(body, "max_tokens") && present(body, "max_completion_tokens")) {
    return request_error("max_completion_tokens",
                         "give max_tokens or max_completion_tokens, not both");
  }
  return std::nullopt;
}

}  // namespace

std::variant<ChatRequest, RequestError> parse_chat_request(std::string_view body_text,
                                                           const RequestLimits& limits) {
  auto parsed = parse_request_body(body_text);
  if (auto* bad = std::get_if<RequestError>(&parsed)) return *bad;
  const OrderedJson& body = std::get<OrderedJson>(parsed);
  ChatRequest request;
  const char* max_tokens =
      present(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  request.max_tokens_given = present(body, max_tokens);
  // Every step runs, in order (a braced list is evaluated left to right); the first refusal is
  // the answer.
  for (const auto& step :
       {refuse_unsupported(body), read_messages(body, request.conversation),
        read_tools(body, request.conversation.tools), read_thinking(body, request.conversation),
        read_tool_choice(body, request.conversation),
        read_sampling(body, max_tokens, limits, request.sampling),
        read_stream(body, request.stream), read_stop(body, request.stop),
        read_logprobs(body, request), read_choices(body, request.n),
        read_output_format(body, request.format), check_output_format(request),
        read_tool_call_format(request.conversation, request.format)}) {
    if (step) return *step;
  }
  if (request.format && request.format->kind == OutputFormat::Kind::kToolCalls) {
    request.format_field = "tools";
  }
  return request;
}

}  // namespace dsv4::server
