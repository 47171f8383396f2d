// libFuzzer target: any byte string as a whole safetensors file image. The parser must answer
// with tensors or an error, never crash, hang or read outside the input (ASan/UBSan watch).
// Every byte of every accepted tensor is read, so an offset the checks let through past the end
// of the buffer is caught.
#include <cstddef>
#include <cstdint>

#include "format/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dsv4::Result<std::vector<dsv4::format::TensorInfo>> tensors =
      dsv4::format::parse_safetensors(data, size, "fuzz.safetensors");
  if (!tensors.ok()) return 0;
  volatile uint8_t sink = 0;
  for (const dsv4::format::TensorInfo& t : *tensors) {
    for (size_t i = 0; i < t.bytes; ++i) sink = sink ^ t.data[i];
  }
  return 0;
}
