// libFuzzer target: any byte string as a config.json. The parser must return a config that the
// rest of the loader can use (every slot's shape computable without overflow, every
// convention's name set buildable in bounded memory) or an error; never crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "checkpoint/config.h"
#include "checkpoint/tensor_names.h"

namespace {

using dsv4::checkpoint::ModelConfig;
using dsv4::checkpoint::Param;

// Every slot of every layer: present or not, and when present a shape of positive dims whose
// element count fits int64 (UBSan aborts on a signed overflow inside slot_shape itself).
void check_slot_shapes(const ModelConfig& config) {
  for (int p = 0; p < dsv4::checkpoint::kNumParams; ++p) {
    const Param param = static_cast<Param>(p);
    const auto& spec = dsv4::checkpoint::slot_spec(param);
    for (int64_t layer = -1; layer < config.n_layer; ++layer) {
      if (!dsv4::checkpoint::slot_present(spec, config, layer)) continue;
      const dsv4::Shape shape = dsv4::checkpoint::slot_shape(param, config, layer);
      int64_t numel = 1;
      for (int i = 0; i < shape.rank; ++i) {
        if (shape[i] <= 0 || __builtin_mul_overflow(numel, shape[i], &numel)) std::abort();
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto config = dsv4::checkpoint::parse_model_config(text, "fuzz/config.json");
  if (!config.ok()) return 0;
  if (static_cast<int64_t>(config->layers.size()) != config->n_layer) std::abort();
  check_slot_shapes(*config);
  for (auto convention : dsv4::checkpoint::kAllConventions) {
    (void)dsv4::checkpoint::expected_keys(*config, convention);
  }
  return 0;
}
