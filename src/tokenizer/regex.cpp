#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex.h"

#include <pcre2.h>

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

}  // namespace

Result<Regex> Regex::compile(const std::string& pattern, bool literal) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  const uint32_t options = PCRE2_UTF | PCRE2_UCP | (literal ? PCRE2_LITERAL : 0);
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
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
  size_t start = 0;
  while (start <= text.size()) {
    const int rc = pcre2_match(code_->code, subject, text.size(), start, 0, match.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) return invalid_argument("regex match failed: " + pcre2_message(rc));
    const PCRE2_SIZE* span = pcre2_get_ovector_pointer(match.get());
    if (span[1] > span[0]) {
      found.emplace_back(span[0], span[1]);
      start = span[1];
    } else if (span[0] >= text.size()) {
      break;
    } else {
      // An empty match: Hugging Face drops it. Step over one UTF-8 character and go on.
      start = span[0] + 1;
      while (start < text.size() && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) {
        ++start;
      }
    }
  }
  return found;
}

}  // namespace dsv4::tokenizer
