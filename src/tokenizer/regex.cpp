#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex.h"

#include <pcre2.h>

#include <optional>

#include "tokenizer/utf8.h"

namespace dsv4::tokenizer {

struct Regex::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

namespace {

std::string pcre2_message(int error) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(error, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

// Oniguruma's \s in a UTF-8 regex: Unicode's White_Space property, as members of a class.
constexpr const char* kWhiteSpace =
    R"(\t-\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

// `pattern` with \s and \S written out as Oniguruma reads them (see regex.h); the shorthands
// the two engines disagree on otherwise are refused.
Result<std::string> to_pcre2(const std::string& pattern) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c != '\\' || i + 1 == pattern.size()) {
      // An unescaped ']' closes a class unless it is the class's first member.
      if (c == '[' && !in_class) {
        in_class = true;
        out += c;
        if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
        if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
        continue;
      }
      if (c == ']' && in_class) in_class = false;
      out += c;
      continue;
    }
    const char e = pattern[++i];
    switch (e) {
      case 's':
        out += in_class ? std::string(kWhiteSpace) : "[" + std::string(kWhiteSpace) + "]";
        break;
      case 'S':
        if (in_class) return unimplemented("\\S inside a character class is not supported");
        out += "[^" + std::string(kWhiteSpace) + "]";
        break;
      case 'w':
      case 'W':
      case 'b':
      case 'B':
      case 'h':
      case 'H':
      case 'Q':
        return unimplemented(std::string("\\") + e +
                             " is not supported (Oniguruma and PCRE2 read it differently)");
      default:
        out += '\\';
        out += e;
    }
  }
  return out;
}

}  // namespace

Result<Regex> Regex::compile(const std::string& pattern, bool literal) {
  std::string source = pattern;
  if (!literal) {
    Result<std::string> translated = to_pcre2(pattern);
    if (!translated.ok()) return translated.status().with_context("pattern \"" + pattern + "\"");
    source = *std::move(translated);
  }
  int error = 0;
  PCRE2_SIZE offset = 0;
  const uint32_t options = PCRE2_UTF | PCRE2_UCP | (literal ? PCRE2_LITERAL : 0);
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(source.data()), source.size(),
                                   options, &error, &offset, nullptr);
  if (code == nullptr) {
    return invalid_argument("pattern \"" + pattern + "\" does not compile at offset " +
                            std::to_string(offset) + ": " + pcre2_message(error));
  }
  auto owned = std::make_shared<Code>();
  owned->code = code;
  Regex regex;
  regex.code_ = std::move(owned);
  return regex;
}

Result<std::vector<std::pair<size_t, size_t>>> Regex::find_all(std::string_view text) const {
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
      pcre2_match_data_create_from_pattern(code_->code, nullptr), &pcre2_match_data_free);
  std::vector<std::pair<size_t, size_t>> found;
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t search_from = 0;
  std::optional<size_t> last_match_end;
  // The UTF check runs once, on the first search; later searches start at character boundaries
  // of text already checked.
  uint32_t options = 0;
  while (search_from <= text.size()) {
    const int rc =
        pcre2_match(code_->code, subject, text.size(), search_from, options, match.get(), nullptr);
    options = PCRE2_NO_UTF_CHECK;
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) return invalid_argument("regex match failed: " + pcre2_message(rc));
    const PCRE2_SIZE* span = pcre2_get_ovector_pointer(match.get());
    const size_t begin = span[0], end = span[1];
    if (begin == end && last_match_end == end) {
      search_from += search_from < text.size() ? utf8_length(text, search_from) : 1;
      continue;
    }
    found.emplace_back(begin, end);
    search_from = end;
    last_match_end = end;
  }
  return found;
}

}  // namespace dsv4::tokenizer
