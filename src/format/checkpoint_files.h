// A checkpoint on disk: one .safetensors file, a directory holding one, or a directory of shards
// listed by model.safetensors.index.json. Sharding is checked: every index entry is present in
// its shard, no name is in two shards, no shard holds a tensor the index does not list.
// Knows no model names.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "format/safetensors.h"

namespace dsv4::format {

class CheckpointFiles {
 public:
  // `path`: a .safetensors file or a directory.
  static Result<CheckpointFiles> open(const std::string& path);

  // Every tensor of every shard, shard by shard in index order.
  const std::vector<const TensorInfo*>& tensors() const { return tensors_; }
  const TensorInfo* find(std::string_view name) const;
  // The shard file a tensor lives in (for messages).
  const std::string& file_of(std::string_view name) const;
  const std::string& directory() const { return directory_; }
  size_t n_shards() const { return shards_.size(); }

 private:
  // The index and the shards agree: every shard tensor is listed under its own shard, every
  // listed tensor exists.
  Status check_index(const std::string& index_path, const std::vector<std::string>& shard_names,
                     const std::map<std::string, std::string>& shard_of) const;

  std::string directory_;
  std::vector<std::unique_ptr<SafetensorsFile>> shards_;
  std::vector<const TensorInfo*> tensors_;
  std::map<std::string, std::pair<const TensorInfo*, size_t>, std::less<>> by_name_;
};

// The index file of a sharded checkpoint (the Hugging Face convention).
inline constexpr const char* kShardIndexName = "model.safetensors.index.json";

// The Hugging Face name of shard `index` (from 0) of `count`: "model-00001-of-00003.safetensors".
std::string shard_file_name(size_t index, size_t count);

// Writes DIR/model.safetensors.index.json (replacing one there): the shards' tensor bytes in all
// (metadata.total_size) and the shard file of each tensor (weight_map).
Status write_shard_index(const std::string& dir,
                         const std::map<std::string, std::string>& weight_map, uint64_t total_size);

// Parses a model.safetensors.index.json text into name -> shard file (relative), checking that it
// has a weight_map of strings; `path` is for messages. Exposed for the fuzzer.
Result<std::map<std::string, std::string>> parse_shard_index(std::string_view json_text,
                                                             const std::string& path);

}  // namespace dsv4::format
