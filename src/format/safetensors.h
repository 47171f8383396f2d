// safetensors files: an 8-byte little-endian header length, a JSON header
// {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}, then the raw bytes
// (docs.rs/safetensors). Opened through mmap; tensors are zero-copy views into the mapping.
// Everything a file can get wrong is checked at open and named with the file and the key:
// header length (capped), JSON, dtypes, shape vs byte size, offsets inside the data region,
// no overlaps, the data region fully covered.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/mapped_file.h"
#include "base/tensor.h"
#include "dsv4/status.h"

namespace dsv4::format {

// Headers larger than this are refused rather than parsed (a corrupt length must not make us
// read or allocate gigabytes). The real V4 shards' headers are well under 1 MiB.
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100ull << 20;

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  const uint8_t* data = nullptr;  // into the file's mapping
  size_t bytes = 0;

  // A CPU TensorView over the mapped bytes (read-only in practice).
  TensorView view() const {
    return TensorView::contiguous(const_cast<uint8_t*>(data), dtype, Device::kCpu, shape);
  }
};

class SafetensorsFile {
 public:
  static Result<SafetensorsFile> open(const std::string& path);

  const std::string& path() const { return file_.path(); }
  // In the order of their bytes in the file (JSON objects have no order to keep).
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  // nullptr when absent.
  const TensorInfo* find(std::string_view name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  MappedFile file_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> index_;
  std::map<std::string, std::string> metadata_;
};

// Parses a header without a file, for the fuzzer and tests: `bytes` is a whole file image.
Result<std::vector<TensorInfo>> parse_safetensors(const uint8_t* bytes, size_t size,
                                                  const std::string& path);

}  // namespace dsv4::format
