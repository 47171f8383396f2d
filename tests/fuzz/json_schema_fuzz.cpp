// libFuzzer target: the structured-output compilers on any bytes. The input's first byte picks
// the compiler (% 3 == 0: JSON Schema, 1: regex, 2: strict tools' calls, chat/tool_call_grammar.h),
// the rest is the schema, the pattern or the tools. Each must
// compile or return an error, never crash or run away; what compiles is then walked: bytes
// drawn from the input's own bytes, each either read or refused, and the set of stacks stays
// within bounds.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "chat/tool_call_grammar.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  dsv4::Result<dsv4::grammar::Grammar> g = data[0] % 3 == 0 ? dsv4::grammar::json_schema_grammar(text)
                                           : data[0] % 3 == 1 ? dsv4::grammar::regex_grammar(text)
                                                              : dsv4::chat::tool_call_grammar(text);
  if (!g.ok()) {
    if (g.status().message().empty()) std::abort();  // every refusal says why
    return 0;
  }
  dsv4::grammar::Matcher m(*g);
  for (size_t i = 0; i < text.size() && i < 256; ++i) {
    m.advance(text.substr(i, 1));
    if (m.set().stacks.size() > g->states.size() * 64) std::abort();
  }
  return 0;
}
