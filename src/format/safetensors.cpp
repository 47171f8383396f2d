#include "format/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <tuple>
#include <utility>

#include "format/json.h"

namespace dsv4::format {
namespace {

constexpr size_t kLengthBytes = 8;  // the little-endian u64 in front of the JSON header

struct ParsedHeader {
  std::vector<TensorInfo> tensors;  // sorted by data offset
  std::map<std::string, std::string> metadata;
};

// A tensor entry's byte range, relative to the start of the data region.
struct Extent {
  uint64_t begin = 0;
  uint64_t end = 0;
  size_t tensor_idx = 0;
};

Status entry_error(const std::string& path, const std::string& key, const std::string& what) {
  return data_loss(path + ": tensor '" + key + "': " + what);
}

// A JSON integer that is >= 0 and fits `limit`; nullopt for anything else (floats, negatives).
std::optional<uint64_t> as_count(const Json& value, uint64_t limit) {
  if (!value.is_number_unsigned()) return std::nullopt;
  const uint64_t n = value.get<uint64_t>();
  if (n > limit) return std::nullopt;
  return n;
}

Result<Shape> parse_shape(const Json& json, const std::string& path, const std::string& key) {
  if (!json.is_array()) return entry_error(path, key, "shape is not an array");
  if (json.size() > kMaxDims) {
    return entry_error(path, key,
                       "shape has rank " + std::to_string(json.size()) + ", more than " +
                           std::to_string(kMaxDims));
  }
  Shape shape;
  uint64_t numel = 1;
  for (const Json& dim : json) {
    const std::optional<uint64_t> size = as_count(dim, std::numeric_limits<int64_t>::max());
    if (!size) return entry_error(path, key, "shape entry " + dim.dump() + " is not a size");
    // The element count must fit int64 (Shape::numel) whatever order the dims come in.
    if (__builtin_mul_overflow(numel, *size, &numel) ||
        numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return entry_error(path, key, "shape " + json.dump() + " overflows the element count");
    }
    shape[shape.rank++] = static_cast<int64_t>(*size);
  }
  return shape;
}

Result<TensorInfo> parse_entry(const std::string& key, const Json& entry, uint64_t data_bytes,
                               const std::string& path, Extent& extent) {
  if (!entry.is_object()) return entry_error(path, key, "entry is not an object");
  for (const auto& [field, value] : entry.items()) {
    if (field != "dtype" && field != "shape" && field != "data_offsets") {
      return entry_error(path, key, "unexpected field '" + field + "'");
    }
  }
  if (!entry.contains("dtype") || !entry["dtype"].is_string()) {
    return entry_error(path, key, "dtype missing or not a string");
  }
  const std::string dtype_text = entry["dtype"].get<std::string>();
  const std::optional<DType> dtype = parse_dtype(dtype_text);
  if (!dtype) return entry_error(path, key, "unknown dtype '" + dtype_text + "'");
  if (!entry.contains("shape")) return entry_error(path, key, "shape missing");
  DSV4_ASSIGN_OR_RETURN(Shape shape, parse_shape(entry["shape"], path, key));

  const Json* offsets = entry.contains("data_offsets") ? &entry["data_offsets"] : nullptr;
  if (offsets == nullptr || !offsets->is_array() || offsets->size() != 2 ||
      !as_count((*offsets)[0], data_bytes) || !as_count((*offsets)[1], data_bytes)) {
    return entry_error(path, key,
                       "data_offsets " + (offsets ? offsets->dump() : std::string("(missing)")) +
                           " is not [begin, end] within the data region of " +
                           std::to_string(data_bytes) + " bytes");
  }
  extent.begin = (*offsets)[0].get<uint64_t>();
  extent.end = (*offsets)[1].get<uint64_t>();
  if (extent.begin > extent.end) {
    return entry_error(path, key, "data_offsets " + offsets->dump() + " end before they begin");
  }
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(shape.numel()), dtype_size(*dtype), &bytes) ||
      bytes != extent.end - extent.begin) {
    return entry_error(
        path, key,
        "data_offsets " + offsets->dump() + " hold " + std::to_string(extent.end - extent.begin) +
            " bytes but " + std::string(dtype_name(*dtype)) + " " + shape.to_string() + " needs " +
            std::to_string(shape.numel()) + " x " + std::to_string(dtype_size(*dtype)));
  }
  return TensorInfo{key, *dtype, shape, nullptr, static_cast<size_t>(bytes)};
}

Result<std::map<std::string, std::string>> parse_metadata(const Json& json,
                                                          const std::string& path) {
  if (!json.is_object()) return data_loss(path + ": __metadata__ is not an object");
  std::map<std::string, std::string> metadata;
  for (const auto& [key, value] : json.items()) {
    if (!value.is_string()) {
      return data_loss(path + ": __metadata__ '" + key + "' is not a string");
    }
    metadata[key] = value.get<std::string>();
  }
  return metadata;
}

// "[begin, end]" or "[begin, end)". Appended piece by piece: GCC 12's -Wrestrict misfires on
// "[" + std::to_string(...).
std::string range_text(uint64_t begin, uint64_t end, const char* close) {
  std::string text = "[";
  text += std::to_string(begin);
  text += ", ";
  text += std::to_string(end);
  return text + close;
}

// The tensors must tile the data region: sorted by offset, each starts where the previous ended,
// and the last ends at the end of the file. Bytes that belong to no tensor mean the header and
// the data disagree, which is as much a corruption as an overlap.
Status check_tiling(std::vector<Extent>& extents, const std::vector<TensorInfo>& tensors,
                    uint64_t data_bytes, const std::string& path) {
  std::sort(extents.begin(), extents.end(), [](const Extent& a, const Extent& b) {
    return std::pair(a.begin, a.end) < std::pair(b.begin, b.end);
  });
  uint64_t covered = 0;
  for (size_t i = 0; i < extents.size(); ++i) {
    const Extent& e = extents[i];
    const std::string& key = tensors[e.tensor_idx].name;
    const std::string range = range_text(e.begin, e.end, "]");
    if (e.begin < covered) {
      return entry_error(path, key,
                         "data_offsets " + range + " overlap tensor '" +
                             tensors[extents[i - 1].tensor_idx].name + "'");
    }
    if (e.begin > covered) {
      return entry_error(path, key,
                         "data_offsets " + range + " leave bytes " +
                             range_text(covered, e.begin, ")") + " of the data region unused");
    }
    covered = e.end;
  }
  if (covered != data_bytes) {
    return data_loss(path + ": bytes " + range_text(covered, data_bytes, ")") +
                     " of the data region belong to no tensor");
  }
  return ok_status();
}

Result<ParsedHeader> parse_header(const uint8_t* bytes, size_t size, const std::string& path) {
  if (size < kLengthBytes) {
    return data_loss(path + ": " + std::to_string(size) +
                     " bytes, too short for the 8-byte header length");
  }
  uint64_t header_bytes = 0;
  for (size_t i = 0; i < kLengthBytes; ++i) header_bytes |= uint64_t{bytes[i]} << (8 * i);
  if (header_bytes > kMaxSafetensorsHeaderBytes) {
    return resource_exhausted(path + ": header length " + std::to_string(header_bytes) +
                              " is over the cap of " + std::to_string(kMaxSafetensorsHeaderBytes));
  }
  if (header_bytes < 2 || header_bytes > size - kLengthBytes) {
    return data_loss(path + ": header length " + std::to_string(header_bytes) +
                     " does not fit a file of " + std::to_string(size) + " bytes");
  }
  const std::string_view text(reinterpret_cast<const char*>(bytes + kLengthBytes), header_bytes);
  Result<Json> json = parse_json(text, path + ": header");
  if (!json.ok()) return data_loss(json.status().message());
  if (!json->is_object()) return data_loss(path + ": header is not a JSON object");

  const uint8_t* data = bytes + kLengthBytes + header_bytes;
  const uint64_t data_bytes = size - kLengthBytes - header_bytes;
  ParsedHeader header;
  std::vector<Extent> extents;
  for (const auto& [key, entry] : json->items()) {
    if (key == "__metadata__") {
      DSV4_ASSIGN_OR_RETURN(header.metadata, parse_metadata(entry, path));
      continue;
    }
    Extent extent;
    DSV4_ASSIGN_OR_RETURN(TensorInfo info, parse_entry(key, entry, data_bytes, path, extent));
    info.data = data + extent.begin;
    extent.tensor_idx = header.tensors.size();
    header.tensors.push_back(std::move(info));
    extents.push_back(extent);
  }
  DSV4_RETURN_IF_ERROR(check_tiling(extents, header.tensors, data_bytes, path));
  std::sort(header.tensors.begin(), header.tensors.end(),
            [](const TensorInfo& a, const TensorInfo& b) {
              return std::tie(a.data, a.bytes, a.name) < std::tie(b.data, b.bytes, b.name);
            });
  return header;
}

}  // namespace

Result<std::vector<TensorInfo>> parse_safetensors(const uint8_t* bytes, size_t size,
                                                  const std::string& path) {
  DSV4_ASSIGN_OR_RETURN(ParsedHeader header, parse_header(bytes, size, path));
  return std::move(header.tensors);
}

Result<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  SafetensorsFile file;
  DSV4_ASSIGN_OR_RETURN(file.file_, MappedFile::open(path));
  DSV4_ASSIGN_OR_RETURN(ParsedHeader header,
                        parse_header(file.file_.data(), file.file_.size(), path));
  file.tensors_ = std::move(header.tensors);
  file.metadata_ = std::move(header.metadata);
  for (size_t i = 0; i < file.tensors_.size(); ++i) file.index_[file.tensors_[i].name] = i;
  return file;
}

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace dsv4::format
