// libFuzzer target: the tokenizer's two inputs. First byte even: the rest is a tokenizer.json,
// which must load or fail with a Status. Odd: the rest is prompt text for the small test
// tokenizer (tests/tokenizer/fixtures), or for DeepSeek's tokenizer.json when
// DSV4_DEEPSEEK_TOKENIZER names it; it must encode or fail, and text that encodes must decode
// to itself. Never a crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "dsv4/tokenizer.h"

namespace {

const dsv4::Tokenizer& small_tokenizer() {
  static const dsv4::Tokenizer tokenizer = [] {
    const char* root = std::getenv("DSV4_SOURCE_DIR");
    const char* deepseek = std::getenv("DSV4_DEEPSEEK_TOKENIZER");
    const std::string path =
        deepseek && *deepseek
            ? std::string(deepseek)
            : std::string(root ? root : ".") + "/tests/tokenizer/fixtures/small_tokenizer.json";
    auto loaded = dsv4::Tokenizer::load(path);
    if (!loaded.ok()) std::abort();  // the fixture itself is broken: not a finding
    return std::move(loaded).value();
  }();
  return tokenizer;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    (void)dsv4::Tokenizer::parse(rest, "fuzz/tokenizer.json");
    return 0;
  }
  const auto ids = small_tokenizer().encode(rest);
  if (!ids.ok()) return 0;
  const auto text = small_tokenizer().decode(*ids);
  if (!text.ok() || *text != rest) std::abort();
  return 0;
}
