// python_json: what Python 3.11's json.loads reads and json.dumps(ensure_ascii=False) writes
// (expected values from python3 itself, as the comments show), where nlohmann's differ.
#include "chat/python_json.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "format/json.h"
#include "testing/source_dir.h"

namespace dsv4::chat {
namespace {

std::string dumps(const std::string& json_text) {
  Result<PythonJson> value = python_json_loads(json_text, "test");
  EXPECT_TRUE(value.ok()) << value.status().to_string();
  return value.ok() ? python_json_dumps(*value) : std::string();
}

TEST(PythonJsonTest, WritesFloatsAsPythonsRepr) {
  EXPECT_EQ(dumps("[1e15, 1e16, 123456789012345.6, 0.0001, 0.00001, 1.0, -0.0, 2.5e20, 1e-7]"),
            "[1000000000000000.0, 1e+16, 123456789012345.6, 0.0001, 1e-05, 1.0, -0.0, 2.5e+20, "
            "1e-07]");
  EXPECT_EQ(dumps("[0.1, 100, -3, 1.5e300, 5e-324]"), "[0.1, 100, -3, 1.5e+300, 5e-324]");
}

TEST(PythonJsonTest, KeepsKeyOrderAndWritesSpacesAndEscapes) {
  EXPECT_EQ(dumps(R"({"b": [true, false, null], "a": {}, "c": [], "é": "tab\t\u0001\"\\ 😀"})"),
            R"({"b": [true, false, null], "a": {}, "c": [], "é": "tab\t\u0001\"\\ 😀"})");
  EXPECT_EQ(python_json_string("bad \xff byte"), "\"bad \xEF\xBF\xBD byte\"");
}

// Expected values from python3 -c 'import json; print(json.dumps(json.loads(TEXT),
// ensure_ascii=False))' (Python 3.11.7).
TEST(PythonJsonTest, ReadsNumbersAsPythonDoes) {
  EXPECT_EQ(dumps("[123456789012345678901234567890, -98765432109876543210987654321, -0, 0, "
                  "1e400, -1e400, 1e-400, -1e-400, 2.5E+3, 1E2]"),
            "[123456789012345678901234567890, -98765432109876543210987654321, 0, 0, Infinity, "
            "-Infinity, 0.0, -0.0, 2500.0, 100.0]");
  EXPECT_EQ(dumps("[NaN, Infinity, -Infinity, 1.0, 0.1, 1e16, 1e15]"),
            "[NaN, Infinity, -Infinity, 1.0, 0.1, 1e+16, 1000000000000000.0]");
  EXPECT_EQ(dumps("[1.7976931348623157e308, 1.7976931348623159e308, 4.9e-324, 2e-324, 123e-2, "
                  "0.000001]"),
            "[1.7976931348623157e+308, Infinity, 5e-324, 0.0, 1.23, 1e-06]");
  EXPECT_EQ(dumps("[100000000000000000000.0, 1.5e-5, 12345678901234567890.0]"),
            "[1e+20, 1.5e-05, 1.2345678901234567e+19]");
  EXPECT_EQ(dumps("[1e99999999999999999999, -1e-99999999999999999999, 0.0001e+400, 1e-400]"),
            "[Infinity, -0.0, Infinity, 0.0]");
  // Exponents near long's limits, and leading zeros that move the first digit past the range.
  std::string extremes = "[";
  extremes.append(79, '1').append("e9223372036854775803, 0.").append(400, '0');
  extremes.append("1e5, 100e-9223372036854775807, -0.").append(330, '0').append("5e9]");
  EXPECT_EQ(dumps(extremes), "[Infinity, 0.0, 0.0, -5e-322]");
  // 4300 digits is Python's int_max_str_digits: one more is a ValueError.
  EXPECT_EQ(dumps(std::string(4300, '7')), std::string(4300, '7'));
  EXPECT_FALSE(python_json_loads(std::string(4301, '7'), "t").ok());
}

TEST(PythonJsonTest, ReadsObjectsAndStringsAsPythonDoes) {
  // A repeated key keeps its first place and takes the last value, as a dict does.
  EXPECT_EQ(dumps(R"({"a": 1, "b": 2, "a": 3})"), R"({"a": 3, "b": 2})");
  EXPECT_EQ(dumps("  {\"k\": \"\\ud83d\\ude00 \\u00e9 \\/ \\b\\f\"} \n\t"),
            "{\"k\": \"😀 é / \\b\\f\"}");
}

// What json.loads refuses, with its message and the offset it gives.
TEST(PythonJsonTest, RefusesWhatPythonRefuses) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"\xEF\xBB\xBF{}", "Unexpected UTF-8 BOM (decode using utf-8-sig) at byte 0"},
      {R"({"a": 1,})", "Expecting property name enclosed in double quotes at byte 8"},
      {"[1 2]", "Expecting ',' delimiter at byte 3"},
      {"\"a\x01\"", "Invalid control character at byte 2"},
      {R"("\x")", "Invalid \\escape at byte 1"},
      {"01", "Extra data at byte 1"},
      {"[1.]", "Expecting ',' delimiter at byte 2"},
      {"-", "Expecting value at byte 0"},
      {R"({"a" 1})", "Expecting ':' delimiter at byte 5"},
      {"nul", "Expecting value at byte 0"},
      {"[1] x", "Extra data at byte 4"},
      {R"("\ud800")", "lone surrogate"},  // Python's str can hold one, UTF-8 cannot
      {"\"\xFF\"", "not UTF-8 at byte 1"},
      {std::string(1001, '[') + std::string(1001, ']'), "recursion limit"},
  };
  for (const auto& [text, message] : cases) {
    Result<PythonJson> value = python_json_loads(text, "t");
    ASSERT_FALSE(value.ok()) << text;
    EXPECT_NE(value.status().message().find(message), std::string::npos)
        << value.status().to_string();
  }
}

// 600 random texts (scripts/make_python_json_golden.py): numbers of every form, strings with
// every escape, nesting, repeated keys, and texts made invalid; Python's json.dumps(json.loads)
// of each, or that json.loads refused it.
TEST(PythonJsonTest, MatchesPythonOnRandomTexts) {
  std::ifstream in(testing::source_path("tests/chat/golden/python_json_cases.json"));
  std::stringstream text;
  text << in.rdbuf();
  const format::Json golden = format::parse_json(text.str(), "python_json_cases.json").value();
  ASSERT_GE(golden["cases"].size(), 600u);
  size_t n_refused = 0;
  for (const format::Json& c : golden["cases"]) {
    const std::string input = c["text"].get<std::string>();
    SCOPED_TRACE(format::Json(input).dump());
    Result<PythonJson> value = python_json_loads(input, "case");
    if (c.contains("error")) {
      EXPECT_FALSE(value.ok()) << python_json_dumps(*value);
      n_refused += !value.ok();
      continue;
    }
    ASSERT_TRUE(value.ok()) << value.status().to_string();
    EXPECT_EQ(python_json_dumps(*value), c["dumps"].get<std::string>());
  }
  EXPECT_GT(n_refused, 100u);
}

}  // namespace
}  // namespace dsv4::chat
