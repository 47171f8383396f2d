#include "format/checkpoint_files.h"

#include <filesystem>
#include <set>

#include "format/json.h"

namespace dsv4::format {
namespace {

namespace fs = std::filesystem;

constexpr const char* kIndexName = "model.safetensors.index.json";
constexpr const char* kSingleName = "model.safetensors";

// Shard names come from a file we did not write: they must name a file inside the checkpoint
// directory, never "../elsewhere" or "/etc/passwd".
Status check_shard_path(const std::string& shard, const std::string& index_path,
                        const std::string& name) {
  const fs::path p(shard);
  bool escapes = shard.empty() || p.is_absolute() || p.has_root_name();
  for (const fs::path& part : p) escapes = escapes || part == "..";
  if (escapes) {
    return invalid_argument(index_path + ": weight_map '" + name + "': shard path '" + shard +
                            "' leaves the checkpoint directory");
  }
  return ok_status();
}

Result<std::string> read_text(const std::string& path) {
  DSV4_ASSIGN_OR_RETURN(MappedFile file, MappedFile::open(path));
  return std::string(reinterpret_cast<const char*>(file.data()), file.size());
}

}  // namespace

Result<std::map<std::string, std::string>> parse_shard_index(std::string_view json_text,
                                                             const std::string& path) {
  Result<Json> json = parse_json(json_text, path);
  if (!json.ok()) return data_loss(json.status().message());
  if (!json->is_object() || !json->contains("weight_map") || !(*json)["weight_map"].is_object()) {
    return data_loss(path + ": no weight_map object");
  }
  std::map<std::string, std::string> shard_of;
  for (const auto& [name, shard] : (*json)["weight_map"].items()) {
    if (!shard.is_string()) return data_loss(path + ": weight_map '" + name + "' is not a string");
    DSV4_RETURN_IF_ERROR(check_shard_path(shard.get<std::string>(), path, name));
    shard_of[name] = shard.get<std::string>();
  }
  return shard_of;
}

Result<CheckpointFiles> CheckpointFiles::open(const std::string& path) {
  std::error_code ec;
  CheckpointFiles files;
  std::vector<std::string> shard_names;  // relative to directory_
  std::map<std::string, std::string> shard_of;
  const std::string index_path = (fs::path(path) / kIndexName).string();
  bool indexed = false;
  if (fs::is_directory(path, ec)) {
    files.directory_ = path;
    indexed = fs::exists(index_path, ec);
    if (indexed) {
      DSV4_ASSIGN_OR_RETURN(std::string text, read_text(index_path));
      DSV4_ASSIGN_OR_RETURN(shard_of, parse_shard_index(text, index_path));
      std::set<std::string> unique;
      for (const auto& [name, shard] : shard_of) unique.insert(shard);
      shard_names.assign(unique.begin(), unique.end());
    } else if (fs::exists(fs::path(path) / kSingleName, ec)) {
      shard_names.push_back(kSingleName);
    } else {
      return not_found(path + ": holds neither " + kIndexName + " nor " + kSingleName);
    }
  } else {
    files.directory_ = fs::path(path).parent_path().string();
    shard_names.push_back(fs::path(path).filename().string());
  }

  for (const std::string& shard_name : shard_names) {
    const std::string shard_path = (fs::path(files.directory_) / shard_name).string();
    DSV4_ASSIGN_OR_RETURN(SafetensorsFile shard, SafetensorsFile::open(shard_path));
    const size_t shard_idx = files.shards_.size();
    files.shards_.push_back(std::make_unique<SafetensorsFile>(std::move(shard)));
    for (const TensorInfo& info : files.shards_.back()->tensors()) {
      const auto [it, inserted] = files.by_name_.try_emplace(info.name, &info, shard_idx);
      if (!inserted) {
        return data_loss("tensor '" + info.name + "' is in two shards: " +
                         files.shards_[it->second.second]->path() + " and " + shard_path);
      }
      if (indexed) {
        const auto listed = shard_of.find(info.name);
        if (listed == shard_of.end()) {
          return data_loss(shard_path + ": tensor '" + info.name + "' is not in " + index_path);
        }
        if (listed->second != shard_name) {
          return data_loss(shard_path + ": tensor '" + info.name + "' is listed in " +
                           index_path + " under shard " + listed->second);
        }
      }
      files.tensors_.push_back(&info);
    }
  }
  for (const auto& [name, shard] : shard_of) {
    if (files.by_name_.count(name) == 0) {
      return data_loss(index_path + ": tensor '" + name + "' is missing from its shard " + shard);
    }
  }
  return files;
}

const TensorInfo* CheckpointFiles::find(std::string_view name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second.first;
}

const std::string& CheckpointFiles::file_of(std::string_view name) const {
  const auto it = by_name_.find(name);
  DSV4_CHECK(it != by_name_.end(), "file_of(%.*s): no such tensor", static_cast<int>(name.size()),
             name.data());
  return shards_[it->second.second]->path();
}

}  // namespace dsv4::format
