// Writes safetensors files: for `dsv4 quantize`, `verify --dump`, the tests' synthetic
// checkpoints and bench's synth_checkpoint. Tensors are written in the order they were added
// (declared); refuses to overwrite an existing file unless asked (nothing a user wrote is lost).
#pragma once

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "base/tensor.h"
#include "dsv4/status.h"

namespace dsv4::format {

// A tensor's entry in a file's header, known before its bytes.
struct TensorDeclaration {
  std::string name;
  DType dtype;
  Shape shape;
  size_t bytes() const { return static_cast<size_t>(shape.numel()) * dtype_size(dtype); }
};

// One file whose header is declared up front and whose tensors' bytes then follow in order, so
// a file larger than memory (a V4 checkpoint shard) is never held whole. It is written to a
// temporary file that finish() renames into place: a reader never sees half a file, and a
// stream dropped unfinished (an error on the way) removes its temporary file, leaving whatever
// was at `path` untouched.
class SafetensorsStream {
 public:
  static Result<SafetensorsStream> create(const std::string& path,
                                          const std::vector<TensorDeclaration>& tensors,
                                          const std::map<std::string, std::string>& metadata,
                                          bool overwrite = false);
  // The next `bytes` of the data region: the declared tensors' bytes back to back.
  Status append(const void* data, size_t bytes);
  // Closes the file, once every declared byte is written, and renames it into place.
  Status finish();

  SafetensorsStream(SafetensorsStream&& other) noexcept;
  SafetensorsStream& operator=(SafetensorsStream&&) = delete;
  ~SafetensorsStream();  // unfinished: closes and removes the temporary file

 private:
  SafetensorsStream(std::FILE* file, std::string path, std::string temp_path, size_t data_bytes);

  std::FILE* file_ = nullptr;  // null once finished (or moved from)
  std::string path_, temp_path_;
  size_t remaining_ = 0;  // data bytes declared and not yet appended
};

class SafetensorsWriter {
 public:
  // Copies the bytes of a CPU, contiguous view.
  void add(const std::string& name, const TensorView& tensor);
  // Raw bytes with an explicit dtype and shape (e.g. packed FP4 as U8).
  void add_raw(const std::string& name, DType dtype, const Shape& shape,
               std::vector<uint8_t> bytes);
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
