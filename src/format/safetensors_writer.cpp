#include "format/safetensors_writer.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "format/json.h"

namespace dsv4::format {
namespace {

// The header is padded with spaces so the data region starts 8-byte aligned, as the reference
// crate does; mmapped tensors are then aligned for every dtype.
constexpr size_t kDataAlignment = 8;

std::string header_text(const std::vector<TensorDeclaration>& tensors,
                        const std::map<std::string, std::string>& metadata) {
  Json header = Json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const TensorDeclaration& t : tensors) {
    DSV4_CHECK(t.name != "__metadata__", "the name __metadata__ is reserved");
    DSV4_CHECK(!header.contains(t.name), "tensor %s declared twice", t.name.c_str());
    Json shape = Json::array();
    for (int i = 0; i < t.shape.rank; ++i) shape.push_back(t.shape[i]);
    header[t.name] = {{"dtype", std::string(dtype_name(t.dtype))},
                      {"shape", shape},
                      {"data_offsets", {offset, offset + t.bytes()}}};
    offset += t.bytes();
  }
  std::string text = header.dump(-1, ' ', false, Json::error_handler_t::replace);
  const size_t padded = (text.size() + kDataAlignment - 1) / kDataAlignment * kDataAlignment;
  text.resize(padded, ' ');
  return text;
}

Status write_all(std::FILE* out, const void* data, size_t bytes, const std::string& path) {
  if (bytes > 0 && std::fwrite(data, 1, bytes, out) != bytes) {
    return internal_error(path + ": write failed: " + std::strerror(errno));
  }
  return ok_status();
}

}  // namespace

Result<SafetensorsStream> SafetensorsStream::create(
    const std::string& path, const std::vector<TensorDeclaration>& tensors,
    const std::map<std::string, std::string>& metadata, bool overwrite) {
  std::error_code ec;
  if (!overwrite && std::filesystem::exists(path, ec)) {
    return invalid_argument(path + ": already exists (not overwritten)");
  }
  const std::string text = header_text(tensors, metadata);
  size_t data_bytes = 0;
  for (const TensorDeclaration& t : tensors) data_bytes += t.bytes();
  const std::string temp_path = path + ".tmp." + std::to_string(::getpid());
  std::FILE* file = std::fopen(temp_path.c_str(), "wb");
  if (file == nullptr) {
    return invalid_argument(temp_path + ": cannot create: " + std::strerror(errno));
  }
  SafetensorsStream stream(file, path, temp_path, data_bytes);
  uint8_t length[8];
  for (size_t i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(uint64_t{text.size()} >> (8 * i));
  DSV4_RETURN_IF_ERROR(write_all(file, length, sizeof length, temp_path));
  DSV4_RETURN_IF_ERROR(write_all(file, text.data(), text.size(), temp_path));
  return stream;
}

SafetensorsStream::SafetensorsStream(std::FILE* file, std::string path, std::string temp_path,
                                     size_t data_bytes)
    : file_(file),
      path_(std::move(path)),
      temp_path_(std::move(temp_path)),
      remaining_(data_bytes) {}

SafetensorsStream::SafetensorsStream(SafetensorsStream&& other) noexcept
    : file_(std::exchange(other.file_, nullptr)),
      path_(std::move(other.path_)),
      temp_path_(std::move(other.temp_path_)),
      remaining_(other.remaining_) {}

SafetensorsStream::~SafetensorsStream() {
  if (file_ == nullptr) return;
  std::fclose(file_);
  std::remove(temp_path_.c_str());
}

Status SafetensorsStream::append(const void* data, size_t bytes) {
  DSV4_CHECK(file_ != nullptr, "%s: append after finish", path_.c_str());
  DSV4_CHECK(bytes <= remaining_, "%s: %zu bytes appended past the declared tensors", path_.c_str(),
             bytes);
  remaining_ -= bytes;
  return write_all(file_, data, bytes, temp_path_);
}

Status SafetensorsStream::finish() {
  DSV4_CHECK(file_ != nullptr, "%s: finished twice", path_.c_str());
  DSV4_CHECK(remaining_ == 0, "%s: %zu declared bytes never appended", path_.c_str(), remaining_);
  const bool closed = std::fclose(std::exchange(file_, nullptr)) == 0;
  Status status =
      closed ? ok_status() : internal_error(temp_path_ + ": close failed: " + std::strerror(errno));
  if (status.ok() && std::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    status =
        internal_error(path_ + ": rename from " + temp_path_ + " failed: " + std::strerror(errno));
  }
  if (!status.ok()) std::remove(temp_path_.c_str());
  return status;
}

void SafetensorsWriter::add(const std::string& name, const TensorView& tensor) {
  DSV4_CHECK(tensor.device == Device::kCpu && tensor.is_contiguous(),
             "%s: only contiguous CPU views can be written", name.c_str());
  const auto* bytes = static_cast<const uint8_t*>(tensor.data);
  add_raw(name, tensor.dtype, tensor.shape, std::vector<uint8_t>(bytes, bytes + tensor.bytes()));
}

void SafetensorsWriter::add_raw(const std::string& name, DType dtype, const Shape& shape,
                                std::vector<uint8_t> bytes) {
  DSV4_CHECK(bytes.size() == static_cast<size_t>(shape.numel()) * dtype_size(dtype),
             "%s: %zu bytes for %s %s", name.c_str(), bytes.size(),
             std::string(dtype_name(dtype)).c_str(), shape.to_string().c_str());
  DSV4_CHECK(name != "__metadata__", "the name __metadata__ is reserved");
  for (const Entry& entry : entries_) {
    DSV4_CHECK(entry.name != name, "tensor %s added twice", name.c_str());
  }
  entries_.push_back(Entry{name, dtype, shape, std::move(bytes)});
}

void SafetensorsWriter::set_metadata(const std::string& key, const std::string& value) {
  metadata_[key] = value;
}

Status SafetensorsWriter::write(const std::string& path, bool overwrite) const {
  std::vector<TensorDeclaration> tensors;
  for (const Entry& entry : entries_) tensors.push_back({entry.name, entry.dtype, entry.shape});
  DSV4_ASSIGN_OR_RETURN(SafetensorsStream stream,
                        SafetensorsStream::create(path, tensors, metadata_, overwrite));
  for (const Entry& entry : entries_) {
    DSV4_RETURN_IF_ERROR(stream.append(entry.bytes.data(), entry.bytes.size()));
  }
  return stream.finish();
}

}  // namespace dsv4::format
