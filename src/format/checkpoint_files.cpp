#include "format/checkpoint_files.h"

#include <cstdio>
#include <filesystem>
#include <set>

#include "format/json.h"
#include "format/text_file.h"

namespace dsv4::format {
namespace {

namespace fs = std::filesystem;

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

std::string shard_file_name(size_t index, size_t count) {
  char name[64];
  std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", index + 1, count);
  return name;
}

Status write_shard_index(const std::string& dir,
                         const std::map<std::string, std::string>& weight_map,
                         uint64_t total_size) {
  const Json index = {{"metadata", {{"total_size", total_size}}}, {"weight_map", weight_map}};
  return write_text_file((fs::path(dir) / kShardIndexName).string(), index.dump(2) + "\n");
}

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

namespace {

// Which files make up the checkpoint at `path`, before any of them is opened.
struct Layout {
  std::string directory;
  std::vector<std::string> shard_names;  // relative to directory
  std::string index_path;                // empty when there is no index
  std::map<std::string, std::string> shard_of;
};

Result<Layout> locate_shards(const std::string& path) {
  std::error_code ec;
  Layout layout;
  if (!fs::is_directory(path, ec)) {
    layout.directory = fs::path(path).parent_path().string();
    layout.shard_names.push_back(fs::path(path).filename().string());
    return layout;
  }
  layout.directory = path;
  const std::string index_path = (fs::path(path) / kShardIndexName).string();
  if (fs::exists(index_path, ec)) {
    layout.index_path = index_path;
    DSV4_ASSIGN_OR_RETURN(std::string text, read_text(index_path));
    DSV4_ASSIGN_OR_RETURN(layout.shard_of, parse_shard_index(text, index_path));
    std::set<std::string> unique;  // sorted: model-00001-of-N first
    for (const auto& [name, shard] : layout.shard_of) unique.insert(shard);
    layout.shard_names.assign(unique.begin(), unique.end());
  } else if (fs::exists(fs::path(path) / kSingleName, ec)) {
    layout.shard_names.push_back(kSingleName);
  } else {
    return not_found(path + ": holds neither " + kShardIndexName + " nor " + kSingleName);
  }
  return layout;
}

}  // namespace

Result<CheckpointFiles> CheckpointFiles::open(const std::string& path) {
  DSV4_ASSIGN_OR_RETURN(Layout layout, locate_shards(path));
  CheckpointFiles files;
  files.directory_ = layout.directory;
  for (const std::string& shard_name : layout.shard_names) {
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
      files.tensors_.push_back(&info);
    }
  }
  if (layout.index_path.empty()) return files;
  DSV4_RETURN_IF_ERROR(files.check_index(layout.index_path, layout.shard_names, layout.shard_of));
  return files;
}

Status CheckpointFiles::check_index(const std::string& index_path,
                                    const std::vector<std::string>& shard_names,
                                    const std::map<std::string, std::string>& shard_of) const {
  for (const auto& [name, located] : by_name_) {
    const std::string& shard_path = shards_[located.second]->path();
    const auto listed = shard_of.find(name);
    if (listed == shard_of.end()) {
      return data_loss(shard_path + ": tensor '" + name + "' is not in " + index_path);
    }
    if (shard_names[located.second] != listed->second) {
      return data_loss(shard_path + ": tensor '" + name + "' is listed in " + index_path +
                       " under shard " + listed->second);
    }
  }
  for (const auto& [name, shard] : shard_of) {
    if (by_name_.count(name) == 0) {
      return data_loss(index_path + ": tensor '" + name + "' is missing from its shard " + shard);
    }
  }
  return ok_status();
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
