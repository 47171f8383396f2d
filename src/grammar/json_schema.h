// JSON Schema to a grammar of the JSON documents it accepts: the subset OpenAI's strict
// structured outputs accept (docs/structured_outputs.md lists it), plus "any JSON object" for
// `response_format: {"type": "json_object"}`. Every keyword outside the subset is refused by
// name with its location (`minimum at #/properties/age`), never ignored: a document the grammar
// lets through must validate against the schema.
//
// What the grammar generates is a subset of the valid documents, chosen so that a model can
// neither loop forever nor wander:
//   - whitespace: at most kMaxWhitespace bytes of space, tab or newline wherever JSON allows
//     whitespace inside the document, none before or after it;
//   - numbers: at most kMaxIntegerDigits digits before the point, kMaxFractionDigits after,
//     kMaxExponentDigits in the exponent, so a
//     model cannot write digits forever and every number parses as a finite double;
//   - object properties in the order `properties` lists them; properties it does not list are
//     never generated (additionalProperties absent or true allows them; none is still valid);
//   - strings with a `pattern` or `format` write each character one way (\" \\ \n ..., \u00XX for
//     other control characters, the rest as UTF-8); free strings take any JSON escape.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "dsv4/status.h"
#include "format/json.h"
#include "grammar/grammar.h"
#include "grammar/regex.h"

namespace dsv4::grammar {

constexpr int32_t kMaxWhitespace = 4;
constexpr int32_t kMaxIntegerDigits = 16;
constexpr int32_t kMaxFractionDigits = 16;
constexpr int32_t kMaxExponentDigits = 2;  // every number fits a double (< 1e117)
// minItems, maxItems, minLength and maxLength above this are refused (each counted item or
// character is a copy in the automaton).
constexpr int64_t kMaxCount = 4096;

class SchemaCompiler;

// One schema document's rules inside a grammar being built beside other rules (a tool call's
// arguments among the DSML around them, chat/tool_call_grammar.h). `root` must outlive it.
class SchemaRules {
 public:
  // `strings`: how strings' characters are written (kJsonString, or kDsmlJsonString inside DSML).
  SchemaRules(GrammarBuilder& builder, const format::OrderedJson& root, TextEncoding strings);
  ~SchemaRules();
  // The rule of the values valid against the subschema at `pointer` (a JSON pointer into the
  // document: "#", "#/properties/x"), made once. Errors as json_schema_grammar's.
  Result<int32_t> rule_at(const std::string& pointer);
  // rule_at("#/properties/KEY"), the key escaped as a JSON pointer token.
  Result<int32_t> property_rule(const std::string& key);
  // Any JSON value.
  int32_t any_value_rule();

 private:
  std::unique_ptr<SchemaCompiler> compiler_;
};

// `schema` as parsed, keys in their order (property order is the generated order).
Result<Grammar> json_schema_grammar(const format::OrderedJson& schema);
// The same from the schema's text.
Result<Grammar> json_schema_grammar(std::string_view schema_text);
// Any JSON object (response_format json_object).
Grammar json_object_grammar();
// Text that matches `pattern` whole (vLLM's guided regex), written as UTF-8.
Result<Grammar> regex_grammar(std::string_view pattern);

}  // namespace dsv4::grammar
