// JSON Schema validation written from the specification, for the keywords of the structured-output
// subset (docs/structured_outputs.md): the independent judge of the documents the grammar lets
// through, on nlohmann-json's parse, sharing nothing with the compiler. format: date, date-time,
// uuid and email; other formats are refused (false) so that a test using one fails visibly.
#pragma once

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <regex>
#include <string>

#include "format/json.h"

namespace dsv4::testing {

class JsonSchemaValidator {
 public:
  explicit JsonSchemaValidator(const format::OrderedJson& root) : root_(root) {}
  bool valid(const format::OrderedJson& v) const { return valid(root_, v); }

 private:
  static size_t n_codepoints(const std::string& s) {
    size_t n = 0;
    for (const char c : s) n += (static_cast<uint8_t>(c) & 0xC0) != 0x80;
    return n;
  }
  // JSON Schema's type of a value; an integer is also a number.
  static bool has_type(const format::OrderedJson& v, const std::string& t) {
    std::string name;
    switch (v.type()) {
      case format::OrderedJson::value_t::null:
        name = "null";
        break;
      case format::OrderedJson::value_t::boolean:
        name = "boolean";
        break;
      case format::OrderedJson::value_t::number_integer:
      case format::OrderedJson::value_t::number_unsigned:
        name = "integer";
        break;
      case format::OrderedJson::value_t::number_float:
        name = "number";
        break;
      case format::OrderedJson::value_t::string:
        name = "string";
        break;
      case format::OrderedJson::value_t::array:
        name = "array";
        break;
      case format::OrderedJson::value_t::object:
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
  const format::OrderedJson& resolve(const std::string& ref) const {
    const format::OrderedJson* at = &root_;
    size_t i = 1;
    while (i < ref.size()) {
      const size_t next = std::min(ref.find('/', i + 1), ref.size());
      at = &(*at)[ref.substr(i + 1, next - i - 1)];
      i = next;
    }
    return *at;
  }

  bool valid(const format::OrderedJson& s, const format::OrderedJson& v) const {
    if (s.is_boolean()) return s.get<bool>();
    if (s.contains("$ref")) return valid(resolve(s["$ref"].get<std::string>()), v);
    if (s.contains("anyOf")) {
      bool any = false;
      for (const format::OrderedJson& option : s["anyOf"]) any = any || valid(option, v);
      if (!any) return false;
    }
    if (s.contains("enum")) {
      bool any = false;
      for (const format::OrderedJson& e : s["enum"]) any = any || e == v;
      if (!any) return false;
    }
    if (s.contains("const") && s["const"] != v) return false;
    if (s.contains("type")) {
      const format::OrderedJson& t = s["type"];
      bool any = false;
      for (const format::OrderedJson& one : t.is_array() ? t : format::OrderedJson::array({t})) {
        any = any || has_type(v, one.get<std::string>());
      }
      if (!any) return false;
    }
    if (v.is_object()) {
      const format::OrderedJson props = s.value("properties", format::OrderedJson::object());
      for (const format::OrderedJson& r : s.value("required", format::OrderedJson::array())) {
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
        for (const format::OrderedJson& item : v) {
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

  const format::OrderedJson& root_;
};

}  // namespace dsv4::testing
