// JSON as Python's json module reads and writes it (Python 3.11: json.loads, and json.dumps with
// ensure_ascii=False). DeepSeek's encoder reads tool-call arguments with json.loads and writes
// tool schemas and non-string arguments with json.dumps, and the model was trained on those
// bytes, so a prompt is only right if every value comes out as Python would write it:
//   - integers of any size, as written (Python's int), e.g. 123456789012345678901234567890;
//   - floats as repr writes them (the shortest digits that read back, 1e+16, 1e-05), those past
//     the double range as Python reads them (1e400 -> Infinity, 1e-400 -> 0.0), and the literals
//     NaN, Infinity, -Infinity that json.loads accepts and json.dumps writes;
//   - ", " and ": " between items, keys in a dict's order (a repeated key keeps its first place
//     and takes its last value), non-ASCII characters as they are.
// What json.loads refuses is refused, with the reason and byte offset: a leading UTF-8 BOM,
// control characters in strings, bad escapes, trailing text, integers of more than 4300 digits
// (Python's int_max_str_digits), nesting past 1000 levels (Python's recursion limit). Where
// Python would give a str with a lone surrogate (\ud800), which no UTF-8 text can hold, this is
// refused too.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "dsv4/status.h"

namespace dsv4::chat {

struct PythonJson {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };
  Kind kind = Kind::kNull;
  // kBool: "true" or "false"; kNumber: the number as json.dumps writes it; kString: the string.
  std::string text;
  // kArray: the items; kObject: the values, in the dict's order, keys[i] the key of items[i]
  // (two vectors: a vector of the incomplete PythonJson is allowed, a vector of pairs is not).
  std::vector<PythonJson> items;
  std::vector<std::string> keys;

  // The value of `key` in an object, or null when absent (or not an object).
  const PythonJson* member(std::string_view key) const;
};

// As json.loads(text); `what` names the text in errors.
Result<PythonJson> python_json_loads(std::string_view text, std::string_view what);
// As json.dumps(value, ensure_ascii=False).
std::string python_json_dumps(const PythonJson& value);

// One string as a JSON string literal (quotes and escapes as Python writes them). Bytes that are
// not UTF-8 become U+FFFD, as Python's decoding of model output would have made them.
std::string python_json_string(const std::string& text);

}  // namespace dsv4::chat
