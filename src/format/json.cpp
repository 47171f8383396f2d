#include "format/json.h"

#include <set>
#include <vector>

namespace dsv4::format {
namespace {

// Nesting deeper than any file we read has; a hostile header of a million '[' must not turn into
// a million nested values.
constexpr int kMaxJsonDepth = 64;

// Thrown from the parser callback and caught below; never leaves this file.
struct JsonRejected {
  std::string message;
};

template <typename JsonType>
Result<JsonType> parse_checked(std::string_view text, std::string_view what) {
  // nlohmann keeps the last of two equal keys silently. For us a repeated key is a corrupt file
  // (a tensor listed twice, a config field given twice), so the callback tracks the keys of each
  // open object and refuses a repeat.
  std::vector<std::set<std::string>> open_objects;
  const auto check = [&](int depth, typename JsonType::parse_event_t event, JsonType& parsed) {
    switch (event) {
      case JsonType::parse_event_t::object_start:
      case JsonType::parse_event_t::array_start:
        if (depth >= kMaxJsonDepth) {
          throw JsonRejected{"nesting deeper than " + std::to_string(kMaxJsonDepth)};
        }
        if (event == JsonType::parse_event_t::object_start) open_objects.emplace_back();
        break;
      case JsonType::parse_event_t::object_end:
        open_objects.pop_back();
        break;
      case JsonType::parse_event_t::key:
        if (!open_objects.back().insert(parsed.template get<std::string>()).second) {
          throw JsonRejected{"duplicate key '" + parsed.template get<std::string>() + "'"};
        }
        break;
      default:
        break;
    }
    return true;
  };
  try {
    return JsonType::parse(text.begin(), text.end(), check);
  } catch (const typename JsonType::parse_error& e) {
    return invalid_argument(std::string(what) + ": invalid JSON at byte " + std::to_string(e.byte) +
                            ": " + e.what());
  } catch (const typename JsonType::exception& e) {  // e.g. out_of_range for a number like 1e999
    return invalid_argument(std::string(what) + ": invalid JSON: " + e.what());
  } catch (const JsonRejected& e) {
    return invalid_argument(std::string(what) + ": invalid JSON: " + e.message);
  }
}

}  // namespace

Result<Json> parse_json(std::string_view text, std::string_view what) {
  return parse_checked<Json>(text, what);
}

Result<OrderedJson> parse_ordered_json(std::string_view text, std::string_view what) {
  return parse_checked<OrderedJson>(text, what);
}

}  // namespace dsv4::format
