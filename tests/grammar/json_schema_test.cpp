// The JSON Schema compiler against JSON Schema's semantics: an independent validator written
// here (on nlohmann-json's parse, not on the grammar) judges every document the grammar lets
// through - random walks through the grammar and random mutations of them - and hand-written
// documents check that valid ones are accepted byte by byte and invalid ones refused.
#include "grammar/json_schema.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "format/json.h"
#include "grammar_testing.h"
#include "testing/json_schema_validator.h"

namespace dsv4::grammar {
namespace {

using dsv4::testing::JsonSchemaValidator;
using format::OrderedJson;
using testing::matches;

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
    check(c, *g, JsonSchemaValidator(schema));
  }
}

TEST(JsonSchemaTest, AcceptsValidAndRefusesInvalidDocuments) {
  for_each_case([](const SchemaCase& c, const Grammar& g, const JsonSchemaValidator& validator) {
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
  for_each_case([&](const SchemaCase&, const Grammar& grammar,
                    const JsonSchemaValidator& validator) {
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

// Every optional property may be the first one written, with the rest behind it: the grammar
// grows with the square of their count (600 would take ~5M nodes, 1000 over 2 GB). Past the
// node cap that is refused before it is built.
// Objects of hundreds or thousands of optional properties (OpenAPI-derived tools, forms)
// compile: the grammar grows with the properties. Past the state cap they are refused.
TEST(JsonSchemaTest, CompilesThousandsOfOptionalProperties) {
  const auto schema = [](int n) {
    OrderedJson properties = OrderedJson::object();
    for (int i = 0; i < n; ++i)
      properties[std::string("p").append(std::to_string(i))] = OrderedJson::object();
    return OrderedJson{{"type", "object"}, {"properties", properties}};
  };
  for (const int n : {300, 1000}) {
    SCOPED_TRACE(n);
    const Result<Grammar> g = json_schema_grammar(schema(n));
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    const std::string last = std::string("\"p").append(std::to_string(n - 1)).append("\": ");
    EXPECT_TRUE(matches(*g, "{}"));
    EXPECT_TRUE(matches(*g, std::string("{\"p0\": 1, ").append(last).append("\"x\"}")));
    EXPECT_TRUE(matches(*g, std::string("{\"p1\": [], \"p10\": {}, \"p100\": null}")));
    EXPECT_FALSE(matches(*g, std::string("{").append(last).append("1, \"p0\": 1}")));
    EXPECT_FALSE(matches(*g, "{\"p1\": 1, \"p1\": 1}"));
    EXPECT_FALSE(matches(*g, "{\"p1\": 1,}"));
    EXPECT_FALSE(matches(*g, "{, \"p1\": 1}"));
    EXPECT_FALSE(matches(*g, "{\"p1\": 1,, \"p2\": 1}"));
    EXPECT_FALSE(matches(*g, std::string("{\"p").append(std::to_string(n)).append("\": 1}")));
  }
  Result<Grammar> g = json_schema_grammar(schema(10000));
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(g.status().message().find("the grammar has more than 262144 states"), std::string::npos)
      << g.status().to_string();
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
           {R"({"type": "array", "maxItems": 18446744073709551615})", "maxItems over 4096"},
           {R"({"type": "string", "minLength": -1})", "minLength must be a non-negative integer"},
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
