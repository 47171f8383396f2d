// dsv4 inspect FILE_OR_DIR [--json]: what a checkpoint holds, straight from the safetensors
// headers (no weight is read): one line per tensor (name, dtype, shape, bytes), totals per dtype
// and the shard count. Opening goes through format::CheckpointFiles, so a corrupt header or an
// index that disagrees with its shards is reported here too, with exit code 1.
#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include "commands.h"
#include "format/checkpoint_files.h"
#include "format/json.h"

namespace dsv4::tools {
namespace {

struct DTypeTotal {
  size_t n_tensors = 0;
  uint64_t bytes = 0;
};

std::map<std::string, DTypeTotal> totals_per_dtype(const format::CheckpointFiles& files) {
  std::map<std::string, DTypeTotal> totals;
  for (const format::TensorInfo* t : files.tensors()) {
    DTypeTotal& total = totals[std::string(dtype_name(t->dtype))];
    ++total.n_tensors;
    total.bytes += t->bytes;
  }
  return totals;
}

void print_text(const format::CheckpointFiles& files) {
  uint64_t total_bytes = 0;
  for (const format::TensorInfo* t : files.tensors()) {
    std::printf("%-64s %-8s %-24s %12zu\n", t->name.c_str(),
                std::string(dtype_name(t->dtype)).c_str(), t->shape.to_string().c_str(), t->bytes);
    total_bytes += t->bytes;
  }
  std::printf("\nper dtype:\n");
  for (const auto& [dtype, total] : totals_per_dtype(files)) {
    std::printf("  %-8s %8zu tensors %16llu bytes\n", dtype.c_str(), total.n_tensors,
                static_cast<unsigned long long>(total.bytes));
  }
  std::printf("shards: %zu  tensors: %zu  bytes: %llu\n", files.n_shards(), files.tensors().size(),
              static_cast<unsigned long long>(total_bytes));
}

void print_json(const format::CheckpointFiles& files) {
  format::Json tensors = format::Json::array();
  uint64_t total_bytes = 0;
  for (const format::TensorInfo* t : files.tensors()) {
    format::Json shape = format::Json::array();
    for (int i = 0; i < t->shape.rank; ++i) shape.push_back(t->shape[i]);
    tensors.push_back({{"name", t->name},
                       {"dtype", std::string(dtype_name(t->dtype))},
                       {"shape", shape},
                       {"bytes", t->bytes},
                       {"file", files.file_of(t->name)}});
    total_bytes += t->bytes;
  }
  format::Json dtypes = format::Json::object();
  for (const auto& [dtype, total] : totals_per_dtype(files)) {
    dtypes[dtype] = {{"tensors", total.n_tensors}, {"bytes", total.bytes}};
  }
  const format::Json out = {{"shards", files.n_shards()},
                            {"n_tensors", files.tensors().size()},
                            {"bytes", total_bytes},
                            {"dtypes", dtypes},
                            {"tensors", tensors}};
  std::printf("%s\n", out.dump(1, ' ', false, format::Json::error_handler_t::replace).c_str());
}

int run_inspect(const std::string& path, bool json) {
  Result<format::CheckpointFiles> files = format::CheckpointFiles::open(path);
  if (!files.ok()) {
    std::fprintf(stderr, "dsv4 inspect: %s\n", files.status().to_string().c_str());
    return 1;
  }
  json ? print_json(*files) : print_text(*files);
  return 0;
}

}  // namespace

void register_inspect(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand(
      "inspect", "List the tensors of a safetensors file or checkpoint directory (headers only)");
  auto path = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  cmd->add_option("FILE_OR_DIR", *path, "a .safetensors file or a checkpoint directory")
      ->required();
  cmd->add_flag("--json", *json, "print JSON instead of a table");
  cmd->callback([path, json, &exit_code] { exit_code = run_inspect(*path, *json); });
}

}  // namespace dsv4::tools
