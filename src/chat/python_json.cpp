#include "chat/python_json.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

namespace dsv4::chat {
namespace {

// Python's repr of a float: the shortest digits that read back to the same double, in fixed
// notation while the decimal exponent is in [-4, 16), otherwise as d.ddde±XX. (nlohmann switches
// to exponents one power of ten earlier, so 1e15 would come out as "1e+15", not
// "1000000000000000.0".)
std::string python_float(double v) {
  if (std::isnan(v)) return "NaN";  // json.dumps writes these bare; JSON text cannot hold them
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string sci(buf, result.ptr);  // "-d.ddde+XX", shortest round trip
  const size_t e = sci.find('e');
  const bool negative = sci[0] == '-';
  std::string digits;
  for (size_t i = negative ? 1 : 0; i < e; ++i) {
    if (sci[i] != '.') digits += sci[i];
  }
  const int exponent = std::atoi(sci.c_str() + e + 1);
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    const int point = exponent + 1;  // digits before the decimal point
    if (point <= 0) {
      out.append("0.").append(static_cast<size_t>(-point), '0').append(digits);
    } else if (static_cast<size_t>(point) >= digits.size()) {
      out.append(digits).append(point - digits.size(), '0').append(".0");
    } else {
      out.append(digits, 0, point).append(".").append(digits, point);
    }
    return out;
  }
  out.append(digits, 0, 1);
  if (digits.size() > 1) out.append(".").append(digits, 1);
  const int magnitude = std::abs(exponent);
  out.append(exponent < 0 ? "e-" : "e+").append(magnitude < 10 ? "0" : "");
  out.append(std::to_string(magnitude));
  return out;
}

}  // namespace

std::string python_json_string(const std::string& text) {
  // nlohmann escapes exactly what Python does with ensure_ascii=False: \" \\ \b \f \n \r \t, and
  // other control characters as lowercase \u00xx.
  return format::OrderedJson(text).dump(-1, ' ', false,
                                        format::OrderedJson::error_handler_t::replace);
}

std::string python_json(const format::OrderedJson& value) {
  switch (value.type()) {
    case format::OrderedJson::value_t::object: {
      std::string out = "{";
      for (const auto& item : value.items()) {
        if (out.size() > 1) out += ", ";
        out += python_json_string(item.key()) + ": " + python_json(item.value());
      }
      return out + "}";
    }
    case format::OrderedJson::value_t::array: {
      std::string out = "[";
      for (const auto& item : value) {
        if (out.size() > 1) out += ", ";
        out += python_json(item);
      }
      return out + "]";
    }
    case format::OrderedJson::value_t::string:
      return python_json_string(value.get<std::string>());
    case format::OrderedJson::value_t::number_float:
      return python_float(value.get<double>());
    default:  // null, booleans and integers are written alike
      return value.dump();
  }
}

}  // namespace dsv4::chat
