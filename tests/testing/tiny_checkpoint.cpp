#include "testing/tiny_checkpoint.h"

#include <cstdio>
#include <cstring>
#include <filesystem>

#include "base/float_convert.h"
#include "format/checkpoint_files.h"
#include "format/json.h"
#include "format/safetensors_writer.h"

namespace dsv4::testing {
namespace {

template <typename T>
void put(std::vector<uint8_t>& out, size_t idx, T value) {
  std::memcpy(out.data() + idx * sizeof(T), &value, sizeof(T));
}

// F16 bit patterns of ±[0.5, 2): exponent 14 or 15 (bias 15), any mantissa.
uint16_t random_f16(std::mt19937_64& rng) {
  const uint64_t r = rng();
  return static_cast<uint16_t>(((r & 1) << 15) | ((14 + ((r >> 1) & 1)) << 10) |
                               ((r >> 2) & 0x3ff));
}

}  // namespace

std::vector<uint8_t> random_nonzero_bytes(DType dtype, int64_t numel, std::mt19937_64& rng) {
  std::vector<uint8_t> out(static_cast<size_t>(numel) * dtype_size(dtype));
  std::uniform_real_distribution<float> magnitude(0.5f, 2.0f);
  std::uniform_int_distribution<int> small_int(1, 100);
  for (size_t i = 0; i < static_cast<size_t>(numel); ++i) {
    const float x = (rng() & 1 ? -1.0f : 1.0f) * magnitude(rng);
    switch (dtype) {
      case DType::kF64:
        put<double>(out, i, x);
        break;
      case DType::kF32:
        put<float>(out, i, x);
        break;
      case DType::kF16:
        put<uint16_t>(out, i, random_f16(rng));
        break;
      case DType::kBF16:
        put<uint16_t>(out, i, float_to_bf16(x));
        break;
      case DType::kF8E4M3:
        put<uint8_t>(out, i, float_to_e4m3(x));
        break;
      case DType::kF8E8M0:
        put<uint8_t>(out, i, static_cast<uint8_t>(123 + rng() % 9));
        break;
      case DType::kU8:
        put<uint8_t>(out, i, static_cast<uint8_t>(1 + rng() % 255));
        break;
      case DType::kI8:
        put<int8_t>(out, i, static_cast<int8_t>(small_int(rng)));
        break;
      case DType::kI32:
        put<int32_t>(out, i, small_int(rng));
        break;
      case DType::kI64:
        put<int64_t>(out, i, small_int(rng));
        break;
      case DType::kBool:
        put<uint8_t>(out, i, 1);
        break;
    }
  }
  return out;
}

Status write_tiny_safetensors(const std::string& path, const std::vector<TinyTensor>& tensors,
                              std::mt19937_64& rng) {
  format::SafetensorsWriter writer;
  for (const TinyTensor& t : tensors) {
    writer.add_raw(t.name, t.dtype, t.shape,
                   t.bytes.empty() ? random_nonzero_bytes(t.dtype, t.shape.numel(), rng) : t.bytes);
  }
  return writer.write(path, /*overwrite=*/true);
}

Status write_tiny_sharded(const std::string& dir,
                          const std::vector<std::vector<TinyTensor>>& shards,
                          std::mt19937_64& rng) {
  std::map<std::string, std::string> weight_map;
  for (size_t s = 0; s < shards.size(); ++s) {
    const std::string name = format::shard_file_name(s, shards.size());
    DSV4_RETURN_IF_ERROR(write_tiny_safetensors(dir + "/" + name, shards[s], rng));
    for (const TinyTensor& t : shards[s]) weight_map[t.name] = name;
  }
  return write_shard_index(dir, weight_map);
}

Status write_shard_index(const std::string& dir,
                         const std::map<std::string, std::string>& weight_map) {
  const format::Json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}};
  return write_text(dir + "/model.safetensors.index.json", index.dump(2));
}

std::vector<uint8_t> raw_safetensors(uint64_t header_length, std::string_view header,
                                     size_t n_data_bytes) {
  std::vector<uint8_t> out(8 + header.size() + n_data_bytes, 0x5a);
  for (size_t i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(header_length >> (8 * i));
  if (!header.empty()) std::memcpy(out.data() + 8, header.data(), header.size());
  return out;
}

std::vector<uint8_t> raw_safetensors(std::string_view header, size_t n_data_bytes) {
  return raw_safetensors(header.size(), header, n_data_bytes);
}

Status write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  std::FILE* out = std::fopen(path.c_str(), "wb");
  if (out == nullptr) return invalid_argument(path + ": cannot create");
  const bool written =
      bytes.empty() || std::fwrite(bytes.data(), 1, bytes.size(), out) == bytes.size();
  const bool closed = std::fclose(out) == 0;
  return written && closed ? ok_status() : internal_error(path + ": write failed");
}

Status write_text(const std::string& path, std::string_view text) {
  return write_bytes(path, std::vector<uint8_t>(text.begin(), text.end()));
}

}  // namespace dsv4::testing
