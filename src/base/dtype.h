// The element types dsv4 knows: those safetensors files hold (names as the format spells them)
// plus F64 for references. Packed FP4 is stored as U8 (ModelOpt) or I8 (official release), two
// E2M1 codes a byte, low nibble first; it is not a DType of its own but a layout of U8/I8.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace dsv4 {

enum class DType { kF64, kF32, kF16, kBF16, kF8E4M3, kF8E8M0, kU8, kI8, kI32, kI64, kBool };

size_t dtype_size(DType dtype);
// The safetensors spelling: "F32", "BF16", "F8_E4M3", ...
std::string_view dtype_name(DType dtype);
// Parses the safetensors spelling; nullopt for anything dsv4 does not accept.
std::optional<DType> parse_dtype(std::string_view name);

}  // namespace dsv4
