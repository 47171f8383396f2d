// RAII read-only mmap of a whole file. Checkpoints are read through it, never copied eagerly:
// a 160 GB checkpoint costs page cache, not heap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "dsv4/status.h"

namespace dsv4 {

class MappedFile {
 public:
  MappedFile() = default;
  static Result<MappedFile> open(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void release();
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

}  // namespace dsv4
