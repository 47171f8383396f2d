// libFuzzer target: the Split patterns' matcher. The input is a pattern, a NUL byte and a text
// (no NUL: the pattern alone, searched in a fixed text of every class). The pattern must compile
// or fail with a Status; a compiled pattern must search the text or fail with one (text that is
// not UTF-8, a search past the step limit), and its matches must be in order, within the text
// and on character boundaries. Never a crash, never a hang.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "tokenizer/regex.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string pattern(input.substr(0, nul));
  const std::string text = nul == std::string_view::npos
                               ? std::string("Hello, 世界! 123 \t\n\u3000é\U0001FAE8's\r\n")
                               : std::string(input.substr(nul + 1));
  for (const bool literal : {false, true}) {
    const auto regex = dsv4::tokenizer::Regex::compile(pattern, literal);
    if (!regex.ok()) continue;
    const auto found = regex->find_all(text);
    if (!found.ok()) continue;
    size_t at = 0;
    for (const auto& [begin, end] : *found) {
      const bool boundary = (begin == text.size() || (text[begin] & 0xC0) != 0x80) &&
                            (end == text.size() || (text[end] & 0xC0) != 0x80);
      if (begin < at || end < begin || end > text.size() || !boundary) std::abort();
      at = end;
    }
  }
  return 0;
}
