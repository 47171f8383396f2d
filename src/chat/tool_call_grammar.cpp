#include "chat/tool_call_grammar.h"

#include <algorithm>
#include <list>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "chat/dsml.h"
#include "format/json.h"
#include "grammar/json_schema.h"
#include "grammar/utf8_ranges.h"

namespace dsv4::chat {
namespace {

using format::OrderedJson;
using grammar::CodepointRange;
using grammar::Expr;

// What the content and a raw value never hold: the part every DSML tag has, so the reader finds
// no tag there. Its first character occurs in it only there (text_without needs that). JSON
// values write ｜ only as its escape (regex.h's kDsmlJsonString).
constexpr std::u32string_view kDsmlMarker = U"｜DSML";

// One character, any but `excluded`, as UTF-8.
Expr char_except(std::vector<uint32_t> excluded) {
  std::sort(excluded.begin(), excluded.end());
  std::vector<CodepointRange> ranges;
  uint32_t lo = 0;
  for (const uint32_t c : excluded) {
    if (c > lo) ranges.push_back({lo, c - 1});
    lo = std::max(lo, c + 1);
  }
  ranges.push_back({lo, grammar::kMaxCodepoint});
  return grammar::utf8_expr(grammar::normalize(std::move(ranges)));
}

std::string utf8(std::u32string_view text) {
  std::string out;
  for (const char32_t c : text) out += grammar::utf8_encode(c);
  return out;
}

// UTF-8 text that never holds `marker`. Since the marker's first character occurs in it only
// there, a partial match can only start over at that character: the text is a run of steps,
// each a character other than the first, or a proper prefix of the marker and then a character
// that neither continues it nor starts it again; it may end inside a prefix.
Expr text_without(std::u32string_view marker) {
  std::vector<Expr> steps = {char_except({marker[0]})};
  std::vector<Expr> ends = {Expr::empty()};
  for (size_t k = 1; k < marker.size(); ++k) {
    const std::string prefix = utf8(marker.substr(0, k));
    steps.push_back(Expr::seq({Expr::literal(prefix), char_except({marker[0], marker[k]})}));
    ends.push_back(Expr::literal(prefix));
  }
  return Expr::seq({Expr::repeat(Expr::alt(std::move(steps)), 0, Expr::kUnbounded),
                    Expr::alt(std::move(ends))});
}

bool is_annotation(const std::string& key) {
  static const std::set<std::string> kAnnotations = {
      "title",   "description", "default",  "examples", "$schema",
      "$id",     "$comment",    "deprecated", "readOnly", "writeOnly"};
  return kAnnotations.count(key) > 0;
}

// The raw texts a parameter of schema `s` may be written as (string="true"): any text for a
// plain string, the values of an enum or const of strings; nullopt for any other schema, whose
// values are written as JSON.
std::optional<Expr> raw_value(const OrderedJson& s) {
  if (!s.is_object()) return std::nullopt;
  std::vector<OrderedJson> values;
  bool plain_string = false;
  for (const auto& [key, value] : s.items()) {
    if (is_annotation(key)) continue;
    if (key == "type" && value == "string") {
      plain_string = true;
    } else if (key == "enum" && value.is_array()) {
      values.assign(value.begin(), value.end());
    } else if (key == "const") {
      values.push_back(value);
    } else {
      return std::nullopt;
    }
  }
  if (values.empty()) {
    if (!plain_string) return std::nullopt;
    return text_without(kDsmlMarker);
  }
  std::vector<Expr> options;
  for (const OrderedJson& v : values) {
    if (!v.is_string() || v.get<std::string>().find(utf8(kDsmlMarker)) != std::string::npos) {
      return std::nullopt;
    }
    options.push_back(Expr::literal(v.get<std::string>()));
  }
  return Expr::alt(std::move(options));
}

Expr parameter(const std::string& name, bool raw, Expr value) {
  return Expr::seq({Expr::literal(std::string(kParameterOpen) + " name=\"" + name + "\" string=\"" +
                                  (raw ? "true" : "false") + "\">"),
                    std::move(value),
                    Expr::literal("<" + std::string(kParameterCloseTail) + ">")});
}

// Where the arguments end: after the last parameter (or the head), a newline and the invoke's
// close.
Expr invoke_end() { return Expr::literal("\n" + std::string(kInvokeClose) + ">"); }

// What a DSML name (a tool's, a parameter's) must not hold for the reader to find its end.
constexpr std::string_view kNotInNames = "\"<\n";
bool dsml_name(const std::string& name) {
  return !name.empty() && name.find_first_of(kNotInNames) == std::string::npos &&
         name.find(utf8(U"｜")) == std::string::npos;
}

// A call's parameters when its tool is not strict: any names (see dsml_name), values raw or any
// JSON.
Expr any_parameters(grammar::SchemaRules& any) {
  const Expr name =
      Expr::repeat(char_except({'"', '<', '\n', U'｜'}), 1, Expr::kUnbounded);
  const Expr one = Expr::seq(
      {Expr::literal(std::string(kParameterOpen) + " name=\""), name, Expr::literal("\" string=\""),
       Expr::alt({Expr::seq({Expr::literal("true\">"), text_without(kDsmlMarker)}),
                  Expr::seq({Expr::literal("false\">"), Expr::call(any.any_value_rule())})}),
       Expr::literal("<" + std::string(kParameterCloseTail) + ">")});
  return Expr::optional(
      Expr::seq({one, Expr::repeat(Expr::seq({Expr::literal("\n"), one}), 0, Expr::kUnbounded)}));
}

Status refuse(const std::string& where, const std::string& what) {
  return unimplemented(what + " at " + where + " is not supported");
}

// A strict tool's parameters, from its `parameters` schema (an object's properties); rules it
// needs go to `b`, named after `tool`.
Result<Expr> strict_parameters(grammar::GrammarBuilder& b, grammar::SchemaRules& rules,
                               const OrderedJson& schema, const std::string& tool) {
  if (!schema.is_object()) return invalid_argument("parameters must be a JSON Schema object");
  for (const auto& [key, value] : schema.items()) {
    if (is_annotation(key) || key == "properties" || key == "required" || key == "$defs" ||
        key == "definitions") {
      continue;
    }
    if (key == "type" && value == "object") continue;
    if (key == "additionalProperties" && value.is_boolean()) continue;  // none are generated
    return refuse("#", "JSON Schema keyword \"" + key + "\"" +
                           (key == "type" || key == "additionalProperties"
                                ? " " + value.dump() + " (arguments are an object's properties)"
                                : ""));
  }
  const OrderedJson none = OrderedJson::object();
  const OrderedJson& properties = schema.contains("properties") ? schema["properties"] : none;
  if (!properties.is_object()) return invalid_argument("properties must be an object");
  std::set<std::string> required;
  if (schema.contains("required")) {
    if (!schema["required"].is_array()) return invalid_argument("required must be an array");
    for (const OrderedJson& r : schema["required"]) {
      if (!r.is_string() || !properties.contains(r.get<std::string>())) {
        return invalid_argument("required lists " + r.dump() + ", which is not in properties");
      }
      required.insert(r.get<std::string>());
    }
  }
  std::vector<Expr> members;
  std::vector<bool> needed;
  for (const auto& [key, value] : properties.items()) {
    if (!dsml_name(key)) {
      return refuse("#/properties", "the property name " + OrderedJson(key).dump() +
                                        " (a DSML parameter name holds no '\"', '<', '｜' or "
                                        "newline)");
    }
    if (std::optional<Expr> raw = raw_value(value)) {
      members.push_back(parameter(key, true, *std::move(raw)));
    } else {
      DSV4_ASSIGN_OR_RETURN(const int32_t rule, rules.property_rule(key));
      members.push_back(parameter(key, false, Expr::call(rule)));
    }
    needed.push_back(required.count(key) > 0);
  }
  return b.ordered(std::string("parameters of ").append(tool), std::move(members), needed,
                   Expr::literal("\n"));
}

struct Tool {
  std::string name;
  int32_t arguments = -1;  // the rule from past the invoke's head to past its close
};

Result<grammar::Grammar> build(const OrderedJson& spec) {
  if (!spec.is_object() || !spec.contains("tools") || !spec["tools"].is_array() ||
      spec["tools"].empty()) {
    return invalid_argument("a tool-call format needs a non-empty \"tools\" array");
  }
  grammar::GrammarBuilder b;
  const OrderedJson nothing = OrderedJson::object();
  // Any JSON value, for tools that are not strict.
  grammar::SchemaRules any(b, nothing, grammar::TextEncoding::kDsmlJsonString);
  std::list<grammar::SchemaRules> schemas;  // each strict tool's, alive while the rules build
  std::vector<Tool> tools;
  for (const OrderedJson& t : spec["tools"]) {
    if (!t.is_object() || !t.contains("name") || !t["name"].is_string()) {
      return invalid_argument("each tool needs a name");
    }
    Tool tool{t["name"].get<std::string>()};
    if (!dsml_name(tool.name)) {
      return invalid_argument("the tool name " + t["name"].dump() +
                              " holds '\"', '<', '｜' or a newline, which DSML cannot write");
    }
    const bool strict = t.value("strict", OrderedJson(false)) == true;
    Expr arguments = any_parameters(any);
    if (strict) {
      const OrderedJson& parameters = t.contains("parameters") ? t["parameters"] : nothing;
      schemas.emplace_back(b, parameters, grammar::TextEncoding::kDsmlJsonString);
      Result<Expr> strict_arguments = strict_parameters(b, schemas.back(), parameters, tool.name);
      if (!strict_arguments.ok()) {
        return strict_arguments.status().with_context("tool \"" + tool.name + "\" parameters");
      }
      arguments = *std::move(strict_arguments);
    }
    tool.arguments = b.add_rule("arguments of " + tool.name);
    b.define(tool.arguments, Expr::seq({std::move(arguments), invoke_end()}));
    tools.push_back(std::move(tool));
  }
  std::vector<Expr> invokes;
  for (const Tool& tool : tools) {
    invokes.push_back(Expr::seq(
        {Expr::literal(std::string(kInvokeOpen) + " name=\"" + tool.name + "\">\n"),
         Expr::call(tool.arguments)}));
  }
  const int32_t invoke = b.add_rule("a call");
  b.define(invoke, Expr::alt(std::move(invokes)));
  // After a call: more calls, then the block's close.
  const Expr rest = Expr::seq(
      {Expr::repeat(Expr::seq({Expr::literal("\n"), Expr::call(invoke)}), 0, Expr::kUnbounded),
       Expr::literal("\n" + std::string(kBlockClose))});
  const OrderedJson forced = spec.value("forced_tool", OrderedJson());
  Expr reply;
  if (forced.is_null()) {
    reply = Expr::seq({text_without(kDsmlMarker),
                       Expr::optional(Expr::seq({Expr::literal(std::string(kToolCallsStart) +
                                                               std::string(kTagEnd)),
                                                 Expr::call(invoke), rest}))});
  } else if (forced == "") {
    reply = Expr::seq({Expr::call(invoke), rest});
  } else {
    const auto it = std::find_if(tools.begin(), tools.end(),
                                 [&](const Tool& t) { return forced == t.name; });
    if (it == tools.end()) return invalid_argument("the forced tool " + forced.dump() + " is not a tool");
    reply = Expr::seq({Expr::call(it->arguments), rest});
  }
  const int32_t root = b.add_rule("reply");
  b.define(root, std::move(reply));
  return b.build(root);
}

}  // namespace

Result<grammar::Grammar> tool_call_grammar(std::string_view spec) {
  DSV4_ASSIGN_OR_RETURN(const OrderedJson parsed, format::parse_ordered_json(spec, "tool calls"));
  try {
    return build(parsed);
  } catch (const OrderedJson::exception& e) {
    return invalid_argument(std::string("tool calls: ") + e.what());
  }
}

}  // namespace dsv4::chat
