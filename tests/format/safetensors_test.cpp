// The safetensors reader: valid files read back exactly, and every corruption the format allows
// is refused with a message naming the file and the key, never a crash.
#include "format/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "testing/random.h"
#include "testing/temp_dir.h"
#include "testing/tiny_checkpoint.h"

namespace dsv4::format {
namespace {

using testing::raw_safetensors;
using testing::SeededRng;
using testing::TempDir;
using testing::TinyTensor;

const std::string kPath = "mem.safetensors";

TEST(SafetensorsTest, ReadsBackWhatWasWritten) {
  SeededRng rng;
  TempDir dir;
  std::vector<TinyTensor> tensors = {{"layers.0.attn.wq_a.weight", DType::kBF16, {8, 16}, {}},
                                     {"layers.0.ffn.gate.tid2eid", DType::kI32, {7, 3}, {}},
                                     {"scale", DType::kF8E8M0, {2, 3}, {}},
                                     {"empty", DType::kF32, {0, 4}, {}},
                                     {"scalar", DType::kF64, {}, {}}};
  for (TinyTensor& t : tensors) {
    t.bytes = testing::random_nonzero_bytes(t.dtype, t.shape.numel(), rng.engine());
  }
  const std::string path = dir.file("x.safetensors");
  ASSERT_TRUE(testing::write_tiny_safetensors(path, tensors, rng.engine()).ok());

  Result<SafetensorsFile> file = SafetensorsFile::open(path);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  ASSERT_EQ(file->tensors().size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorInfo& info = file->tensors()[i];  // file order is the order written
    EXPECT_EQ(info.name, tensors[i].name);
    EXPECT_EQ(info.dtype, tensors[i].dtype);
    EXPECT_EQ(info.shape, tensors[i].shape);
    ASSERT_EQ(info.bytes, tensors[i].bytes.size());
    EXPECT_EQ(std::memcmp(info.data, tensors[i].bytes.data(), info.bytes), 0) << info.name;
    EXPECT_EQ(file->find(info.name), &info);
  }
  EXPECT_EQ(file->find("missing"), nullptr);
  EXPECT_EQ(file->tensors()[0].view().shape, (Shape{8, 16}));
}

TEST(SafetensorsTest, ReadsMetadataAndEmptyHeader) {
  const std::vector<uint8_t> with_metadata =
      raw_safetensors(R"({"__metadata__": {"format": "pt"}, "w": {"dtype": "U8", "shape": [2],
                          "data_offsets": [0, 2]}})",
                      2);
  Result<std::vector<TensorInfo>> tensors =
      parse_safetensors(with_metadata.data(), with_metadata.size(), kPath);
  ASSERT_TRUE(tensors.ok()) << tensors.status().to_string();
  ASSERT_EQ(tensors->size(), 1u);
  EXPECT_EQ((*tensors)[0].data, with_metadata.data() + with_metadata.size() - 2);

  const std::vector<uint8_t> empty = raw_safetensors("{}  ", 0);
  Result<std::vector<TensorInfo>> none = parse_safetensors(empty.data(), empty.size(), kPath);
  ASSERT_TRUE(none.ok()) << none.status().to_string();
  EXPECT_TRUE(none->empty());
}

struct BadCase {
  const char* label;
  std::vector<uint8_t> bytes;
  std::vector<std::string> expected;  // substrings of the message besides the path
};

std::string entry(const char* dtype, const char* shape, const char* offsets) {
  return std::string(R"({"dtype": ")") + dtype + R"(", "shape": )" + shape +
         R"(, "data_offsets": )" + offsets + "}";
}

std::vector<BadCase> bad_cases() {
  const std::string u8_4 = entry("U8", "[4]", "[0, 4]");
  return {
      {"too short", {1, 0, 0}, {"too short"}},
      {"header past end", raw_safetensors(100, "{}", 10), {"header length 100", "does not fit"}},
      {"header length huge", raw_safetensors(uint64_t{1} << 62, "{}", 0), {"over the cap"}},
      {"header length 1", raw_safetensors(1, "{}", 0), {"header length 1 "}},
      {"invalid JSON", raw_safetensors(R"({"w": )", 0), {"invalid JSON"}},
      {"not an object", raw_safetensors("[1, 2]", 0), {"not a JSON object"}},
      {"number overflow", raw_safetensors(R"({"w": 1e999})", 0), {"invalid JSON", "overflow"}},
      {"deep nesting", raw_safetensors(std::string(100000, '['), 0), {"nesting"}},
      {"duplicate key",
       raw_safetensors("{\"w\": " + u8_4 + ", \"w\": " + u8_4 + "}", 4),
       {"duplicate key 'w'"}},
      {"entry not an object", raw_safetensors(R"({"w": 3})", 0), {"'w'", "not an object"}},
      {"unknown dtype",
       raw_safetensors("{\"w\": " + entry("F4", "[2]", "[0, 1]") + "}", 1),
       {"'w'", "unknown dtype 'F4'"}},
      {"dtype missing",
       raw_safetensors(R"({"w": {"shape": [1], "data_offsets": [0, 1]}})", 1),
       {"'w'", "dtype"}},
      {"unexpected field",
       raw_safetensors(R"({"w": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1], "x": 1}})",
                       1),
       {"'w'", "unexpected field 'x'"}},
      {"negative shape",
       raw_safetensors("{\"w\": " + entry("U8", "[-1]", "[0, 1]") + "}", 1),
       {"'w'", "shape entry -1"}},
      {"fractional shape",
       raw_safetensors("{\"w\": " + entry("U8", "[1.5]", "[0, 1]") + "}", 1),
       {"'w'", "shape entry 1.5"}},
      {"rank 6",
       raw_safetensors("{\"w\": " + entry("U8", "[1,1,1,1,1,1]", "[0, 1]") + "}", 1),
       {"'w'", "rank 6"}},
      {"overflowing shape",
       raw_safetensors("{\"w\": " + entry("F32", "[4294967296, 4294967296]", "[0, 4]") + "}", 4),
       {"'w'", "overflows"}},
      {"bytes overflow",
       raw_safetensors("{\"w\": " + entry("F64", "[4611686018427387904]", "[0, 4]") + "}", 4),
       {"'w'", "needs"}},
      {"offsets past the data",
       raw_safetensors("{\"w\": " + entry("U8", "[8]", "[0, 8]") + "}", 4),
       {"'w'", "data_offsets [0,8]", "data region of 4 bytes"}},
      {"offsets not integers",
       raw_safetensors("{\"w\": " + entry("U8", "[1]", "[0]") + "}", 1),
       {"'w'", "data_offsets [0]"}},
      {"offsets reversed",
       raw_safetensors("{\"w\": " + entry("U8", "[0]", "[4, 0]") + "}", 4),
       {"'w'", "end before they begin"}},
      {"bytes differ from shape",
       raw_safetensors("{\"w\": " + entry("F32", "[2]", "[0, 4]") + "}", 4),
       {"'w'", "hold 4 bytes", "F32 [2] needs 2 x 4"}},
      {"overlap",
       raw_safetensors("{\"a\": " + u8_4 + ", \"b\": " + entry("U8", "[4]", "[2, 6]") + "}", 6),
       {"'b'", "overlap tensor 'a'"}},
      {"gap",
       raw_safetensors("{\"a\": " + entry("U8", "[2]", "[0, 2]") +
                           ", \"b\": " + entry("U8", "[2]", "[4, 6]") + "}",
                       6),
       {"'b'", "leave bytes [2, 4)"}},
      {"gap at start",
       raw_safetensors("{\"a\": " + entry("U8", "[2]", "[2, 4]") + "}", 4),
       {"'a'", "leave bytes [0, 2)"}},
      {"trailing bytes",
       raw_safetensors("{\"a\": " + entry("U8", "[2]", "[0, 2]") + "}", 4),
       {"bytes [2, 4)", "belong to no tensor"}},
      {"metadata not strings",
       raw_safetensors(R"({"__metadata__": {"k": 1}})", 0),
       {"__metadata__ 'k'"}},
      {"metadata not an object", raw_safetensors(R"({"__metadata__": []})", 0), {"__metadata__"}},
  };
}

TEST(SafetensorsTest, RefusesEachCorruptionNamingFileAndKey) {
  for (const BadCase& c : bad_cases()) {
    SCOPED_TRACE(c.label);
    Result<std::vector<TensorInfo>> parsed =
        parse_safetensors(c.bytes.data(), c.bytes.size(), kPath);
    ASSERT_FALSE(parsed.ok());
    const std::string& message = parsed.status().message();
    EXPECT_NE(message.find(kPath), std::string::npos) << message;
    for (const std::string& part : c.expected) {
      EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
    }
  }
}

TEST(SafetensorsTest, RefusesTruncatedFiles) {
  SeededRng rng;
  TempDir dir;
  const std::string path = dir.file("t.safetensors");
  ASSERT_TRUE(
      testing::write_tiny_safetensors(
          path, {{"a", DType::kBF16, {4, 4}, {}}, {"b", DType::kF32, {3}, {}}}, rng.engine())
          .ok());
  std::ifstream in(path, std::ios::binary);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                   std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 8u + 44u);
  for (size_t cut : {size_t{0}, size_t{4}, size_t{20}, bytes.size() - 1}) {
    SCOPED_TRACE("cut at " + std::to_string(cut));
    const std::string cut_path = dir.file("cut.safetensors");
    ASSERT_TRUE(testing::write_bytes(cut_path, {bytes.begin(), bytes.begin() + cut}).ok());
    Result<SafetensorsFile> file = SafetensorsFile::open(cut_path);
    ASSERT_FALSE(file.ok());
    EXPECT_NE(file.status().message().find(cut_path), std::string::npos);
  }
}

TEST(SafetensorsTest, MissingFileIsNotFound) {
  TempDir dir;
  Result<SafetensorsFile> file = SafetensorsFile::open(dir.file("absent.safetensors"));
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), StatusCode::kNotFound);
  EXPECT_NE(file.status().message().find("absent.safetensors"), std::string::npos);
}

// A cheap stand-in for the fuzzer (tests/fuzz) that runs with every build: random byte flips in
// a valid image give a clean answer, ok or an error, and an ok answer stays inside the buffer.
TEST(SafetensorsTest, SurvivesRandomByteFlips) {
  SeededRng rng;
  const std::vector<uint8_t> valid =
      raw_safetensors("{\"a\": " + entry("U8", "[4]", "[0, 4]") +
                          ", \"b\": " + entry("BF16", "[2, 1]", "[4, 8]") + "}",
                      8);
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<uint8_t> bytes = valid;
    const int n_flips = static_cast<int>(rng.uniform_int(1, 4));
    for (int f = 0; f < n_flips; ++f) {
      bytes[rng.uniform_int(0, bytes.size() - 1)] = static_cast<uint8_t>(rng.engine()());
    }
    Result<std::vector<TensorInfo>> parsed = parse_safetensors(bytes.data(), bytes.size(), kPath);
    if (!parsed.ok()) continue;
    for (const TensorInfo& t : *parsed) {
      ASSERT_GE(t.data, bytes.data());
      ASSERT_LE(t.data + t.bytes, bytes.data() + bytes.size());
    }
  }
}

}  // namespace
}  // namespace dsv4::format
