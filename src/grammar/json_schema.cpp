#include "grammar/json_schema.h"

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/check.h"
#include "grammar/regex.h"

namespace dsv4::grammar {
namespace {

using format::OrderedJson;

// Keywords that only annotate: they constrain nothing, so they are accepted and skipped.
const std::set<std::string>& annotation_keywords() {
  static const std::set<std::string> k = {"title",    "description", "default",  "examples",
                                          "$schema",  "$id",         "$comment", "deprecated",
                                          "readOnly", "writeOnly",   "$defs",    "definitions"};
  return k;
}
// Keywords the compiler implements.
const std::set<std::string>& implemented_keywords() {
  static const std::set<std::string> k = {
      "type",      "properties", "required", "additionalProperties",
      "items",     "minItems",   "maxItems", "enum",
      "const",     "pattern",    "format",   "minLength",
      "maxLength", "anyOf",      "$ref"};
  return k;
}

// Regexes (whole match) for the string formats supported; other formats are refused by name.
const std::map<std::string, std::string>& format_patterns() {
  static const std::string date = "[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])";
  static const std::string time =
      "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9]"
      ")";
  static const std::string label = "[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?";
  static const std::string octet = "(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])";
  static const std::map<std::string, std::string> k = {
      {"date", date},
      {"time", time},
      {"date-time", date + "T" + time},
      {"uuid", "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"},
      {"email", "[A-Za-z0-9_%+-]{1,32}(\\.[A-Za-z0-9_%+-]{1,32}){0,3}@" + label + "(\\." + label +
                    "){0,3}\\.[A-Za-z]{2,24}"},
      {"hostname", label + "(\\." + label + "){0,7}"},
      {"ipv4", octet + "(\\." + octet + "){3}"},
  };
  return k;
}

Expr ws() {
  return Expr::repeat(Expr::alt({Expr::literal(" "), Expr::literal("\t"), Expr::literal("\n")}), 0,
                      kMaxWhitespace);
}

// "," between list items and object members, with the whitespace around it.
Expr comma() { return Expr::seq({ws(), Expr::literal(","), ws()}); }

Expr digits(int32_t min, int32_t max) { return Expr::repeat(Expr::byte_range('0', '9'), min, max); }

Expr integer_expr() {
  return Expr::seq(
      {Expr::optional(Expr::literal("-")),
       Expr::alt({Expr::literal("0"),
                  Expr::seq({Expr::byte_range('1', '9'), digits(0, kMaxIntegerDigits - 1)})})});
}

Expr number_expr() {
  return Expr::seq({integer_expr(),
                    Expr::optional(Expr::seq({Expr::literal("."), digits(1, kMaxFractionDigits)})),
                    Expr::optional(Expr::seq(
                        {Expr::alt({Expr::literal("e"), Expr::literal("E")}),
                         Expr::optional(Expr::alt({Expr::literal("+"), Expr::literal("-")})),
                         digits(1, kMaxExponentDigits)}))});
}

Expr hex_digits(std::vector<CodepointRange> ranges, int32_t n) {
  return Expr::repeat(utf8_expr(normalize(std::move(ranges))), n, n);
}

// \uXXXX: a code point that is not a surrogate, or a high surrogate's escape followed by a low
// one's (a lone surrogate is refused by many parsers).
Expr unicode_escape() {
  const std::vector<CodepointRange> hex = {{'0', '9'}, {'a', 'f'}, {'A', 'F'}};
  const Expr not_d =
      utf8_expr(normalize({{'0', '9'}, {'a', 'c'}, {'e', 'f'}, {'A', 'C'}, {'E', 'F'}}));
  const Expr d = utf8_expr(normalize({{'d', 'd'}, {'D', 'D'}}));
  const Expr plain =
      Expr::alt({Expr::seq({not_d, hex_digits(hex, 3)}),
                 Expr::seq({d, utf8_expr(normalize({{'0', '7'}})), hex_digits(hex, 2)})});
  const Expr high = Expr::seq(
      {d, utf8_expr(normalize({{'8', '9'}, {'a', 'b'}, {'A', 'B'}})), hex_digits(hex, 2)});
  const Expr low =
      Expr::seq({d, utf8_expr(normalize({{'c', 'f'}, {'C', 'F'}})), hex_digits(hex, 2)});
  return Expr::seq(
      {Expr::literal("u"), Expr::alt({plain, Expr::seq({high, Expr::literal("\\u"), low})})});
}

// One character of a free JSON string: any character but ", \ and controls, or any escape
// (for DSML, ｜ only as its escape: regex.h's kDsmlJsonString).
Expr string_char_expr(TextEncoding encoding) {
  const std::vector<CodepointRange> plain =
      encoding == TextEncoding::kDsmlJsonString
          ? normalize({{0x20, '"' - 1}, {'"' + 1, '\\' - 1}, {'\\' + 1, 0xFF5B},
                       {0xFF5D, kMaxCodepoint}})
          : normalize({{0x20, '"' - 1}, {'"' + 1, '\\' - 1}, {'\\' + 1, kMaxCodepoint}});
  return Expr::alt(
      {utf8_expr(plain),
       Expr::seq({Expr::literal("\\"),
                  Expr::alt({Expr::literal("\""), Expr::literal("\\"), Expr::literal("/"),
                             Expr::literal("b"), Expr::literal("f"), Expr::literal("n"),
                             Expr::literal("r"), Expr::literal("t"), unicode_escape()})})});
}

Expr quoted(Expr body) {
  return Expr::seq({Expr::literal("\""), std::move(body), Expr::literal("\"")});
}

// A list: `open` ws, then between min and max items (max kUnbounded) separated by commas, ws
// `close`.
Expr list_expr(std::string_view open, Expr item, int32_t min, int32_t max, std::string_view close) {
  Expr more = Expr::repeat(Expr::seq({comma(), item}), min > 0 ? min - 1 : 0,
                           max == Expr::kUnbounded ? Expr::kUnbounded : std::max(max - 1, 0));
  Expr items = Expr::seq({std::move(item), std::move(more)});
  if (min == 0) items = max == 0 ? Expr::empty() : Expr::optional(std::move(items));
  return Expr::seq({Expr::literal(open), ws(), std::move(items), ws(), Expr::literal(close)});
}

std::string escape_pointer_token(const std::string& key) {
  std::string out;
  for (const char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

class SchemaCompiler {
 public:
  SchemaCompiler(GrammarBuilder& builder, const OrderedJson& root, TextEncoding strings)
      : b_(builder), root_(root), strings_(strings) {}

  // The rule of the subschema at `pointer` (a JSON pointer into the document, "#" the whole).
  Result<int32_t> rule_at(const std::string& pointer) {
    DSV4_ASSIGN_OR_RETURN(const OrderedJson* schema, resolve(pointer, pointer));
    return rule_for(*schema, pointer);
  }

  // Any JSON value / object, as rules (shared by every use).
  int32_t any_value_rule() {
    if (any_value_ >= 0) return any_value_;
    any_value_ = b_.add_rule("any JSON value");
    any_object_ = b_.add_rule("any JSON object");
    const int32_t any_array = b_.add_rule("any JSON array");
    const Expr member = Expr::seq(
        {Expr::call(string_rule()), ws(), Expr::literal(":"), ws(), Expr::call(any_value_)});
    b_.define(any_object_, list_expr("{", member, 0, Expr::kUnbounded, "}"));
    b_.define(any_array, list_expr("[", Expr::call(any_value_), 0, Expr::kUnbounded, "]"));
    b_.define(any_value_,
              Expr::alt({Expr::call(any_object_), Expr::call(any_array), Expr::call(string_rule()),
                         Expr::call(number_rule()), Expr::literal("true"), Expr::literal("false"),
                         Expr::literal("null")}));
    return any_value_;
  }
  int32_t any_object_rule() {
    any_value_rule();
    return any_object_;
  }

 private:
  int32_t shared_rule(int32_t& rule, const char* name, Expr (*body)()) {
    if (rule < 0) {
      rule = b_.add_rule(name);
      b_.define(rule, body());
    }
    return rule;
  }
  int32_t string_rule() {
    if (string_ < 0) {
      string_ = b_.add_rule("string");
      b_.define(string_, quoted(Expr::repeat(string_char_expr(strings_), 0, Expr::kUnbounded)));
    }
    return string_;
  }
  // A value's JSON text as a literal, written compactly as json.dumps would with separators
  // (",", ":"); for DSML with ｜ escaped.
  std::string json_text(const OrderedJson& v) const {
    std::string text = v.dump(-1, ' ', false, OrderedJson::error_handler_t::replace);
    if (strings_ != TextEncoding::kDsmlJsonString) return text;
    const std::string bar = "\xEF\xBD\x9C";
    for (size_t at = text.find(bar); at != std::string::npos; at = text.find(bar, at)) {
      text.replace(at, bar.size(), "\\uff5c");
    }
    return text;
  }
  int32_t number_rule() { return shared_rule(number_, "number", number_expr); }
  int32_t integer_rule() { return shared_rule(integer_, "integer", integer_expr); }

  static Status refuse(const std::string& pointer, const std::string& what) {
    return unimplemented(what + " at " + pointer + " is not supported");
  }
  static Status bad(const std::string& pointer, const std::string& what) {
    return invalid_argument("JSON Schema at " + pointer + ": " + what);
  }

  // The rule matching `schema` (found at `pointer`), made once per pointer: recursion through
  // $ref finds the rule it is still defining.
  Result<int32_t> rule_for(const OrderedJson& schema, const std::string& pointer) {
    const auto found = rules_.find(pointer);
    if (found != rules_.end()) return found->second;
    const int32_t rule = b_.add_rule(pointer);
    rules_.emplace(pointer, rule);
    if (++n_schemas_ > kMaxSchemas) {
      return resource_exhausted("the schema has more than " + std::to_string(kMaxSchemas) +
                                " subschemas");
    }
    DSV4_ASSIGN_OR_RETURN(Expr body, value_expr(schema, pointer));
    b_.define(rule, std::move(body));
    return rule;
  }

  Result<const OrderedJson*> resolve(const std::string& ref, const std::string& pointer) {
    if (ref.empty() || ref[0] != '#')
      return refuse(pointer, "$ref \"" + ref + "\" (not in this document)");
    const OrderedJson* at = &root_;
    size_t i = 1;
    while (i < ref.size()) {
      if (ref[i] != '/') return bad(pointer, "$ref \"" + ref + "\" is not a JSON pointer");
      const size_t next = std::min(ref.find('/', i + 1), ref.size());
      std::string token;
      for (size_t k = i + 1; k < next; ++k) {
        if (ref[k] == '~' && k + 1 < next && (ref[k + 1] == '0' || ref[k + 1] == '1')) {
          token += ref[k + 1] == '0' ? '~' : '/';
          ++k;
        } else {
          token += ref[k];
        }
      }
      if (at->is_object() && at->contains(token)) {
        at = &(*at)[token];
      } else if (at->is_array() && !token.empty() &&
                 token.find_first_not_of("0123456789") == std::string::npos && token.size() < 9 &&
                 std::stoul(token) < at->size()) {
        at = &(*at)[std::stoul(token)];
      } else {
        return bad(pointer, "$ref \"" + ref + "\" points to nothing");
      }
      i = next;
    }
    return at;
  }

  Status check_keywords(const OrderedJson& schema, const std::string& pointer) {
    for (const auto& [key, value] : schema.items()) {
      if (annotation_keywords().count(key) || implemented_keywords().count(key)) continue;
      if (key == "uniqueItems" && value == false) continue;
      return refuse(pointer, "JSON Schema keyword \"" + key + "\"");
    }
    return ok_status();
  }

  Result<Expr> value_expr(const OrderedJson& schema, const std::string& pointer) {
    if (schema.is_boolean()) {
      if (schema.get<bool>()) return Expr::call(any_value_rule());
      return bad(pointer, "schema false matches no value");
    }
    if (!schema.is_object()) return bad(pointer, "a schema must be an object or a boolean");
    DSV4_RETURN_IF_ERROR(check_keywords(schema, pointer));
    // Keywords that decide alone; beside them only annotations are accepted.
    for (const char* alone : {"$ref", "anyOf", "enum", "const"}) {
      if (!schema.contains(alone)) continue;
      for (const auto& [key, value] : schema.items()) {
        if (key != alone && !annotation_keywords().count(key) &&
            !(key == "type" && std::string(alone) != "$ref" && std::string(alone) != "anyOf")) {
          return refuse(pointer, "\"" + key + "\" beside \"" + alone + "\"");
        }
      }
      if (std::string(alone) == "$ref") return ref_expr(schema["$ref"], pointer);
      if (std::string(alone) == "anyOf") return any_of_expr(schema["anyOf"], pointer);
      return enum_expr(schema, alone, pointer);
    }
    if (!schema.contains("type")) return untyped_expr(schema, pointer);
    const OrderedJson& type = schema["type"];
    if (type.is_string()) return typed_expr(schema, type.get<std::string>(), pointer);
    if (!type.is_array() || type.empty())
      return bad(pointer, "type must be a string or a non-empty array");
    std::vector<Expr> options;
    for (const OrderedJson& t : type) {
      if (!t.is_string()) return bad(pointer, "type must list strings");
      DSV4_ASSIGN_OR_RETURN(Expr e, typed_expr(schema, t.get<std::string>(), pointer));
      options.push_back(std::move(e));
    }
    return Expr::alt(std::move(options));
  }

  // No type: inferred from the keywords present ({} or annotations alone: any value). Each
  // document generated then still validates.
  Result<Expr> untyped_expr(const OrderedJson& schema, const std::string& pointer) {
    for (const char* k : {"properties", "required", "additionalProperties"}) {
      if (schema.contains(k)) return typed_expr(schema, "object", pointer);
    }
    for (const char* k : {"items", "minItems", "maxItems"}) {
      if (schema.contains(k)) return typed_expr(schema, "array", pointer);
    }
    for (const char* k : {"pattern", "format", "minLength", "maxLength"}) {
      if (schema.contains(k)) return typed_expr(schema, "string", pointer);
    }
    return Expr::call(any_value_rule());
  }

  Result<Expr> ref_expr(const OrderedJson& ref, const std::string& pointer) {
    if (!ref.is_string()) return bad(pointer, "$ref must be a string");
    const std::string target = ref.get<std::string>();
    DSV4_ASSIGN_OR_RETURN(const OrderedJson* schema, resolve(target, pointer));
    DSV4_ASSIGN_OR_RETURN(const int32_t rule, rule_for(*schema, target == "#" ? "#" : target));
    return Expr::call(rule);
  }

  Result<Expr> any_of_expr(const OrderedJson& list, const std::string& pointer) {
    if (!list.is_array() || list.empty()) return bad(pointer, "anyOf must be a non-empty array");
    std::vector<Expr> options;
    for (size_t i = 0; i < list.size(); ++i) {
      DSV4_ASSIGN_OR_RETURN(const int32_t rule,
                            rule_for(list[i], pointer + "/anyOf/" + std::to_string(i)));
      options.push_back(Expr::call(rule));
    }
    return Expr::alt(std::move(options));
  }

  static bool has_type(const OrderedJson& value, const std::string& type) {
    if (type == "null") return value.is_null();
    if (type == "boolean") return value.is_boolean();
    if (type == "integer") return value.is_number_integer() || value.is_number_unsigned();
    if (type == "number") return value.is_number();
    if (type == "string") return value.is_string();
    if (type == "array") return value.is_array();
    if (type == "object") return value.is_object();
    return false;
  }

  Result<Expr> enum_expr(const OrderedJson& schema, const std::string& keyword,
                         const std::string& pointer) {
    std::vector<OrderedJson> values;
    if (keyword == "const") {
      values.push_back(schema["const"]);
    } else {
      if (!schema["enum"].is_array() || schema["enum"].empty()) {
        return bad(pointer, "enum must be a non-empty array");
      }
      values.assign(schema["enum"].begin(), schema["enum"].end());
    }
    std::vector<Expr> options;
    for (const OrderedJson& v : values) {
      if (schema.contains("type")) {
        const OrderedJson& type = schema["type"];
        bool fits = false;
        for (const OrderedJson& t : type.is_array() ? type : OrderedJson::array({type})) {
          fits = fits || (t.is_string() && has_type(v, t.get<std::string>()));
        }
        if (!fits)
          return bad(pointer,
                     keyword + " value " + v.dump() + " does not have the type " + type.dump());
      }
      options.push_back(Expr::literal(json_text(v)));
    }
    return Expr::alt(std::move(options));
  }

  Result<Expr> typed_expr(const OrderedJson& schema, const std::string& type,
                          const std::string& pointer) {
    if (type == "null") return Expr::literal("null");
    if (type == "boolean") return Expr::alt({Expr::literal("true"), Expr::literal("false")});
    if (type == "integer") return Expr::call(integer_rule());
    if (type == "number") return Expr::call(number_rule());
    if (type == "string") return string_expr(schema, pointer);
    if (type == "object") return object_expr(schema, pointer);
    if (type == "array") return array_expr(schema, pointer);
    return bad(pointer, "unknown type \"" + type + "\"");
  }

  Result<int32_t> count(const OrderedJson& schema, const char* key, int32_t otherwise,
                        const std::string& pointer) {
    if (!schema.contains(key)) return otherwise;
    const OrderedJson& v = schema[key];
    // Read as uint64 once known non-negative: one past INT64_MAX would read as a negative int64.
    if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<int64_t>() < 0)) {
      return bad(pointer, std::string(key) + " must be a non-negative integer");
    }
    const uint64_t n = v.get<uint64_t>();
    if (n > static_cast<uint64_t>(kMaxCount)) {
      return refuse(pointer, std::string(key) + " over " + std::to_string(kMaxCount));
    }
    return static_cast<int32_t>(n);
  }

  Result<Expr> string_expr(const OrderedJson& schema, const std::string& pointer) {
    DSV4_ASSIGN_OR_RETURN(const int32_t min, count(schema, "minLength", 0, pointer));
    DSV4_ASSIGN_OR_RETURN(const int32_t max, count(schema, "maxLength", Expr::kUnbounded, pointer));
    if (max != Expr::kUnbounded && max < min) return bad(pointer, "maxLength < minLength");
    const bool lengths = schema.contains("minLength") || schema.contains("maxLength");
    if (schema.contains("pattern") && schema.contains("format")) {
      return refuse(pointer, "\"pattern\" beside \"format\"");
    }
    for (const char* k : {"pattern", "format"}) {
      if (!schema.contains(k)) continue;
      if (lengths)
        return refuse(pointer, std::string("\"") + k + "\" beside minLength or maxLength");
      if (!schema[k].is_string()) return bad(pointer, std::string(k) + " must be a string");
      const std::string value = schema[k].get<std::string>();
      Result<Expr> body = invalid_argument("");
      if (std::string(k) == "pattern") {
        body = regex_expr(value, strings_, RegexMatch::kSearch);
      } else {
        const auto it = format_patterns().find(value);
        if (it == format_patterns().end()) return refuse(pointer, "format \"" + value + "\"");
        body = regex_expr(it->second, strings_, RegexMatch::kWhole);
      }
      if (!body.ok()) return body.status().with_context("JSON Schema at " + pointer);
      return quoted(std::move(body).value());
    }
    if (!lengths) return Expr::call(string_rule());
    return quoted(Expr::repeat(string_char_expr(strings_), min, max));
  }

  Result<Expr> array_expr(const OrderedJson& schema, const std::string& pointer) {
    DSV4_ASSIGN_OR_RETURN(const int32_t min, count(schema, "minItems", 0, pointer));
    DSV4_ASSIGN_OR_RETURN(const int32_t max, count(schema, "maxItems", Expr::kUnbounded, pointer));
    if (max != Expr::kUnbounded && max < min) return bad(pointer, "maxItems < minItems");
    Expr item = Expr::call(any_value_rule());
    if (schema.contains("items")) {
      if (schema["items"].is_array()) return refuse(pointer, "items as an array (use prefixItems)");
      DSV4_ASSIGN_OR_RETURN(const int32_t rule, rule_for(schema["items"], pointer + "/items"));
      item = Expr::call(rule);
    }
    return list_expr("[", std::move(item), min, max, "]");
  }

  Result<Expr> object_expr(const OrderedJson& schema, const std::string& pointer) {
    const OrderedJson none = OrderedJson::object();
    const OrderedJson& properties = schema.contains("properties") ? schema["properties"] : none;
    if (!properties.is_object()) return bad(pointer, "properties must be an object");
    std::set<std::string> required;
    if (schema.contains("required")) {
      if (!schema["required"].is_array()) return bad(pointer, "required must be an array");
      for (const OrderedJson& r : schema["required"]) {
        if (!r.is_string()) return bad(pointer, "required must list strings");
        if (!properties.contains(r.get<std::string>())) {
          return bad(pointer,
                     "required property \"" + r.get<std::string>() + "\" is not in properties");
        }
        required.insert(r.get<std::string>());
      }
    }
    const OrderedJson additional = schema.contains("additionalProperties")
                                       ? schema["additionalProperties"]
                                       : OrderedJson(true);
    if (additional.is_object()) {
      if (!properties.empty()) {
        return refuse(pointer, "additionalProperties with a schema beside properties");
      }
      DSV4_ASSIGN_OR_RETURN(const int32_t value,
                            rule_for(additional, pointer + "/additionalProperties"));
      const Expr member =
          Expr::seq({Expr::call(string_rule()), ws(), Expr::literal(":"), ws(), Expr::call(value)});
      return list_expr("{", member, 0, Expr::kUnbounded, "}");
    }
    if (!additional.is_boolean())
      return bad(pointer, "additionalProperties must be a boolean or a schema");
    if (properties.empty() && additional.get<bool>()) return Expr::call(any_object_rule());
    // Members in the order of `properties`; optional ones may be left out.
    std::vector<Expr> members;
    std::vector<bool> needed;
    for (const auto& [key, value] : properties.items()) {
      DSV4_ASSIGN_OR_RETURN(const int32_t rule,
                            rule_for(value, pointer + "/properties/" + escape_pointer_token(key)));
      members.push_back(Expr::seq({Expr::literal(json_text(OrderedJson(key))), ws(), Expr::literal(":"),
                                   ws(), Expr::call(rule)}));
      needed.push_back(required.count(key) > 0);
    }
    Result<Expr> ordered = b_.ordered(pointer, std::move(members), needed, comma());
    if (!ordered.ok()) return ordered.status().with_context("JSON Schema at " + pointer);
    return Expr::seq({Expr::literal("{"), ws(), *std::move(ordered), ws(), Expr::literal("}")});
  }

  static constexpr int64_t kMaxSchemas = 1 << 14;

  GrammarBuilder& b_;
  const OrderedJson& root_;
  TextEncoding strings_;  // how strings' characters are written
  std::map<std::string, int32_t> rules_;  // by JSON pointer
  int64_t n_schemas_ = 0;
  int32_t any_value_ = -1, any_object_ = -1, string_ = -1, number_ = -1, integer_ = -1;
};

SchemaRules::SchemaRules(GrammarBuilder& builder, const OrderedJson& root, TextEncoding strings)
    : compiler_(std::make_unique<SchemaCompiler>(builder, root, strings)) {}
SchemaRules::~SchemaRules() = default;

Result<int32_t> SchemaRules::rule_at(const std::string& pointer) {
  // Json's accessors throw on a value of the wrong type; that is the schema's fault.
  try {
    return compiler_->rule_at(pointer);
  } catch (const OrderedJson::exception& e) {
    return invalid_argument(std::string("JSON Schema: ") + e.what());
  }
}

Result<int32_t> SchemaRules::property_rule(const std::string& key) {
  return rule_at("#/properties/" + escape_pointer_token(key));
}

int32_t SchemaRules::any_value_rule() { return compiler_->any_value_rule(); }

Result<Grammar> json_schema_grammar(const OrderedJson& schema) {
  GrammarBuilder b;
  DSV4_ASSIGN_OR_RETURN(const int32_t root,
                        SchemaRules(b, schema, TextEncoding::kJsonString).rule_at("#"));
  return b.build(root);
}

Result<Grammar> json_schema_grammar(std::string_view schema_text) {
  DSV4_ASSIGN_OR_RETURN(OrderedJson schema, format::parse_ordered_json(schema_text, "JSON Schema"));
  return json_schema_grammar(schema);
}

Grammar json_object_grammar() {
  const OrderedJson empty = OrderedJson::object();
  GrammarBuilder b;
  Result<Grammar> g =
      b.build(SchemaCompiler(b, empty, TextEncoding::kJsonString).any_object_rule());
  DSV4_CHECK(g.ok(), "the JSON object grammar does not build: %s", g.status().to_string().c_str());
  return std::move(g).value();
}

Result<Grammar> regex_grammar(std::string_view pattern) {
  DSV4_ASSIGN_OR_RETURN(Expr body, regex_expr(pattern, TextEncoding::kRaw, RegexMatch::kWhole));
  GrammarBuilder b;
  const int32_t rule = b.add_rule("regex");
  b.define(rule, std::move(body));
  return b.build(rule);
}

}  // namespace dsv4::grammar
