#include "format/json.h"

namespace dsv4::format {

Result<Json> parse_json(std::string_view text, std::string_view what) {
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const Json::parse_error& e) {
    return invalid_argument(std::string(what) + ": invalid JSON at byte " +
                            std::to_string(e.byte) + ": " + e.what());
  }
}

}  // namespace dsv4::format
