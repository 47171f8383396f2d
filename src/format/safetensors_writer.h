// Writes safetensors files: for `dsv4 quantize`, `verify --dump` and the tests' synthetic
// checkpoints. Tensors are written in the order they were added; refuses to overwrite an
// existing file unless asked (nothing a user wrote is lost).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/tensor.h"
#include "dsv4/status.h"

namespace dsv4::format {

class SafetensorsWriter {
 public:
  // Copies the bytes of a CPU, contiguous view.
  void add(const std::string& name, const TensorView& tensor);
  // Raw bytes with an explicit dtype and shape (e.g. packed FP4 as U8).
  void add_raw(const std::string& name, DType dtype, const Shape& shape, std::vector<uint8_t> bytes);
  void set_metadata(const std::string& key, const std::string& value);
  Status write(const std::string& path, bool overwrite = false) const;

 private:
  struct Entry {
    std::string name;
    DType dtype;
    Shape shape;
    std::vector<uint8_t> bytes;
  };
  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace dsv4::format
