// The only door to the JSON library (nlohmann-json, from Debian). Everything else includes this
// header, so the library could be swapped in one place, and its exceptions never escape:
// parse_json turns them into a Status naming what was being parsed. It is stricter than the
// library: a key repeated within one object and nesting deeper than 64 levels are errors.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "dsv4/status.h"

namespace dsv4::format {

using Json = nlohmann::json;
// Keeps an object's keys in the order the text has them, where that order is part of the
// meaning: DeepSeek's chat encoder writes tool schemas back out as the request gave them.
using OrderedJson = nlohmann::ordered_json;

// Parses `text`; on failure the message names `what` (a file path, "request body", ...) and
// the byte offset the parser stopped at.
Result<Json> parse_json(std::string_view text, std::string_view what);
// The same checks, keys in their order.
Result<OrderedJson> parse_ordered_json(std::string_view text, std::string_view what);

}  // namespace dsv4::format
