// CheckpointFiles: single files, directories and sharded directories open to the same flat list
// of tensors; every inconsistency between the index and the shards is refused by name.
#include "format/checkpoint_files.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "testing/random.h"
#include "testing/temp_dir.h"
#include "testing/tiny_checkpoint.h"

namespace dsv4::format {
namespace {

using format::shard_file_name;
using testing::SeededRng;
using testing::TempDir;
using testing::TinyTensor;

std::vector<std::vector<TinyTensor>> two_shards(SeededRng& rng) {
  std::vector<std::vector<TinyTensor>> shards = {
      {{"embed.weight", DType::kBF16, {16, 8}, {}},
       {"layers.0.attn.wq_a.weight", DType::kF8E4M3, {4, 8}, {}}},
      {{"layers.0.attn.wq_a.scale", DType::kF8E8M0, {1, 1}, {}},
       {"head.weight", DType::kBF16, {16, 8}, {}}}};
  for (auto& shard : shards) {
    for (TinyTensor& t : shard)
      t.bytes = testing::random_nonzero_bytes(t.dtype, t.shape.numel(), rng.engine());
  }
  return shards;
}

void expect_holds(const CheckpointFiles& files, const std::vector<std::vector<TinyTensor>>& shards,
                  const std::vector<std::string>& shard_paths) {
  size_t n = 0;
  for (size_t s = 0; s < shards.size(); ++s) {
    for (const TinyTensor& t : shards[s]) {
      const TensorInfo* info = files.find(t.name);
      ASSERT_NE(info, nullptr) << t.name;
      EXPECT_EQ(info->dtype, t.dtype);
      EXPECT_EQ(info->shape, t.shape);
      ASSERT_EQ(info->bytes, t.bytes.size());
      EXPECT_EQ(std::memcmp(info->data, t.bytes.data(), info->bytes), 0) << t.name;
      EXPECT_EQ(files.file_of(t.name), shard_paths[s]);
      ++n;
    }
  }
  EXPECT_EQ(files.tensors().size(), n);
  EXPECT_EQ(files.find("absent"), nullptr);
}

TEST(CheckpointFilesTest, OpensASingleFileAndADirectoryHoldingOne) {
  SeededRng rng;
  TempDir dir;
  const auto shards = two_shards(rng);
  const std::string path = dir.file("model.safetensors");
  ASSERT_TRUE(testing::write_tiny_safetensors(path, shards[0], rng.engine()).ok());
  for (const std::string& open_path : {path, dir.path()}) {
    Result<CheckpointFiles> files = CheckpointFiles::open(open_path);
    ASSERT_TRUE(files.ok()) << files.status().to_string();
    expect_holds(*files, {shards[0]}, {path});
    EXPECT_EQ(files->directory(), dir.path());
  }
}

TEST(CheckpointFilesTest, OpensAShardedDirectory) {
  SeededRng rng;
  TempDir dir;
  const auto shards = two_shards(rng);
  ASSERT_TRUE(testing::write_tiny_sharded(dir.path(), shards, rng.engine()).ok());
  Result<CheckpointFiles> files = CheckpointFiles::open(dir.path());
  ASSERT_TRUE(files.ok()) << files.status().to_string();
  expect_holds(*files, shards, {dir.file(shard_file_name(0, 2)), dir.file(shard_file_name(1, 2))});
  EXPECT_EQ(files->tensors()[0]->name, "embed.weight");  // shard by shard, file order
}

TEST(CheckpointFilesTest, EmptyDirectoryIsNotFound) {
  TempDir dir;
  Result<CheckpointFiles> files = CheckpointFiles::open(dir.path());
  ASSERT_FALSE(files.ok());
  EXPECT_EQ(files.status().code(), StatusCode::kNotFound);
  EXPECT_NE(files.status().message().find("model.safetensors.index.json"), std::string::npos);
}

// A sharded checkpoint whose index has been replaced by `weight_map`; returns the error message.
std::string open_with_index(const std::map<std::string, std::string>& weight_map,
                            const TempDir& dir, SeededRng& rng) {
  EXPECT_TRUE(testing::write_tiny_sharded(dir.path(), two_shards(rng), rng.engine()).ok());
  EXPECT_TRUE(testing::write_shard_index(dir.path(), weight_map).ok());
  Result<CheckpointFiles> files = CheckpointFiles::open(dir.path());
  EXPECT_FALSE(files.ok());
  return files.ok() ? "" : files.status().message();
}

std::map<std::string, std::string> true_index() {
  return {{"embed.weight", shard_file_name(0, 2)},
          {"layers.0.attn.wq_a.weight", shard_file_name(0, 2)},
          {"layers.0.attn.wq_a.scale", shard_file_name(1, 2)},
          {"head.weight", shard_file_name(1, 2)}};
}

void expect_contains(const std::string& message, const std::vector<std::string>& parts) {
  for (const std::string& part : parts) {
    EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
  }
}

TEST(CheckpointFilesTest, RefusesAnIndexEntryMissingFromItsShard) {
  SeededRng rng;
  TempDir dir;
  auto index = true_index();
  index["layers.0.attn.wkv.weight"] = shard_file_name(1, 2);
  expect_contains(open_with_index(index, dir, rng),
                  {"model.safetensors.index.json", "'layers.0.attn.wkv.weight'", "missing",
                   shard_file_name(1, 2)});
}

TEST(CheckpointFilesTest, RefusesAShardTensorTheIndexDoesNotList) {
  SeededRng rng;
  TempDir dir;
  auto index = true_index();
  index.erase("head.weight");
  expect_contains(open_with_index(index, dir, rng),
                  {shard_file_name(1, 2), "'head.weight'", "is not in"});
}

TEST(CheckpointFilesTest, RefusesATensorListedUnderAnotherShard) {
  SeededRng rng;
  TempDir dir;
  auto index = true_index();
  index["head.weight"] = shard_file_name(0, 2);
  expect_contains(open_with_index(index, dir, rng), {"'head.weight'", "listed"});
}

TEST(CheckpointFilesTest, RefusesATensorInTwoShards) {
  SeededRng rng;
  TempDir dir;
  auto shards = two_shards(rng);
  shards[1].push_back(shards[0][0]);  // embed.weight in both
  ASSERT_TRUE(testing::write_tiny_sharded(dir.path(), shards, rng.engine()).ok());
  Result<CheckpointFiles> files = CheckpointFiles::open(dir.path());
  ASSERT_FALSE(files.ok());
  expect_contains(files.status().message(),
                  {"'embed.weight'", "two shards", shard_file_name(0, 2), shard_file_name(1, 2)});
}

TEST(CheckpointFilesTest, RefusesShardPathsLeavingTheDirectory) {
  for (const std::string& shard : {std::string("../x.safetensors"), std::string("/etc/passwd"),
                                   std::string("a/../../x.safetensors"), std::string()}) {
    SCOPED_TRACE(shard);
    SeededRng rng;
    TempDir dir;
    auto index = true_index();
    index["head.weight"] = shard;
    expect_contains(open_with_index(index, dir, rng),
                    {"'head.weight'", "leaves the checkpoint directory"});
  }
}

TEST(CheckpointFilesTest, RefusesAMissingShardFile) {
  SeededRng rng;
  TempDir dir;
  auto index = true_index();
  index["head.weight"] = "model-00003-of-00002.safetensors";
  expect_contains(open_with_index(index, dir, rng), {"model-00003-of-00002.safetensors"});
}

TEST(CheckpointFilesTest, RefusesMalformedIndexes) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{", "invalid JSON"},
      {"[]", "no weight_map"},
      {R"({"weight_map": []})", "no weight_map"},
      {R"({"weight_map": {"a": 3}})", "weight_map 'a' is not a string"},
      {R"({"weight_map": {"a": "x", "a": "y"}})", "duplicate key 'a'"},
  };
  for (const auto& [text, expected] : cases) {
    SCOPED_TRACE(text);
    Result<std::map<std::string, std::string>> parsed = parse_shard_index(text, "idx.json");
    ASSERT_FALSE(parsed.ok());
    expect_contains(parsed.status().message(), {"idx.json", expected});
  }
}

}  // namespace
}  // namespace dsv4::format
