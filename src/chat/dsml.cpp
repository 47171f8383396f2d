#include "chat/dsml.h"

#include <initializer_list>
#include <set>
#include <utility>

#include "chat/python_json.h"
#include "tokenizer/utf8.h"

namespace dsv4::chat {
namespace {

std::string parameter(const std::string& name, bool is_string, const std::string& value) {
  return std::string(kParameterOpen) + " name=\"" + name + "\" string=\"" +
         (is_string ? "true" : "false") + "\">" + value + "<" + std::string(kParameterCloseTail) +
         ">";
}

Result<std::string> render_arguments(const ToolCall& call) {
  Result<PythonJson> parsed = python_json_loads(call.arguments, "arguments");
  // Text that json.loads refuses is passed whole, as DeepSeek's encoder does.
  if (!parsed.ok()) return parameter("arguments", true, call.arguments);
  if (parsed->kind != PythonJson::Kind::kObject) {
    return invalid_argument("tool call \"" + call.name +
                            "\": arguments must be a JSON object, got " + call.arguments);
  }
  std::string out;
  for (size_t i = 0; i < parsed->keys.size(); ++i) {
    const PythonJson& value = parsed->items[i];
    if (!out.empty()) out += "\n";
    const bool is_string = value.kind == PythonJson::Kind::kString;
    out += parameter(parsed->keys[i], is_string, is_string ? value.text : python_json_dumps(value));
  }
  return out;
}

// The first of `stops` found at or after `from`: where, and which (its index in `stops`).
struct Found {
  size_t at = std::string_view::npos;
  std::string_view stop;
};

Found find_first(std::string_view text, size_t from,
                 std::initializer_list<std::string_view> stops) {
  Found found;
  for (std::string_view stop : stops) {
    const size_t at = text.find(stop, from);
    if (at < found.at) found = {at, stop};
  }
  return found;
}

Status malformed(size_t at, const std::string& expected) {
  return invalid_argument("tool calls: expected " + expected + " at byte " + std::to_string(at));
}

// `text` from `from` to the next of `stops`, which must be exactly ">\n"; returns the stop found
// and moves `from` past it.
Result<std::string_view> next_tag(std::string_view text, size_t& from,
                                  std::initializer_list<std::string_view> stops) {
  const Found found = find_first(text, from, stops);
  if (found.at == std::string_view::npos) return malformed(from, "a closing DSML tag");
  if (text.substr(from, found.at - from) != kTagEnd) return malformed(from, "\">\\n\"");
  from = found.at + found.stop.size();
  return found.stop;
}

// Whether the character at s[i] is white space to Python's re (\s on str: str.isspace()), which
// DeepSeek's parser allows before an invoke's name: ASCII's, the separators U+001C-001F, and
// Unicode's White_Space but for U+180E. Its length in bytes, 0 if it is not.
size_t python_space_at(std::string_view s, size_t i) {
  const size_t n = tokenizer::utf8_length(s, i);
  const uint32_t cp = tokenizer::decode_utf8(s, i, n);
  const bool space = (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 ||
                     cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
                     cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
  return space ? n : 0;
}

// ` name="NAME">\n` (leading white space allowed) -> NAME, as DeepSeek's parser reads it with
// ^\s*name="(.*?)">\n$: its `$` also matches before a final newline, so a call without
// parameters, written with an empty line before </｜DSML｜invoke>, reads the same.
Result<std::string> invoke_name(std::string_view head, size_t at) {
  if (head.size() >= 4 && head.substr(head.size() - 4) == "\">\n\n") head.remove_suffix(1);
  size_t begin = 0;
  while (begin < head.size()) {
    const size_t n = python_space_at(head, begin);
    if (n == 0) break;
    begin += n;
  }
  constexpr std::string_view kOpen = "name=\"", kClose = "\">\n";
  if (head.substr(begin, kOpen.size()) != kOpen ||
      head.size() < begin + kOpen.size() + kClose.size() ||
      head.substr(head.size() - kClose.size()) != kClose) {
    return malformed(at, "name=\"...\">\\n after <｜DSML｜invoke");
  }
  const size_t name_begin = begin + kOpen.size();
  return std::string(head.substr(name_begin, head.size() - kClose.size() - name_begin));
}

struct Parameter {
  std::string name;
  bool is_string = false;
  std::string value;
};

// ` name="KEY" string="true|false">VALUE<` -> its parts, as DeepSeek's parser reads them with
// ^ name="(.*?)" string="(true|false)">(.*?)<$: KEY ends at the first `" string=`, and VALUE
// before the final "<", or before a "<" and a newline that end the text (its `$` matches before a
// final newline too).
Result<Parameter> parameter_parts(std::string_view body, size_t at) {
  constexpr std::string_view kOpen = " name=\"";
  if (body.ends_with("<\n")) body.remove_suffix(1);
  if (body.substr(0, kOpen.size()) != kOpen || body.size() < kOpen.size() + 1 ||
      body.back() != '<') {
    return malformed(at, "name=\"...\" string=\"true|false\">...< in a parameter");
  }
  const Found kind =
      find_first(body, kOpen.size(), {"\" string=\"true\">", "\" string=\"false\">"});
  if (kind.at == std::string_view::npos || kind.at + kind.stop.size() > body.size() - 1) {
    return malformed(at, "string=\"true\" or string=\"false\" in a parameter");
  }
  const size_t value_begin = kind.at + kind.stop.size();
  return Parameter{std::string(body.substr(kOpen.size(), kind.at - kOpen.size())),
                   kind.stop.find("true") != std::string_view::npos,
                   std::string(body.substr(value_begin, body.size() - 1 - value_begin))};
}

// The parameters of one invoke, `from` just past its name tag, up to and past </｜DSML｜invoke.
// Returns the arguments as JSON object text, as DeepSeek's parser builds it: string values
// quoted, the others as the model wrote them.
Result<std::string> invoke_arguments(std::string_view text, size_t& from, std::string_view stop) {
  std::string arguments = "{";
  std::set<std::string> seen;
  while (stop == kParameterOpen) {
    const size_t close = text.find(kParameterCloseTail, from);
    if (close == std::string_view::npos) return malformed(from, "</｜DSML｜parameter>");
    Result<Parameter> p = parameter_parts(text.substr(from, close - from), from);
    if (!p.ok()) return p.status();
    if (!seen.insert(p->name).second) {
      return invalid_argument("tool calls: parameter \"" + p->name + "\" given twice at byte " +
                              std::to_string(from));
    }
    if (arguments.size() > 1) arguments += ", ";
    arguments += python_json_string(p->name) + ": " +
                 (p->is_string ? python_json_string(p->value) : p->value);
    from = close + kParameterCloseTail.size();
    Result<std::string_view> next = next_tag(text, from, {kParameterOpen, kInvokeClose});
    if (!next.ok()) return next.status();
    stop = *next;
  }
  return arguments + "}";
}

}  // namespace

std::string tool_calls_opening(std::string_view name) {
  std::string out = std::string(kToolCallsStart) + std::string(kTagEnd);
  if (!name.empty()) out += std::string(kInvokeOpen) + " name=\"" + std::string(name) + "\">\n";
  return out;
}

Result<std::string> render_tool_calls(const std::vector<ToolCall>& calls) {
  std::string out = std::string(kToolCallsStart) + std::string(kTagEnd);
  for (size_t i = 0; i < calls.size(); ++i) {
    Result<std::string> arguments = render_arguments(calls[i]);
    if (!arguments.ok()) return arguments.status();
    if (i) out += "\n";
    out += std::string(kInvokeOpen) + " name=\"" + calls[i].name + "\">\n" + *arguments + "\n" +
           std::string(kInvokeClose) + ">";
  }
  return out + "\n" + std::string(kBlockClose);
}

Result<ParsedToolCalls> parse_tool_calls(std::string_view text, size_t start) {
  ParsedToolCalls out;
  size_t at = start;
  for (;;) {
    Result<std::string_view> tag = next_tag(text, at, {kInvokeOpen, kBlockClose});
    if (!tag.ok()) return tag.status();
    if (*tag == kBlockClose) break;
    const Found head_end = find_first(text, at, {kParameterOpen, kInvokeClose});
    if (head_end.at == std::string_view::npos) return malformed(at, "</｜DSML｜invoke>");
    Result<std::string> name = invoke_name(text.substr(at, head_end.at - at), at);
    if (!name.ok()) return name.status();
    at = head_end.at + head_end.stop.size();
    Result<std::string> arguments = invoke_arguments(text, at, head_end.stop);
    if (!arguments.ok()) return arguments.status();
    out.calls.push_back({"", *std::move(name), *std::move(arguments)});
  }
  out.end = at;
  return out;
}

}  // namespace dsv4::chat
