// SafetensorsWriter: what it writes reads back bit for bit, the data region is 8-byte aligned,
// and an existing file is never overwritten unless asked.
#include "format/safetensors_writer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "format/safetensors.h"
#include "testing/random.h"
#include "testing/temp_dir.h"
#include "testing/tiny_checkpoint.h"

namespace dsv4::format {
namespace {

using testing::SeededRng;
using testing::TempDir;

constexpr DType kAllDTypes[] = {DType::kF64,    DType::kF32,    DType::kF16, DType::kBF16,
                                DType::kF8E4M3, DType::kF8E8M0, DType::kU8,  DType::kI8,
                                DType::kI32,    DType::kI64,    DType::kBool};

struct Written {
  std::string name;
  DType dtype;
  Shape shape;
  std::vector<uint8_t> bytes;
};

TEST(SafetensorsWriterTest, RoundTripsEveryDTypeInOrder) {
  SeededRng rng;
  TempDir dir;
  SafetensorsWriter writer;
  std::vector<Written> written;
  for (DType dtype : kAllDTypes) {
    // Names against the alphabet, so order by name and order written differ.
    std::string name = std::to_string(20 - written.size());
    name += dtype_name(dtype);
    Shape shape;
    shape.rank = static_cast<int>(rng.uniform_int(0, 3));
    for (int i = 0; i < shape.rank; ++i) shape[i] = rng.uniform_int(1, 5);
    std::vector<uint8_t> bytes = testing::random_nonzero_bytes(dtype, shape.numel(), rng.engine());
    written.push_back({name, dtype, shape, bytes});
    if (written.size() % 2) {
      writer.add_raw(name, dtype, shape, bytes);
    } else {
      writer.add(name,
                 TensorView::contiguous(written.back().bytes.data(), dtype, Device::kCpu, shape));
    }
  }
  writer.set_metadata("format", "pt");
  const std::string path = dir.file("w.safetensors");
  ASSERT_TRUE(writer.write(path).ok());

  Result<SafetensorsFile> file = SafetensorsFile::open(path);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  EXPECT_EQ(file->metadata().at("format"), "pt");
  ASSERT_EQ(file->tensors().size(), written.size());
  for (size_t i = 0; i < written.size(); ++i) {
    const TensorInfo& info = file->tensors()[i];
    EXPECT_EQ(info.name, written[i].name);
    EXPECT_EQ(info.dtype, written[i].dtype);
    EXPECT_EQ(info.shape, written[i].shape);
    ASSERT_EQ(info.bytes, written[i].bytes.size());
    EXPECT_EQ(std::memcmp(info.data, written[i].bytes.data(), info.bytes), 0) << info.name;
  }
}

TEST(SafetensorsWriterTest, AlignsTheDataRegionWithSpaces) {
  TempDir dir;
  SafetensorsWriter writer;
  writer.add_raw("odd", DType::kU8, {3}, {1, 2, 3});
  const std::string path = dir.file("a.safetensors");
  ASSERT_TRUE(writer.write(path).ok());
  Result<MappedFile> file = MappedFile::open(path);
  ASSERT_TRUE(file.ok());
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, file->data(), 8);  // little-endian host
  EXPECT_EQ(header_bytes % 8, 0u);
  EXPECT_EQ(file->size(), 8 + header_bytes + 3);
  EXPECT_EQ(file->data()[8 + header_bytes - 1], ' ');
  EXPECT_EQ(file->data()[8 + header_bytes], 1);
}

TEST(SafetensorsWriterTest, RefusesToOverwriteUnlessAsked) {
  TempDir dir;
  const std::string path = dir.file("keep.safetensors");
  ASSERT_TRUE(testing::write_text(path, "precious").ok());
  SafetensorsWriter writer;
  writer.add_raw("x", DType::kI8, {2}, {1, 2});
  const Status refused = writer.write(path);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find(path), std::string::npos);
  EXPECT_EQ(std::filesystem::file_size(path), 8u);

  ASSERT_TRUE(writer.write(path, /*overwrite=*/true).ok());
  Result<SafetensorsFile> file = SafetensorsFile::open(path);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  EXPECT_NE(file->find("x"), nullptr);
  // The temporary file was renamed, not left behind.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()),
                          std::filesystem::directory_iterator()),
            1);
}

TEST(SafetensorsWriterTest, ReportsAnUnwritableDirectory) {
  TempDir dir;
  SafetensorsWriter writer;
  const Status status = writer.write(dir.file("no/such/dir/x.safetensors"));
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("no/such/dir"), std::string::npos);
}

}  // namespace
}  // namespace dsv4::format
