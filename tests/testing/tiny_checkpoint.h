// Small synthetic safetensors checkpoints for the format and loader tests: single files,
// directories with model.safetensors, and sharded directories with an index, filled with random
// non-zero values (so an all-zero check can never pass by accident). Also raw writers for corrupt
// files: a header text and a length field that may lie.
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "base/tensor.h"
#include "dsv4/status.h"

namespace dsv4::testing {

struct TinyTensor {
  std::string name;
  DType dtype = DType::kBF16;
  Shape shape;
  std::vector<uint8_t> bytes;  // empty: filled by random_nonzero_bytes
};

// `numel` random values of `dtype`, each non-zero and finite, little-endian: floats in ±[0.5, 2),
// E8M0 scales within 2^±4, integers in [1, 100], bools true.
std::vector<uint8_t> random_nonzero_bytes(DType dtype, int64_t numel, std::mt19937_64& rng);

// One safetensors file at `path` (overwritten) holding `tensors` in order.
Status write_tiny_safetensors(const std::string& path, const std::vector<TinyTensor>& tensors,
                              std::mt19937_64& rng);

// shards.size() files named by format::shard_file_name in `dir` and the
// model.safetensors.index.json listing where each tensor is.
Status write_tiny_sharded(const std::string& dir,
                          const std::vector<std::vector<TinyTensor>>& shards, std::mt19937_64& rng);

// DIR/model.safetensors.index.json with this weight map (name -> shard file), as given.
Status write_shard_index(const std::string& dir,
                         const std::map<std::string, std::string>& weight_map);

// A file image: `header_length` as the 8-byte length field (it need not match), `header` as is,
// then `n_data_bytes` non-zero bytes. For writing corrupt files byte by byte.
std::vector<uint8_t> raw_safetensors(uint64_t header_length, std::string_view header,
                                     size_t n_data_bytes);
// The same with the true header length.
std::vector<uint8_t> raw_safetensors(std::string_view header, size_t n_data_bytes);

Status write_bytes(const std::string& path, const std::vector<uint8_t>& bytes);
Status write_text(const std::string& path, std::string_view text);

}  // namespace dsv4::testing
