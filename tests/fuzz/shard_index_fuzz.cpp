// libFuzzer target: any byte string as a model.safetensors.index.json. The parser must return a
// weight map whose shard paths stay inside the checkpoint directory, or an error; never crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "format/checkpoint_files.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto index = dsv4::format::parse_shard_index(text, "fuzz.index.json");
  if (!index.ok()) return 0;
  for (const auto& [name, shard] : *index) {
    // The parser's promise: nothing absolute, nothing that climbs out.
    if (shard.empty() || shard[0] == '/' || shard == ".." || shard.rfind("../", 0) == 0 ||
        shard.find("/../") != std::string::npos ||
        (shard.size() >= 3 && shard.compare(shard.size() - 3, 3, "/..") == 0)) {
      std::abort();
    }
  }
  return 0;
}
