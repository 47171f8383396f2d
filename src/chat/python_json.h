// JSON written as Python's json.dumps(value, ensure_ascii=False) writes it: ", " and ": " between
// items, keys in their given order, non-ASCII characters as they are, floats as Python's repr.
// DeepSeek's encoder writes tool schemas and non-string tool arguments this way, and the model
// was trained on those bytes, so a prompt is only right if they match exactly.
#pragma once

#include <string>

#include "format/json.h"

namespace dsv4::chat {

std::string python_json(const format::OrderedJson& value);

// One string as a JSON string literal (quotes and escapes as Python writes them). Bytes that are
// not UTF-8 become U+FFFD, as Python's decoding of model output would have made them.
std::string python_json_string(const std::string& text);

}  // namespace dsv4::chat
