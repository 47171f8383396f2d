#include "grammar/regex.h"

#include <string>
#include <utility>
#include <vector>

#include "tokenizer/unicode.h"

namespace dsv4::grammar {
namespace {

using Ranges = std::vector<CodepointRange>;

const Ranges& digit_ranges() {
  static const Ranges r = {{'0', '9'}};
  return r;
}
const Ranges& word_ranges() {
  static const Ranges r = normalize({{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}});
  return r;
}
// ECMA-262's WhiteSpace (tab, vertical tab, form feed, U+FEFF and every Space_Separator) and
// LineTerminator (\n, \r, U+2028, U+2029); Space_Separator (Zs) from the tokenizer's Unicode
// tables, as the standard defines it.
const Ranges& space_ranges() {
  static const Ranges r = [] {
    namespace unicode = tokenizer::unicode;
    Ranges ranges = {{'\t', '\r'}, {0x2028, 0x2029}, {0xFEFF, 0xFEFF}};
    for (const unicode::CategoryRange& c : unicode::kCategoryRanges) {
      if (c.category == unicode::GeneralCategory::kZs) ranges.push_back({c.first, c.last});
    }
    return normalize(std::move(ranges));
  }();
  return r;
}
// What `.` matches: all but ECMA-262's line terminators.
const Ranges& dot_ranges() {
  static const Ranges r = complement(normalize({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}));
  return r;
}
const Ranges& any_ranges() {
  static const Ranges r = normalize({{0, kMaxCodepoint}});
  return r;
}

class Parser {
 public:
  Parser(std::string_view pattern, TextEncoding encoding) : p_(pattern), encoding_(encoding) {}

  Result<Expr> parse(RegexMatch match) {
    bool head = false, tail = false;
    if (!p_.empty() && p_[0] == '^') {
      head = true;
      ++at_;
    }
    std::string_view body = p_;
    if (body.size() > at_ && body.back() == '$' && !escaped_at(body.size() - 1)) {
      tail = true;
      end_ = body.size() - 1;
    } else {
      end_ = body.size();
    }
    DSV4_ASSIGN_OR_RETURN(Expr e, alternation());
    if (at_ != end_) return error(p_[at_] == ')' ? "unbalanced ')'" : "unexpected character");
    if (match == RegexMatch::kWhole) return e;
    std::vector<Expr> parts;
    if (!head)
      parts.push_back(Expr::repeat(chars_expr(any_ranges(), encoding_), 0, Expr::kUnbounded));
    parts.push_back(std::move(e));
    if (!tail)
      parts.push_back(Expr::repeat(chars_expr(any_ranges(), encoding_), 0, Expr::kUnbounded));
    return Expr::seq(std::move(parts));
  }

 private:
  // Whether the character at i is escaped (an odd run of backslashes before it).
  bool escaped_at(size_t i) const {
    size_t n = 0;
    while (i > n && p_[i - n - 1] == '\\') ++n;
    return n % 2 == 1;
  }
  Status error(const std::string& what) const {
    return invalid_argument("pattern \"" + std::string(p_) + "\" at offset " + std::to_string(at_) +
                            ": " + what);
  }
  bool more() const { return at_ < end_; }
  char peek() const { return p_[at_]; }

  Result<Expr> alternation() {
    std::vector<Expr> options;
    while (true) {
      DSV4_ASSIGN_OR_RETURN(Expr e, sequence());
      options.push_back(std::move(e));
      if (!more() || peek() != '|') break;
      ++at_;
    }
    return Expr::alt(std::move(options));
  }

  Result<Expr> sequence() {
    std::vector<Expr> parts;
    while (more() && peek() != '|' && peek() != ')') {
      if (++depth_guard_ > kMaxParts) return error("pattern too long");
      DSV4_ASSIGN_OR_RETURN(Expr atom_expr, atom());
      DSV4_ASSIGN_OR_RETURN(Expr quantified, quantifier(std::move(atom_expr)));
      parts.push_back(std::move(quantified));
    }
    return Expr::seq(std::move(parts));
  }

  Result<Expr> atom() {
    const char c = peek();
    switch (c) {
      case '(':
        return group();
      case '[': {
        DSV4_ASSIGN_OR_RETURN(Ranges r, char_class());
        return chars_expr(r, encoding_);
      }
      case '.':
        ++at_;
        return chars_expr(dot_ranges(), encoding_);
      case '\\': {
        DSV4_ASSIGN_OR_RETURN(Ranges r, escape(false));
        return chars_expr(r, encoding_);
      }
      case '^':
      case '$':
        return error(std::string("anchor '") + c + "' inside the pattern is not supported");
      case '*':
      case '+':
      case '?':
      case '{':
        return error(std::string("nothing to repeat before '") + c + "'");
      default: {
        DSV4_ASSIGN_OR_RETURN(uint32_t cp, codepoint());
        return chars_expr({{cp, cp}}, encoding_);
      }
    }
  }

  Result<Expr> group() {
    if (++nesting_ > kMaxNesting) return error("groups nested too deeply");
    ++at_;  // (
    if (more() && peek() == '?') {
      const std::string_view rest = p_.substr(at_, end_ - at_);
      if (rest.starts_with("?:")) {
        at_ += 2;
      } else if (rest.starts_with("?<") && !rest.starts_with("?<=") && !rest.starts_with("?<!")) {
        const size_t close = rest.find('>');
        if (close == std::string_view::npos) return error("unterminated group name");
        at_ += close + 1;
      } else if (rest.starts_with("?=") || rest.starts_with("?!") || rest.starts_with("?<")) {
        return error("lookaround is not supported");
      } else {
        return error("group flags are not supported");
      }
    }
    DSV4_ASSIGN_OR_RETURN(Expr e, alternation());
    if (!more() || peek() != ')') return error("missing ')'");
    ++at_;
    --nesting_;
    return e;
  }

  Result<int32_t> number() {
    int64_t n = 0;
    const size_t start = at_;
    while (more() && peek() >= '0' && peek() <= '9') {
      n = n * 10 + (peek() - '0');
      if (n > kMaxRegexRepeat) {
        return error("repeat count over " + std::to_string(kMaxRegexRepeat));
      }
      ++at_;
    }
    if (at_ == start) return error("expected a number in {m,n}");
    return static_cast<int32_t>(n);
  }

  Result<Expr> quantifier(Expr e) {
    if (!more()) return e;
    int32_t min = 0, max = 0;
    switch (peek()) {
      case '*':
        min = 0, max = Expr::kUnbounded;
        ++at_;
        break;
      case '+':
        min = 1, max = Expr::kUnbounded;
        ++at_;
        break;
      case '?':
        min = 0, max = 1;
        ++at_;
        break;
      case '{': {
        ++at_;
        DSV4_ASSIGN_OR_RETURN(min, number());
        max = min;
        if (more() && peek() == ',') {
          ++at_;
          max = Expr::kUnbounded;
          if (more() && peek() != '}') {
            DSV4_ASSIGN_OR_RETURN(max, number());
          }
        }
        if (!more() || peek() != '}') return error("missing '}'");
        ++at_;
        if (max != Expr::kUnbounded && max < min) return error("{m,n} with n < m");
        break;
      }
      default:
        return e;
    }
    if (more() && peek() == '?') ++at_;  // lazy: the same strings
    if (more() && (peek() == '*' || peek() == '+' || peek() == '?' || peek() == '{')) {
      return error("a quantifier after a quantifier is not supported");
    }
    return Expr::repeat(std::move(e), min, max);
  }

  // One UTF-8 encoded character of the pattern.
  Result<uint32_t> codepoint() {
    const auto b = static_cast<uint8_t>(p_[at_]);
    int n = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || at_ + static_cast<size_t>(n) > end_) return error("invalid UTF-8");
    uint32_t cp = n == 1 ? b : b & (0x7F >> n);
    for (int i = 1; i < n; ++i) {
      const auto cont = static_cast<uint8_t>(p_[at_ + static_cast<size_t>(i)]);
      if ((cont >> 6) != 0x2) return error("invalid UTF-8");
      cp = (cp << 6) | (cont & 0x3F);
    }
    at_ += static_cast<size_t>(n);
    return cp;
  }

  Result<uint32_t> hex(size_t digits) {
    if (at_ + digits > end_) return error("truncated hex escape");
    uint32_t v = 0;
    for (size_t i = 0; i < digits; ++i) {
      const char c = p_[at_++];
      const int d = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
      if (d < 0) return error("bad hex digit");
      v = v * 16 + static_cast<uint32_t>(d);
    }
    return v;
  }

  // After a backslash: the set it stands for. In a class, \b is a backspace (ECMA-262).
  Result<Ranges> escape(bool in_class) {
    ++at_;  // backslash
    if (!more()) return error("trailing backslash");
    const char c = p_[at_];
    auto one = [](uint32_t cp) { return Ranges{{cp, cp}}; };
    // \d \w \s and their complements \D \W \S.
    for (const auto& [lower, ranges] : {std::pair{'d', &digit_ranges}, std::pair{'w', &word_ranges},
                                        std::pair{'s', &space_ranges}}) {
      if (c == lower || c == lower - 'a' + 'A') {
        ++at_;
        return c == lower ? ranges() : complement(ranges());
      }
    }
    // The control escapes: each stands for one character.
    for (const auto& [letter, cp] :
         {std::pair{'n', '\n'}, std::pair{'t', '\t'}, std::pair{'r', '\r'}, std::pair{'f', '\f'},
          std::pair{'v', '\v'}, std::pair{'0', '\0'}}) {
      if (c == letter) {
        ++at_;
        return one(static_cast<uint32_t>(cp));
      }
    }
    switch (c) {
      case 'x': {
        ++at_;
        DSV4_ASSIGN_OR_RETURN(uint32_t v, hex(2));
        return one(v);
      }
      case 'u': {
        ++at_;
        DSV4_ASSIGN_OR_RETURN(uint32_t v, hex(4));
        return normalize(one(v));  // a lone surrogate matches nothing
      }
      case 'b':
        if (in_class) {
          ++at_;
          return one('\b');
        }
        return error("word boundaries (\\b) are not supported");
      case 'B':
        return error("word boundaries (\\B) are not supported");
      case 'p':
      case 'P':
        return error("Unicode property classes (\\p) are not supported");
      case 'k':
        return error("named backreferences are not supported");
      default:
        if (c >= '1' && c <= '9') return error("backreferences are not supported");
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
          return error(std::string("unknown escape \\") + c);
        }
        {
          DSV4_ASSIGN_OR_RETURN(uint32_t cp, codepoint());  // \. \\ \/ \[ ...: the character
          return one(cp);
        }
    }
  }

  Result<Ranges> char_class() {
    ++at_;  // [
    bool negate = false;
    if (more() && peek() == '^') {
      negate = true;
      ++at_;
    }
    Ranges set;
    bool first = true;
    while (true) {
      if (!more()) return error("missing ']'");
      if (peek() == ']' && !first) break;
      first = false;
      DSV4_ASSIGN_OR_RETURN(Ranges lo, class_atom());
      if (more() && peek() == '-' && at_ + 1 < end_ && p_[at_ + 1] != ']') {
        ++at_;
        DSV4_ASSIGN_OR_RETURN(Ranges hi, class_atom());
        if (lo.size() != 1 || hi.size() != 1 || lo[0].lo != lo[0].hi || hi[0].lo != hi[0].hi) {
          return error("a class range needs single characters at both ends");
        }
        if (hi[0].lo < lo[0].lo) return error("class range out of order");
        set.push_back({lo[0].lo, hi[0].lo});
      } else {
        set.insert(set.end(), lo.begin(), lo.end());
      }
    }
    ++at_;  // ]
    set = normalize(std::move(set));
    return negate ? complement(set) : set;
  }

  Result<Ranges> class_atom() {
    if (peek() == '\\') return escape(true);
    if (peek() == '[' && at_ + 1 < end_ && p_[at_ + 1] == ':') {
      return error("POSIX classes ([:alpha:]) are not supported");
    }
    DSV4_ASSIGN_OR_RETURN(uint32_t cp, codepoint());
    return Ranges{{cp, cp}};
  }

  static constexpr int kMaxNesting = 64;
  static constexpr int kMaxParts = 1 << 14;

  std::string_view p_;
  TextEncoding encoding_;
  size_t at_ = 0;
  size_t end_ = 0;
  int nesting_ = 0;
  int depth_guard_ = 0;
};

// JSON's one spelling of a character that must be escaped inside a string.
std::string json_escape(uint32_t c) {
  switch (c) {
    case '"':
      return "\\\"";
    case '\\':
      return "\\\\";
    case '\b':
      return "\\b";
    case '\f':
      return "\\f";
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    default: {
      static constexpr char kHex[] = "0123456789abcdef";
      return std::string("\\u00") + kHex[c >> 4] + kHex[c & 0xF];
    }
  }
}

}  // namespace

Expr chars_expr(const std::vector<CodepointRange>& ranges, TextEncoding encoding) {
  constexpr uint32_t kFullwidthBar = 0xFF5C;
  if (encoding == TextEncoding::kRaw) return utf8_expr(ranges);
  // Plain characters as UTF-8, the ones JSON must escape (", \, U+0000..U+001F) as escapes.
  std::vector<CodepointRange> plain;
  std::vector<Expr> options;
  std::vector<CodepointRange> split;  // for DSML, ｜ taken out to be written as its escape
  for (const CodepointRange& r : ranges) {
    if (encoding != TextEncoding::kDsmlJsonString || r.lo > kFullwidthBar ||
        r.hi < kFullwidthBar) {
      split.push_back(r);
      continue;
    }
    options.push_back(Expr::literal("\\uff5c"));
    if (r.lo < kFullwidthBar) split.push_back({r.lo, kFullwidthBar - 1});
    if (r.hi > kFullwidthBar) split.push_back({kFullwidthBar + 1, r.hi});
  }
  for (const CodepointRange& r : split) {
    for (uint32_t c = r.lo; c <= std::min<uint32_t>(r.hi, 0x1F); ++c) {
      options.push_back(Expr::literal(json_escape(c)));
    }
    if (r.lo <= '"' && '"' <= r.hi) options.push_back(Expr::literal(json_escape('"')));
    if (r.lo <= '\\' && '\\' <= r.hi) options.push_back(Expr::literal(json_escape('\\')));
    for (const CodepointRange& part : std::vector<CodepointRange>{
             {std::max<uint32_t>(r.lo, 0x20), std::min<uint32_t>(r.hi, '"' - 1)},
             {std::max<uint32_t>(r.lo, '"' + 1), std::min<uint32_t>(r.hi, '\\' - 1)},
             {std::max<uint32_t>(r.lo, '\\' + 1), r.hi}}) {
      if (part.lo <= part.hi) plain.push_back(part);
    }
  }
  if (!plain.empty()) options.push_back(utf8_expr(plain));
  return Expr::alt(std::move(options));
}

Result<Expr> regex_expr(std::string_view pattern, TextEncoding encoding, RegexMatch match) {
  return Parser(pattern, encoding).parse(match);
}

}  // namespace dsv4::grammar
