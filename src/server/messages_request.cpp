#include "server/messages_request.h"

#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "server/output_format.h"

namespace dsv4::server {
namespace {

using format::OrderedJson;
using Refusal = std::optional<RequestError>;

ChatMessage message_of(ChatRole role, std::string content = "") {
  ChatMessage m;
  m.role = role;
  m.content = std::move(content);
  return m;
}

// A block's "type", which must be one of `allowed` in a `role` message.
Refusal read_block_type(const OrderedJson& block, const std::string& path,
                        std::initializer_list<std::string_view> allowed, const char* role,
                        std::string& type) {
  if (auto bad = expect_object(block, path)) return bad;
  if (auto bad = read_text(block, path, "type", true, type)) return bad;
  for (const std::string_view a : allowed) {
    if (type == a) return std::nullopt;
  }
  std::string list;
  for (const std::string_view a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
  return request_error(path + ".type", "a " + std::string(role) + " content block of type \"" +
                                           type + "\" is not supported (" + list + ")");
}

// Text that is a string or an array of {"type": "text", "text"} blocks, joined.
Refusal read_text_blocks(const OrderedJson& value, const std::string& path, std::string& out) {
  if (value.is_string()) {
    out = value.get<std::string>();
    return std::nullopt;
  }
  if (!value.is_array()) return request_error(path, path + " must be a string or an array");
  for (size_t i = 0; i < value.size(); ++i) {
    const std::string block = indexed(path, i);
    std::string type, text;
    if (auto bad = read_block_type(value[i], block, {"text"}, "text", type)) return bad;
    if (auto bad = refuse_unknown(value[i], {"type", "text", "cache_control", "citations"}, block))
      return bad;
    if (auto bad = read_text(value[i], block, "text", true, text)) return bad;
    out += text;
  }
  return std::nullopt;
}

// A user message: its text blocks each a user message (the encoder joins consecutive ones) and
// its tool results each a tool message, in order.
Refusal read_user(const OrderedJson& content, const std::string& path,
                  std::vector<ChatMessage>& out) {
  if (content.is_string()) {
    out.push_back(message_of(ChatRole::kUser, content.get<std::string>()));
    return std::nullopt;
  }
  if (!content.is_array()) return request_error(path, path + " must be a string or an array");
  for (size_t i = 0; i < content.size(); ++i) {
    const OrderedJson& block = content[i];
    const std::string where = indexed(path, i);
    std::string type;
    if (auto bad = read_block_type(block, where, {"text", "tool_result"}, "user", type)) return bad;
    if (type == "text") {
      ChatMessage text = message_of(ChatRole::kUser);
      if (auto bad = refuse_unknown(block, {"type", "text", "cache_control", "citations"}, where))
        return bad;
      if (auto bad = read_text(block, where, "text", true, text.content)) return bad;
      out.push_back(std::move(text));
      continue;
    }
    ChatMessage result = message_of(ChatRole::kTool);
    if (auto bad = refuse_unknown(
            block, {"type", "tool_use_id", "content", "is_error", "cache_control"}, where)) {
      return bad;
    }
    if (present(block, "is_error") && !block["is_error"].is_boolean()) {
      return request_error(where + ".is_error", where + ".is_error must be true or false");
    }
    if (auto bad = read_text(block, where, "tool_use_id", true, result.tool_call_id)) return bad;
    if (present(block, "content")) {
      if (auto bad = read_text_blocks(block["content"], where + ".content", result.content))
        return bad;
    }
    out.push_back(std::move(result));
  }
  return std::nullopt;
}

Refusal read_tool_use(const OrderedJson& block, const std::string& path, ToolCall& out) {
  if (auto bad = refuse_unknown(block, {"type", "id", "name", "input", "cache_control"}, path))
    return bad;
  if (auto bad = read_text(block, path, "id", true, out.id)) return bad;
  if (auto bad = read_text(block, path, "name", true, out.name)) return bad;
  const std::string input = path + ".input";
  if (!present(block, "input")) return request_error(input, input + " is required");
  if (auto bad = expect_object(block["input"], input)) return bad;
  out.arguments = block["input"].dump();
  return std::nullopt;
}

// An assistant message: text blocks are its content, thinking blocks its reasoning, tool_use
// blocks its calls.
Refusal read_assistant(const OrderedJson& content, const std::string& path, ChatMessage& out) {
  out.role = ChatRole::kAssistant;
  if (content.is_string()) {
    out.content = content.get<std::string>();
    return std::nullopt;
  }
  if (!content.is_array()) return request_error(path, path + " must be a string or an array");
  for (size_t i = 0; i < content.size(); ++i) {
    const OrderedJson& block = content[i];
    const std::string where = indexed(path, i);
    std::string type, text;
    if (auto bad =
            read_block_type(block, where, {"text", "thinking", "redacted_thinking", "tool_use"},
                            "assistant", type)) {
      return bad;
    }
    if (type == "redacted_thinking") continue;  // opaque: nothing the model could read
    if (type == "tool_use") {
      ToolCall call;
      if (auto bad = read_tool_use(block, where, call)) return bad;
      out.tool_calls.push_back(std::move(call));
      continue;
    }
    const bool thinking = type == "thinking";
    if (auto bad = refuse_unknown(
            block,
            thinking ? std::initializer_list<std::string_view>{"type", "thinking", "signature"}
                     : std::initializer_list<std::string_view>{"type", "text", "cache_control",
                                                               "citations"},
            where)) {
      return bad;
    }
    if (auto bad = read_text(block, where, thinking ? "thinking" : "text", true, text)) return bad;
    (thinking ? out.reasoning_content : out.content) += text;
  }
  return std::nullopt;
}

// The messages; a final assistant message is the reply's prefill.
Refusal read_messages(const OrderedJson& body, Conversation& c) {
  std::vector<ChatMessage>& out = c.messages;
  bool prefilled = false;
  if (!present(body, "messages")) return request_error("messages", "messages is required");
  const OrderedJson& messages = body["messages"];
  if (!messages.is_array() || messages.empty()) {
    return request_error("messages", "messages must be a non-empty array");
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const OrderedJson& m = messages[i];
    const std::string path = indexed("messages", i);
    if (auto bad = expect_object(m, path)) return bad;
    if (auto bad = refuse_unknown(m, {"role", "content"}, path)) return bad;
    std::string role;
    if (auto bad = read_text(m, path, "role", true, role)) return bad;
    if (!present(m, "content"))
      return request_error(path + ".content", path + ".content is required");
    if (role == "user") {
      if (auto bad = read_user(m["content"], path + ".content", out)) return bad;
    } else if (role == "assistant") {
      ChatMessage reply;
      if (auto bad = read_assistant(m["content"], path + ".content", reply)) return bad;
      if (i + 1 < messages.size()) {
        out.push_back(std::move(reply));
        continue;
      }
      // The last message: a prefill the reply continues.
      if (!reply.tool_calls.empty() || !reply.reasoning_content.empty()) {
        return request_error(path + ".content",
                             "a final assistant message (a prefill) must hold text only");
      }
      c.prefill = std::move(reply.content);
      prefilled = true;
    } else {
      return request_error(path + ".role",
                           "role \"" + role + "\" is not supported (user, assistant)");
    }
  }
  if (out.empty() || out.back().role == ChatRole::kAssistant) {
    if (prefilled && messages.size() == 1) {
      return request_error("messages[0].role",
                           "a final assistant message (a prefill) needs a user message before it");
    }
    const size_t answered = messages.size() - (prefilled ? 2 : 1);
    const std::string last = indexed("messages", answered) + ".content";
    return request_error(last, last + " has no text or tool result for the model to answer");
  }
  return std::nullopt;
}

// "system": a string or text blocks, the conversation's first message.
Refusal read_system(const OrderedJson& body, std::vector<ChatMessage>& out) {
  if (!present(body, "system")) return std::nullopt;
  ChatMessage system = message_of(ChatRole::kSystem);
  if (auto bad = read_text_blocks(body["system"], "system", system.content)) return bad;
  out.insert(out.begin(), std::move(system));
  return std::nullopt;
}

// Custom tools, each as the OpenAI function object the chat encoder writes into the prompt.
Refusal read_tools(const OrderedJson& body, std::vector<std::string>& out) {
  return read_objects(
      body, "tools", [&](const OrderedJson& tool, const std::string& path) -> Refusal {
        std::string type = "custom", name, description;
        if (auto bad = read_text(tool, path, "type", false, type)) return bad;
        if (type != "custom") {
          return request_error(path + ".type",
                               "tool type \"" + type +
                                   "\" is not supported (Anthropic's server tools); "
                                   "give custom tools with an input_schema");
        }
        if (auto bad = refuse_unknown(
                tool, {"type", "name", "description", "input_schema", "cache_control", "strict"},
                path)) {
          return bad;
        }
        if (present(tool, "strict") && !tool["strict"].is_boolean()) {
          return request_error(path + ".strict", path + ".strict must be a boolean");
        }
        if (auto bad = read_text(tool, path, "name", true, name)) return bad;
        if (auto bad = read_text(tool, path, "description", false, description)) return bad;
        const std::string schema = path + ".input_schema";
        if (!present(tool, "input_schema")) return request_error(schema, schema + " is required");
        if (auto bad = expect_object(tool["input_schema"], schema)) return bad;
        OrderedJson function = {{"name", name}};
        if (present(tool, "description")) function["description"] = description;
        function["parameters"] = tool["input_schema"];
        // Strict: the calls' input keeps to input_schema (structured outputs).
        if (tool.value("strict", false)) function["strict"] = true;
        out.push_back(function.dump());
        return std::nullopt;
      });
}

// tool_choice: {"type": "auto"} (the default), "none" (no call), "any" (a call to any tool) or
// "tool" with a name (a call to that one); disable_parallel_tool_use true is not supported.
Refusal read_tool_choice(const OrderedJson& body, Conversation& c) {
  if (!present(body, "tool_choice")) return std::nullopt;
  const OrderedJson& choice = body["tool_choice"];
  if (auto bad = expect_object(choice, "tool_choice")) return bad;
  if (auto bad =
          refuse_unknown(choice, {"type", "name", "disable_parallel_tool_use"}, "tool_choice"))
    return bad;
  if (present(choice, "disable_parallel_tool_use") &&
      choice["disable_parallel_tool_use"] != false) {
    return request_error("tool_choice.disable_parallel_tool_use",
                         "disable_parallel_tool_use true is not supported");
  }
  const OrderedJson type = choice.value("type", OrderedJson());
  if (read_tool_mode(type, "any", c)) return std::nullopt;
  if (type == "tool") {
    std::string name;
    if (auto bad = read_text(choice, "tool_choice", "name", true, name)) return bad;
    c.forced_tool = name;
    return std::nullopt;
  }
  return request_error("tool_choice.type",
                       "tool_choice.type must be \"auto\", \"none\", \"any\" or \"tool\"");
}

Refusal read_thinking(const OrderedJson& body, ThinkingMode& out) {
  if (!present(body, "thinking")) return std::nullopt;
  const OrderedJson& t = body["thinking"];
  if (auto bad = expect_object(t, "thinking")) return bad;
  if (auto bad = refuse_unknown(t, {"type", "budget_tokens"}, "thinking")) return bad;
  const OrderedJson type = t.value("type", OrderedJson());
  if (type == "disabled") return std::nullopt;
  if (type != "enabled") {
    return request_error("thinking.type", "thinking.type must be \"enabled\" or \"disabled\"");
  }
  if (!present(t, "budget_tokens") || !t["budget_tokens"].is_number_integer() ||
      t["budget_tokens"].get<int64_t>() < 1) {
    return request_error("thinking.budget_tokens",
                         "thinking.budget_tokens must be a positive integer");
  }
  out = ThinkingMode::kThinking;
  return std::nullopt;
}

// The conversation's fields, shared by both endpoints.
Refusal read_conversation(const OrderedJson& body, Conversation& c) {
  for (const auto& step :
       {read_messages(body, c), read_system(body, c.messages), read_tools(body, c.tools),
        read_thinking(body, c.thinking), read_tool_choice(body, c)}) {
    if (step) return step;
  }
  return std::nullopt;
}

Refusal check_model_and_metadata(const OrderedJson& body) {
  std::string ignored;
  if (auto bad = read_text(body, "", "model", false, ignored)) return bad;
  if (present(body, "metadata")) return expect_object(body["metadata"], "metadata");
  return std::nullopt;
}

std::variant<OrderedJson, RequestError> read_body(std::string_view text,
                                                  std::initializer_list<std::string_view> known) {
  auto parsed = parse_request_body(text);
  if (auto* bad = std::get_if<RequestError>(&parsed)) return *bad;
  const OrderedJson& body = std::get<OrderedJson>(parsed);
  if (auto bad = refuse_unknown(body, known)) return *bad;
  if (auto bad = check_model_and_metadata(body)) return *bad;
  return parsed;
}

}  // namespace

// Anthropic documents no limit on stop_sequences; this one keeps the stop matcher's work small.
constexpr size_t kMaxStopSequences = 64;

std::variant<MessagesRequest, RequestError> parse_messages_request(std::string_view body_text,
                                                                   const RequestLimits& limits) {
  auto parsed = read_body(
      body_text, {"model", "messages", "system", "max_tokens", "temperature", "top_p", "top_k",
                  "stop_sequences", "stream", "tools", "tool_choice", "thinking", "metadata"});
  if (auto* bad = std::get_if<RequestError>(&parsed)) return *bad;
  const OrderedJson& body = std::get<OrderedJson>(parsed);
  MessagesRequest request;
  if (!present(body, "max_tokens")) return request_error("max_tokens", "max_tokens is required");
  // Anthropic's ranges, narrower than OpenAI's: max_tokens at least 1, temperature at most 1.
  int64_t max_tokens = 1;
  if (auto bad =
          read_integer(body, "max_tokens", 1, std::numeric_limits<int32_t>::max(), max_tokens)) {
    return *bad;
  }
  if (present(body, "temperature") && body["temperature"].is_number() &&
      !(body["temperature"].get<double>() <= 1.0)) {
    return request_error("temperature",
                         "temperature must be in [0, 1], got " + body["temperature"].dump());
  }
  StreamOptions stream;
  for (const auto& step :
       {read_conversation(body, request.conversation),
        // Anthropic's clients ask for more than any context (Claude Code: 32000); the server
        // cuts max_tokens to what the context leaves after the prompt.
        read_sampling(body, "max_tokens", {std::numeric_limits<int32_t>::max(), limits.vocab_size},
                      request.sampling),
        read_stop(body, request.stop, "stop_sequences", kMaxStopSequences),
        read_stream(body, stream), read_tool_call_format(request.conversation, request.format)}) {
    if (step) return *step;
  }
  request.stream = stream.enabled;
  return request;
}

std::variant<Conversation, RequestError> parse_count_tokens_request(std::string_view body_text) {
  auto parsed =
      read_body(body_text, {"model", "messages", "system", "tools", "tool_choice", "thinking"});
  if (auto* bad = std::get_if<RequestError>(&parsed)) return *bad;
  Conversation conversation;
  if (auto bad = read_conversation(std::get<OrderedJson>(parsed), conversation)) return *bad;
  return conversation;
}

}  // namespace dsv4::server
