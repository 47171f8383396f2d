#include "server/output_format.h"

#include <string>

namespace dsv4::server {
namespace {

using format::OrderedJson;

std::optional<RequestError> read_response_format(const OrderedJson& value,
                                                 std::optional<OutputFormat>& out) {
  if (!value.is_object() || !value.contains("type") || !value["type"].is_string()) {
    return request_error("response_format", "response_format must be an object with a type");
  }
  const std::string type = value["type"].get<std::string>();
  if (type == "text") {
    if (auto bad = refuse_unknown(value, {"type"}, "response_format")) return bad;
    return std::nullopt;
  }
  if (type == "json_object") {
    if (auto bad = refuse_unknown(value, {"type"}, "response_format")) return bad;
    out = OutputFormat{OutputFormat::Kind::kJsonObject, ""};
    return std::nullopt;
  }
  if (type != "json_schema") {
    return request_error("response_format.type",
                         "response_format type must be text, json_object or json_schema");
  }
  if (auto bad = refuse_unknown(value, {"type", "json_schema"}, "response_format")) return bad;
  const char* where = "response_format.json_schema";
  if (!value.contains("json_schema") || !value["json_schema"].is_object()) {
    return request_error(where, "json_schema must be an object with the schema");
  }
  const OrderedJson& spec = value["json_schema"];
  if (auto bad = refuse_unknown(spec, {"name", "schema", "strict", "description"}, where)) {
    return bad;
  }
  if (present(spec, "strict") && !spec["strict"].is_boolean()) {
    return request_error("response_format.json_schema.strict", "strict must be true or false");
  }
  if (!spec.contains("schema")) {
    return request_error("response_format.json_schema.schema", "json_schema needs a schema");
  }
  out = OutputFormat{OutputFormat::Kind::kJsonSchema, spec["schema"].dump()};
  return std::nullopt;
}

// A regex that matches exactly `text`.
std::string regex_literal(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (std::string_view("\\^$.|?*+()[]{}/-").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

std::optional<RequestError> read_structured_outputs(const OrderedJson& value,
                                                    std::optional<OutputFormat>& out) {
  const char* where = "structured_outputs";
  if (!value.is_object()) return request_error(where, "structured_outputs must be an object");
  for (const char* refused : {"grammar", "structural_tag", "whitespace_pattern", "json_object"}) {
    if (present(value, refused)) {
      return request_error(std::string(where) + "." + refused,
                           std::string("structured_outputs ") + refused + " is not supported");
    }
  }
  if (auto bad = refuse_unknown(value, {"json", "regex", "choice"}, where)) return bad;
  if (value.size() != 1) {
    return request_error(where, "structured_outputs takes one of json, regex or choice");
  }
  if (present(value, "json")) {
    const OrderedJson& schema = value["json"];
    // vLLM takes the schema as an object or as its JSON text.
    out = OutputFormat{OutputFormat::Kind::kJsonSchema,
                       schema.is_string() ? schema.get<std::string>() : schema.dump()};
  } else if (present(value, "regex")) {
    if (!value["regex"].is_string()) {
      return request_error("structured_outputs.regex", "regex must be a string");
    }
    out = OutputFormat{OutputFormat::Kind::kRegex, value["regex"].get<std::string>()};
  } else {
    const OrderedJson& choice = value["choice"];
    if (!choice.is_array() || choice.empty()) {
      return request_error("structured_outputs.choice", "choice must be a non-empty array");
    }
    std::string alternatives;
    for (const OrderedJson& c : choice) {
      if (!c.is_string()) return request_error("structured_outputs.choice", "choices are strings");
      alternatives += alternatives.empty() ? '(' : '|';
      alternatives += regex_literal(c.get<std::string>());
    }
    alternatives += ')';
    out = OutputFormat{OutputFormat::Kind::kRegex, alternatives};
  }
  return std::nullopt;
}

}  // namespace

std::optional<RequestError> read_output_format(const OrderedJson& body,
                                               std::optional<OutputFormat>& out) {
  out.reset();
  if (present(body, "response_format") && present(body, "structured_outputs")) {
    return request_error("structured_outputs",
                         "give response_format or structured_outputs, not both");
  }
  if (present(body, "response_format")) return read_response_format(body["response_format"], out);
  if (present(body, "structured_outputs")) {
    return read_structured_outputs(body["structured_outputs"], out);
  }
  return std::nullopt;
}

std::optional<RequestError> read_tool_call_format(const Conversation& conversation,
                                                  std::optional<OutputFormat>& out) {
  if (conversation.tools.empty() || conversation.no_tool_calls) return std::nullopt;
  OrderedJson tools = OrderedJson::array();
  bool strict = false;
  for (const std::string& function : conversation.tools) {
    Result<OrderedJson> parsed = format::parse_ordered_json(function, "tool");
    if (!parsed.ok()) return request_error("tools", parsed.status().message());
    strict = strict || parsed->value("strict", OrderedJson(false)) == true;
    tools.push_back(*std::move(parsed));
  }
  if (!strict) return std::nullopt;
  if (conversation.thinking != ThinkingMode::kChat) {
    return request_error("tools", "strict tools with thinking are not supported");
  }
  if (!conversation.prefill.empty()) {
    return request_error("tools", "strict tools with a prefilled reply are not supported");
  }
  const OrderedJson forced =
      conversation.forced_tool ? OrderedJson(*conversation.forced_tool) : OrderedJson();
  OrderedJson spec = OrderedJson::object();
  spec["tools"] = std::move(tools);
  spec["forced_tool"] = forced;
  out = OutputFormat{OutputFormat::Kind::kToolCalls, spec.dump()};
  return std::nullopt;
}

bool read_tool_mode(const OrderedJson& mode, const char* any_call, Conversation& c) {
  if (mode == "auto") return true;
  if (mode == "none") {
    c.no_tool_calls = true;
    return true;
  }
  if (mode == any_call) {
    c.forced_tool = "";
    return true;
  }
  return false;
}

}  // namespace dsv4::server
