#include "format/safetensors_writer.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "format/json.h"

namespace dsv4::format {
namespace {

// The header is padded with spaces so the data region starts 8-byte aligned, as the reference
// crate does; mmapped tensors are then aligned for every dtype.
constexpr size_t kDataAlignment = 8;

std::string header_text(const Json& header) {
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
  std::error_code ec;
  if (!overwrite && std::filesystem::exists(path, ec)) {
    return invalid_argument(path + ": already exists (not overwritten)");
  }
  Json header = Json::object();
  if (!metadata_.empty()) header["__metadata__"] = metadata_;
  uint64_t offset = 0;
  for (const Entry& entry : entries_) {
    Json shape = Json::array();
    for (int i = 0; i < entry.shape.rank; ++i) shape.push_back(entry.shape[i]);
    header[entry.name] = {{"dtype", std::string(dtype_name(entry.dtype))},
                          {"shape", shape},
                          {"data_offsets", {offset, offset + entry.bytes.size()}}};
    offset += entry.bytes.size();
  }
  const std::string text = header_text(header);

  // A temporary file renamed into place: a reader never sees half a file, and a failed write
  // leaves whatever was at `path` untouched.
  const std::string temp_path = path + ".tmp." + std::to_string(::getpid());
  std::FILE* out = std::fopen(temp_path.c_str(), "wb");
  if (out == nullptr)
    return invalid_argument(temp_path + ": cannot create: " + std::strerror(errno));
  uint8_t length[8];
  for (size_t i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(uint64_t{text.size()} >> (8 * i));
  Status status = write_all(out, length, sizeof length, temp_path);
  if (status.ok()) status = write_all(out, text.data(), text.size(), temp_path);
  for (const Entry& entry : entries_) {
    if (status.ok()) status = write_all(out, entry.bytes.data(), entry.bytes.size(), temp_path);
  }
  if (std::fclose(out) != 0 && status.ok()) {
    status = internal_error(temp_path + ": close failed: " + std::strerror(errno));
  }
  if (status.ok() && std::rename(temp_path.c_str(), path.c_str()) != 0) {
    status =
        internal_error(path + ": rename from " + temp_path + " failed: " + std::strerror(errno));
  }
  if (!status.ok()) std::remove(temp_path.c_str());
  return status;
}

}  // namespace dsv4::format
