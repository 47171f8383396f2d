// IncrementalDecoder (include/dsv4/tokenizer.h).
#include <string_view>

#include "dsv4/tokenizer.h"

namespace dsv4 {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

bool ends_with_replacement(const std::string& text) {
  return text.size() >= kReplacement.size() &&
         std::string_view(text).substr(text.size() - kReplacement.size()) == kReplacement;
}

}  // namespace

Result<std::string> IncrementalDecoder::text_after_read(bool final_only) {
  const auto begin = ids_.begin() + static_cast<std::ptrdiff_t>(prefix_);
  DSV4_ASSIGN_OR_RETURN(
      std::string prefix_text,
      tokenizer_.decode({begin, ids_.begin() + static_cast<std::ptrdiff_t>(read_)}));
  DSV4_ASSIGN_OR_RETURN(std::string window_text, tokenizer_.decode({begin, ids_.end()}));
  if (final_only && ends_with_replacement(window_text)) return std::string();
  // The window's text starts with the prefix's: both are decoded from the same boundary and the
  // prefix ended on a whole character.
  prefix_ = read_;
  read_ = ids_.size();
  return window_text.substr(prefix_text.size());
}

Result<std::string> IncrementalDecoder::add(int64_t id) {
  ids_.push_back(id);
  return text_after_read(true);
}

Result<std::string> IncrementalDecoder::finish() {
  if (!holding()) return std::string();
  return text_after_read(false);
}

}  // namespace dsv4
