// The JSON Schema compiler against JSON Schema's semantics: an independent validator written
// here (on nlohmann-json's parse, not on the grammar) judges every document the grammar lets
// through - random walks through the grammar and random mutations of them - and hand-written
// documents check that valid ones are accepted byte by byte and invalid ones refused.
#include "grammar/json_schema.h"

#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "format/json.h"
#include "grammar_testing.h"

namespace dsv4::grammar {
namespace {

using format::OrderedJson;
using testing::matches;

// JSON Schema validation for the keywords the tests use, written from the specification.
class Validator {
 public:
  explicit Validator(const OrderedJson& root) : root_(root) {}
  bool valid(const OrderedJson& v) const { return valid(root_, v); }

 private:
  static size_t n_codepoints(const std::string& s) {
    size_t n = 0;
    for (const char c : s) n += (static_cast<uint8_t>(c) & 0xC0) != 0x80;
    return n;
  }
  // JSON Schema's type of a value; an integer is also a number.
  static bool has_type(const OrderedJson& v, const std::string& t) {
    std::string name;
    switch (v.type()) {
      case OrderedJson::value_t::null:
        name = "null";
        break;
      case OrderedJson::value_t::boolean:
        name = "boolean";
        break;
      case OrderedJson::value_t::number_integer:
      case OrderedJson::value_t::number_unsigned:
        name = "integer";
        break;
      case OrderedJson::value_t::number_float:
        name = "number";
        break;
      case OrderedJson::value_t::string:
        name = "string";
        break;
      case OrderedJson::value_t::array:
        name = "array";
        break;
      case OrderedJson::value_t::object:
        name = "object";
        break;
      default:
        name = "other";
        break;
    }
    return name == t || (t == "number" && name == "integer");
  }
  static bool format_ok(const std::string& format, const std::string& s) {
    auto digits = [&](size_t at, size_t n) {
      if (at + n > s.size()) return false;
      for (size_t i = at; i < at + n; ++i) {
        if (s[i] < '0' || s[i] > '9') return false;
      }
      return true;
    };
    auto date_at = [&](size_t at) {
      if (!digits(at, 4) || s.size() < at + 10 || s[at + 4] != '-' || !digits(at + 5, 2) ||
          s[at + 7] != '-' || !digits(at + 8, 2)) {
        return false;
      }
      const int month = std::stoi(s.substr(at + 5, 2)), day = std::stoi(s.substr(at + 8, 2));
      return month >= 1 && month <= 12 && day >= 1 && day <= 31;
    };
    if (format == "date") return s.size() == 10 && date_at(0);
    if (format == "date-time") {
      if (s.size() < 20 || !date_at(0) || s[10] != 'T' || !digits(11, 2) || s[13] != ':' ||
          !digits(14, 2) || s[16] != ':' || !digits(17, 2)) {
        return false;
      }
      size_t at = 19;
      if (s[at] == '.') {
        ++at;
        while (at < s.size() && s[at] >= '0' && s[at] <= '9') ++at;
      }
      const std::string zone = s.substr(at);
      return zone == "Z" ||
             (zone.size() == 6 && (zone[0] == '+' || zone[0] == '-') && zone[3] == ':');
    }
    if (format == "uuid") {
      if (s.size() != 36) return false;
      for (size_t i = 0; i < 36; ++i) {
        const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash != (s[i] == '-')) return false;
        if (!dash && !std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
      }
      return true;
    }
    if (format == "email") {
      const size_t at = s.find('@');
      return at != std::string::npos && at > 0 && s.find('@', at + 1) == std::string::npos &&
             s.find('.', at) != std::string::npos;
    }
    return false;
  }
  const OrderedJson& resolve(const std::string& ref) const {
    const OrderedJson* at = &root_;
    size_t i = 1;
    while (i < ref.size()) {
      const size_t next = std::min(ref.find('/', i + 1), ref.size());
      at = &(*at)[ref.substr(i + 1, next - i - 1)];
      i = next;
    }
    return *at;
  }

  bool valid(const OrderedJson& s, const OrderedJson& v) const {
    if (s.is_boolean()) return s.get<bool>();
    if (s.contains("$ref")) return valid(resolve(s["$ref"].get<std::string>()), v);
    if (s.contains("anyOf")) {
      bool any = false;
      for (const OrderedJson& option : s["anyOf"]) any = any || valid(option, v);
      if (!any) return false;
    }
    if (s.contains("enum")) {
      bool any = false;
      for (const OrderedJson& e : s["enum"]) any = any || e == v;
      if (!any) return false;
    }
    if (s.contains("const") && s["const"] != v) return false;
    if (s.contains("type")) {
      const OrderedJson& t = s["type"];
      bool any = false;
      for (const OrderedJson& one : t.is_array() ? t : OrderedJson::array({t})) {
        any = any || has_type(v, one.get<std::string>());
      }
      if (!any) return false;
    }
    if (v.is_object()) {
      const OrderedJson props = s.value("properties", OrderedJson::object());
      for (const OrderedJson& r : s.value("required", OrderedJson::array())) {
        if (!v.contains(r.get<std::string>())) return false;
      }
      for (const auto& [key, value] : v.items()) {
        if (props.contains(key)) {
          if (!valid(props[key], value)) return false;
        } else if (s.contains("additionalProperties") && !valid(s["additionalProperties"], value)) {
          return false;
        }
      }
    }
    if (v.is_array()) {
      if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return false;
      if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return false;
      if (s.contains("items")) {
        for (const OrderedJson& item : v) {
          if (!valid(s["items"], item)) return false;
        }
      }
    }
    if (v.is_string()) {
      const std::string str = v.get<std::string>();
      if (s.contains("minLength") && n_codepoints(str) < s["minLength"].get<size_t>()) return false;
      if (s.contains("maxLength") && n_codepoints(str) > s["maxLength"].get<size_t>()) return false;
      if (s.contains("pattern") &&
          !std::regex_search(str,
                             std::regex(s["pattern"].get<std::string>(), std::regex::ECMAScript))) {
        return false;
      }
      if (s.contains("format") && !format_ok(s["format"].get<std::string>(), str)) return false;
    }
    return true;
  }

  const OrderedJson& root_;
};

struct SchemaCase {
  const char* name;
  const char* schema;
  std::vector<const char*> valid;    // in the generated style: each must be accepted
  std::vector<const char*> invalid;  // each must be refused (and the validator agrees)
};

const std::vector<SchemaCase>& cases() {
  static const std::vector<SchemaCase> k = {
      {"person",
       R"({"type": "object", "additionalProperties": false,
           "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                          "email": {"type": "string", "format": "email"},
                          "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
                          "address": {"$ref": "#/$defs/address"}},
           "required": ["name", "age", "tags", "address"],
           "$defs": {"address": {"type": "object", "additionalProperties": false,
                                 "properties": {"city": {"type": "string"},
                                                "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
                                 "required": ["city", "zip"]}}})",
       {R"({"name":"Ann","age":31,"tags":[],"address":{"city":"Oslo","zip":"01234"}})",
        R"({"name": "A\"n\u00e9", "age": -7, "email": "a.b@x.org", "tags": ["x", "y"], )"
        R"("address": {"city": "", "zip": "99999"}})"},
       {R"({"name":"Ann","tags":[],"address":{"city":"Oslo","zip":"01234"}})",
        R"({"name":"Ann","age":31.5,"tags":[],"address":{"city":"Oslo","zip":"01234"}})",
        R"({"name":"Ann","age":31,"tags":["a","b","c","d"],"address":{"city":"O","zip":"01234"}})",
        R"({"name":"Ann","age":31,"tags":[],"address":{"city":"Oslo","zip":"0123"}})",
        R"({"name":"Ann","age":31,"tags":[],"address":{"city":"Oslo","zip":"01234"},"x":1})",
        R"({"name":"Ann","age":31,"email":"nope","tags":[],"address":{"city":"O","zip":"01234"}})"}},
      {"tree",
       R"({"$ref": "#/$defs/node",
           "$defs": {"node": {"type": "object", "additionalProperties": false,
             "properties": {"value": {"type": "integer"},
                            "children": {"type": "array", "items": {"$ref": "#/$defs/node"},
                                         "maxItems": 3}},
             "required": ["value", "children"]}}})",
       {R"({"value":1,"children":[{"value":2,"children":[{"value":3,"children":[]}]}]})"},
       {R"({"value":1,"children":[{"value":2}]})",
        R"({"value":1,"children":[{"value":2,"children":[{"value":"3","children":[]}]}]})"}},
      {"unions",
       R"({"type": "object", "additionalProperties": false,
           "properties": {"x": {"anyOf": [{"type": "string"}, {"type": "number"}]},
                          "y": {"type": ["string", "null"]},
                          "z": {"enum": ["a", 1, null, true, {"k": [1]}]},
                          "w": {"const": "fixed"}},
           "required": ["x", "y", "z", "w"]})",
       {R"({"x":"s","y":null,"z":{"k":[1]},"w":"fixed"})",
        R"({"x":1.5e3,"y":"t","z":null,"w":"fixed"})"},
       {R"({"x":true,"y":null,"z":"a","w":"fixed"})", R"({"x":1,"y":2,"z":"a","w":"fixed"})",
        R"({"x":1,"y":null,"z":"b","w":"fixed"})", R"({"x":1,"y":null,"z":"a","w":"other"})"}},
      {"bounded array",
       R"({"type": "array", "items": {"type": "boolean"}, "minItems": 2, "maxItems": 4})",
       {"[true,false]", "[true, true, false, false]"},
       {"[true]", "[true,true,true,true,true]", "[1,2]", "[]"}},
      {"formats",
       R"({"type": "object", "additionalProperties": false,
           "properties": {"d": {"type": "string", "format": "date"},
                          "t": {"type": "string", "format": "date-time"},
                          "u": {"type": "string", "format": "uuid"},
                          "s": {"type": "string", "minLength": 2, "maxLength": 5}},
           "required": ["d", "t", "u", "s"]})",
       {R"({"d":"2024-02-29","t":"2024-02-29T23:59:59.5+01:00","u":"123e4567-e89b-12d3-a456-426614174000","s":"héé"})"},
       {R"({"d":"2024-13-01","t":"2024-02-29T23:59:59Z","u":"123e4567-e89b-12d3-a456-426614174000","s":"ab"})",
        R"({"d":"2024-01-01","t":"2024-02-29","u":"123e4567-e89b-12d3-a456-426614174000","s":"ab"})",
        R"({"d":"2024-01-01","t":"2024-02-29T23:59:59Z","u":"123e4567e89b12d3a456426614174000","s":"ab"})",
        R"({"d":"2024-01-01","t":"2024-02-29T23:59:59Z","u":"123e4567-e89b-12d3-a456-426614174000","s":"abcdef"})"}},
      {"map",
       R"({"type": "object", "additionalProperties": {"type": "integer"}})",
       {"{}", R"({"a":1,"b":-2})"},
       {R"({"a":"1"})", R"({"a":1,})"}},
      {"optional order",
       R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"},
           "c": {"type": "integer"}}, "required": ["b"], "additionalProperties": false})",
       {R"({"b":1})", R"({"a":0,"b":1})", R"({"b":1,"c":2})", R"({"a":0,"b":1,"c":2})"},
       {"{}", R"({"a":0})", R"({"a":0,"c":2})"}},
      {"pattern at root",
       R"({"type": "string", "pattern": "^[A-Z][a-z]+$"})",
       {R"("Hello")"},
       {R"("hello")", R"("H")", "Hello"}},
      {"any value",
       R"({})",
       {R"({"a":[1,{"b":null}],"c":"d"})", "[]", "-0.5", R"("x")"},
       {"{", "nul", "01"}},
  };
  return k;
}

// `check(case, grammar, validator)` on each case, its schema compiled.
template <typename Check>
void for_each_case(Check check) {
  for (const SchemaCase& c : cases()) {
    SCOPED_TRACE(c.name);
    const OrderedJson schema = OrderedJson::parse(c.schema);
    Result<Grammar> g = json_schema_grammar(schema);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    check(c, *g, Validator(schema));
  }
}

TEST(JsonSchemaTest, AcceptsValidAndRefusesInvalidDocuments) {
  for_each_case([](const SchemaCase& c, const Grammar& g, const Validator& validator) {
    for (const char* doc : c.valid) {
      EXPECT_TRUE(validator.valid(OrderedJson::parse(doc))) << "test data: " << doc;
      EXPECT_TRUE(matches(g, doc)) << doc;
    }
    for (const char* doc : c.invalid) {
      const bool parses = OrderedJson::accept(doc);
      EXPECT_TRUE(!parses || !validator.valid(OrderedJson::parse(doc))) << "test data: " << doc;
      EXPECT_FALSE(matches(g, doc)) << doc;
    }
  });
}

TEST(JsonSchemaTest, RandomDocumentsParseAndValidate) {
  dsv4::testing::SeededRng rng;
  for_each_case([&](const SchemaCase&, const Grammar& grammar, const Validator& validator) {
    const Grammar* g = &grammar;
    int n_done = 0;
    for (int i = 0; i < 60; ++i) {
      std::string doc;
      if (!testing::random_document(*g, rng, doc)) continue;
      ++n_done;
      // nlohmann's own parser (format::parse_json refuses repeated keys, which free-form
      // objects may have: no context-free grammar can forbid them; JSON allows them).
      ASSERT_TRUE(OrderedJson::accept(doc)) << doc;
      EXPECT_TRUE(validator.valid(OrderedJson::parse(doc))) << doc;
      // A random byte changed: if the grammar still takes it, it must still be valid.
      std::string mutated = doc;
      mutated[static_cast<size_t>(rng.uniform_int(0, static_cast<int64_t>(doc.size()) - 1))] =
          "\"{}[],:0a-. \\e"[rng.uniform_int(0, 13)];
      if (matches(*g, mutated)) {
        EXPECT_TRUE(OrderedJson::accept(mutated) && validator.valid(OrderedJson::parse(mutated)))
            << mutated;
      }
    }
    EXPECT_GE(n_done, 30) << "random walks rarely finish";
  });
}

TEST(JsonSchemaTest, JsonObjectTakesAnyObjectOnly) {
  const Grammar g = json_object_grammar();
  EXPECT_TRUE(matches(g, R"({"a": [1, 2.5e-3, "\ud83d\ude00", {"b": null}], "c": false})"));
  EXPECT_TRUE(matches(g, "{}"));
  EXPECT_FALSE(matches(g, "[]"));
  EXPECT_FALSE(matches(g, R"({"a": 1,})"));
  EXPECT_FALSE(matches(g, R"( {"a": 1})"));                // no whitespace around the document
  EXPECT_FALSE(matches(g, "{\"a\":      1}"));             // whitespace is bounded
  EXPECT_FALSE(matches(g, "{\"a\": 12345678901234567}"));  // so are numbers
  EXPECT_FALSE(matches(g, R"({"a": "\ud83d"})"));          // a lone surrogate
  EXPECT_FALSE(matches(g, R"({"a": "\ude00\ud83d"})"));
}

TEST(JsonSchemaTest, RefusesUnsupportedKeywordsByName) {
  for (const auto& [schema, named] : std::vector<std::pair<const char*, const char*>>{
           {R"({"type": "integer", "minimum": 0})", "\"minimum\" at #"},
           {R"({"type": "object", "properties": {"a": {"type": "number", "multipleOf": 2}}})",
            "\"multipleOf\" at #/properties/a"},
           {R"({"oneOf": [{"type": "string"}]})", "\"oneOf\""},
           {R"({"allOf": [{"type": "string"}]})", "\"allOf\""},
           {R"({"not": {"type": "string"}})", "\"not\""},
           {R"({"type": "object", "patternProperties": {}})", "\"patternProperties\""},
           {R"({"type": "array", "prefixItems": []})", "\"prefixItems\""},
           {R"({"type": "array", "uniqueItems": true})", "\"uniqueItems\""},
           {R"({"type": "string", "format": "uri"})", "format \"uri\""},
           {R"({"type": "string", "pattern": "(a)\\1"})", "backreferences"},
           {R"({"$ref": "https://example.com/s.json"})", "not in this document"},
           {R"({"$ref": "#/$defs/missing"})", "points to nothing"},
           {R"({"$ref": "#"})", "left recursion"},
           {R"({"anyOf": [{"$ref": "#/$defs/a"}], "$defs": {"a": {"anyOf": [{"$ref": "#"}]}}})",
            "left recursion"},
           {R"({"type": "array", "maxItems": 100000})", "maxItems over"},
           {R"({"type": "object", "properties": {"a": true}, "required": ["b"]})",
            "\"b\" is not in properties"},
           {R"({"type": "strin"})", "unknown type"},
           {R"({"enum": [1], "type": "string"})", "does not have the type"},
           {R"(false)", "matches no value"},
       }) {
    Result<Grammar> g = json_schema_grammar(std::string_view(schema));
    ASSERT_FALSE(g.ok()) << schema;
    EXPECT_NE(g.status().message().find(named), std::string::npos)
        << schema << " -> " << g.status().to_string();
  }
}

}  // namespace
}  // namespace dsv4::grammar
