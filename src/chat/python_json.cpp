#include "chat/python_json.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "format/json.h"
#include "tokenizer/utf8.h"

namespace dsv4::chat {
namespace {

// Python's limits: sys.int_info.default_max_str_digits, and about sys.getrecursionlimit() for
// the C scanner's nesting.
constexpr size_t kMaxIntDigits = 4300;
constexpr int kMaxDepth = 1000;

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

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// json.loads's scanner (Lib/json/decoder.py and Modules/_json.c), over UTF-8 text.
class Reader {
 public:
  Reader(std::string_view text, std::string_view what) : text_(text), what_(what) {}

  Result<PythonJson> document() {
    if (text_.starts_with("\xEF\xBB\xBF")) {
      return fail(0, "Unexpected UTF-8 BOM (decode using utf-8-sig)");
    }
    skip_space();
    DSV4_ASSIGN_OR_RETURN(PythonJson value, this->value(0));
    skip_space();
    if (at_ != text_.size()) return fail(at_, "Extra data");
    return value;
  }

 private:
  Status fail(size_t at, const std::string& why) const {
    return invalid_argument(std::string(what_) + ": not JSON as Python reads it: " + why +
                            " at byte " + std::to_string(at));
  }
  void skip_space() {
    while (at_ < text_.size() &&
           (text_[at_] == ' ' || text_[at_] == '\t' || text_[at_] == '\n' || text_[at_] == '\r')) {
      ++at_;
    }
  }
  bool take(std::string_view word) {
    if (text_.substr(at_, word.size()) != word) return false;
    at_ += word.size();
    return true;
  }

  Result<PythonJson> value(int depth) {
    if (at_ >= text_.size()) return fail(at_, "Expecting value");
    PythonJson out;
    const char c = text_[at_];
    if (c == '"') {
      out.kind = PythonJson::Kind::kString;
      DSV4_ASSIGN_OR_RETURN(out.text, string());
      return out;
    }
    if (c == '{' || c == '[') {
      if (depth >= kMaxDepth) return fail(at_, "nesting deeper than Python's recursion limit");
      return container(depth + 1, c == '{');
    }
    if (take("null")) return out;
    out.kind = PythonJson::Kind::kBool;
    if (take("true")) {
      out.text = "true";
      return out;
    }
    if (take("false")) {
      out.text = "false";
      return out;
    }
    out.kind = PythonJson::Kind::kNumber;
    for (const char* word : {"NaN", "Infinity", "-Infinity"}) {
      if (take(word)) {
        out.text = word;
        return out;
      }
    }
    if (c == '-' || is_digit(c)) return number();
    return fail(at_, "Expecting value");
  }

  // The power of ten of a nonzero float literal's leading nonzero digit (1.5e3 → 3, 0.02 → -2),
  // saturated: a written exponent far past any double's range stays far past it.
  static long decimal_exponent(std::string_view written) {
    constexpr long kFar = 1'000'000'000;
    const size_t e = std::min(written.find_first_of("eE"), written.size());
    const std::string_view mantissa = written.substr(0, e);
    const size_t point = std::min(mantissa.find('.'), mantissa.size());
    const size_t lead = mantissa.find_first_of("123456789");
    if (lead == std::string_view::npos) return -kFar;  // zero
    long exponent = 0;
    if (e < written.size()) {
      const char* digits = written.data() + e + 1;
      if (*digits == '+') ++digits;
      if (std::from_chars(digits, written.data() + written.size(), exponent).ec != std::errc()) {
        exponent = *digits == '-' ? -kFar : kFar;
      }
      exponent = std::clamp(exponent, -kFar, kFar);
    }
    const long shift = lead < point ? static_cast<long>(point - lead) - 1
                                    : -static_cast<long>(lead - point);
    return exponent + shift;
  }

  // -?(0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?: an int when neither fraction nor exponent is given.
  Result<PythonJson> number() {
    const size_t begin = at_;
    size_t i = at_;
    if (text_[i] == '-') ++i;
    if (i >= text_.size() || !is_digit(text_[i])) return fail(begin, "Expecting value");
    const size_t int_begin = i;
    if (text_[i] == '0') {
      ++i;
    } else {
      while (i < text_.size() && is_digit(text_[i])) ++i;
    }
    const size_t int_end = i;
    bool is_float = false;
    if (i + 1 < text_.size() && text_[i] == '.' && is_digit(text_[i + 1])) {
      is_float = true;
      i += 2;
      while (i < text_.size() && is_digit(text_[i])) ++i;
    }
    if (i < text_.size() && (text_[i] == 'e' || text_[i] == 'E')) {
      size_t j = i + 1;
      if (j < text_.size() && (text_[j] == '+' || text_[j] == '-')) ++j;
      if (j < text_.size() && is_digit(text_[j])) {
        is_float = true;
        i = j;
        while (i < text_.size() && is_digit(text_[i])) ++i;
      }
    }
    at_ = i;
    PythonJson out;
    out.kind = PythonJson::Kind::kNumber;
    const std::string_view written = text_.substr(begin, i - begin);
    if (!is_float) {
      const std::string_view digits = text_.substr(int_begin, int_end - int_begin);
      if (digits.size() > kMaxIntDigits) {
        return fail(begin, "an integer of more than 4300 digits (Python's int_max_str_digits)");
      }
      out.text = digits == "0" ? "0" : std::string(written);  // int("-0") is 0
      return out;
    }
    double v = 0;
    const auto [end, error] = std::from_chars(written.data(), written.data() + written.size(), v);
    if (error == std::errc::result_out_of_range) {
      // Past the double range: Python's float() gives ±inf, or ±0.0 below the smallest
      // subnormal. The decimal exponent of the leading nonzero digit tells which.
      v = decimal_exponent(written) > 0 ? std::numeric_limits<double>::infinity() : 0.0;
      if (written[0] == '-') v = -v;
    } else if (error != std::errc() || end != written.data() + written.size()) {
      return fail(begin, "a number that does not read as a float");
    }
    out.text = python_float(v);
    return out;
  }

  Result<uint32_t> hex4(size_t at) {
    if (at + 4 > text_.size()) return fail(at, "Invalid \\uXXXX escape");
    uint32_t v = 0;
    for (size_t k = 0; k < 4; ++k) {
      const char c = text_[at + k];
      const int d = is_digit(c)            ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
      if (d < 0) return fail(at, "Invalid \\uXXXX escape");
      v = v * 16 + static_cast<uint32_t>(d);
    }
    return v;
  }

  Result<std::string> string() {
    const size_t begin = at_++;
    std::string out;
    for (;;) {
      if (at_ >= text_.size()) return fail(begin, "Unterminated string starting");
      const auto c = static_cast<unsigned char>(text_[at_]);
      if (c == '"') {
        ++at_;
        return out;
      }
      if (c < 0x20) return fail(at_, "Invalid control character");
      if (c != '\\') {
        out += static_cast<char>(c);
        ++at_;
        continue;
      }
      if (at_ + 1 >= text_.size()) return fail(begin, "Unterminated string starting");
      const char e = text_[at_ + 1];
      at_ += 2;
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          DSV4_ASSIGN_OR_RETURN(uint32_t cp, hex4(at_));
          at_ += 4;
          if (cp >= 0xD800 && cp <= 0xDBFF && text_.substr(at_, 2) == "\\u") {
            Result<uint32_t> low = hex4(at_ + 2);
            if (low.ok() && *low >= 0xDC00 && *low <= 0xDFFF) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (*low - 0xDC00);
              at_ += 6;
            }
          }
          if (cp >= 0xD800 && cp <= 0xDFFF) {
            return fail(at_ - 6, "a lone surrogate, which UTF-8 text cannot hold");
          }
          tokenizer::append_utf8(cp, out);
          break;
        }
        default:
          return fail(at_ - 2, "Invalid \\escape");
      }
    }
  }

  // An object or an array, at_ on its opening bracket: members or items separated by ',' up to
  // the closing bracket.
  Result<PythonJson> container(int depth, bool is_object) {
    PythonJson out;
    out.kind = is_object ? PythonJson::Kind::kObject : PythonJson::Kind::kArray;
    const std::string_view close = is_object ? "}" : "]";
    ++at_;
    skip_space();
    if (take(close)) return out;
    for (;;) {
      if (is_object) {
        DSV4_RETURN_IF_ERROR(member(depth, out));
      } else {
        DSV4_ASSIGN_OR_RETURN(PythonJson v, value(depth));
        out.items.push_back(std::move(v));
      }
      skip_space();
      if (take(close)) return out;
      if (!take(",")) return fail(at_, "Expecting ',' delimiter");
      skip_space();
    }
  }

  // `"key": value` into `object`: a repeated key keeps its first place and takes the last value,
  // as a dict does.
  Status member(int depth, PythonJson& object) {
    if (at_ >= text_.size() || text_[at_] != '"') {
      return fail(at_, "Expecting property name enclosed in double quotes");
    }
    DSV4_ASSIGN_OR_RETURN(std::string key, string());
    skip_space();
    if (!take(":")) return fail(at_, "Expecting ':' delimiter");
    skip_space();
    DSV4_ASSIGN_OR_RETURN(PythonJson v, value(depth));
    for (size_t i = 0; i < object.keys.size(); ++i) {
      if (object.keys[i] == key) {
        object.items[i] = std::move(v);
        return ok_status();
      }
    }
    object.keys.push_back(std::move(key));
    object.items.push_back(std::move(v));
    return ok_status();
  }

  std::string_view text_;
  std::string_view what_;
  size_t at_ = 0;
};

}  // namespace

const PythonJson* PythonJson::member(std::string_view key) const {
  if (kind != Kind::kObject) return nullptr;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (keys[i] == key) return &items[i];
  }
  return nullptr;
}

Result<PythonJson> python_json_loads(std::string_view text, std::string_view what) {
  // Text that is not UTF-8 cannot be a Python str.
  if (const size_t bad = tokenizer::first_invalid_utf8(text); bad != text.size()) {
    return invalid_argument(std::string(what) + ": not UTF-8 at byte " + std::to_string(bad));
  }
  return Reader(text, what).document();
}

std::string python_json_string(const std::string& text) {
  // nlohmann escapes exactly what Python does with ensure_ascii=False: \" \\ \b \f \n \r \t, and
  // other control characters as lowercase \u00xx.
  return format::OrderedJson(text).dump(-1, ' ', false,
                                        format::OrderedJson::error_handler_t::replace);
}

std::string python_json_dumps(const PythonJson& value) {
  switch (value.kind) {
    case PythonJson::Kind::kObject: {
      std::string out = "{";
      for (size_t i = 0; i < value.keys.size(); ++i) {
        if (i) out += ", ";
        out += python_json_string(value.keys[i]) + ": " + python_json_dumps(value.items[i]);
      }
      return out + "}";
    }
    case PythonJson::Kind::kArray: {
      std::string out = "[";
      for (const PythonJson& item : value.items) {
        if (out.size() > 1) out += ", ";
        out += python_json_dumps(item);
      }
      return out + "]";
    }
    case PythonJson::Kind::kString:
      return python_json_string(value.text);
    case PythonJson::Kind::kNull:
      return "null";
    default:  // booleans and numbers keep the text they were read as
      return value.text;
  }
}

}  // namespace dsv4::chat
