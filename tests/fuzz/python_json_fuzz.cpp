// libFuzzer target: chat/python_json, the json.loads / json.dumps of DeepSeek's encoder. The
// input is JSON text; it must read or fail with a Status, and what reads must write text that
// reads back to the same value (dumps(loads(dumps(v))) == dumps(v), as in Python). Never a crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "chat/python_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto value = dsv4::chat::python_json_loads(text, "fuzz");
  if (!value.ok()) return 0;
  const std::string once = dsv4::chat::python_json_dumps(*value);
  const auto again = dsv4::chat::python_json_loads(once, "fuzz");
  if (!again.ok() || dsv4::chat::python_json_dumps(*again) != once) std::abort();
  return 0;
}
