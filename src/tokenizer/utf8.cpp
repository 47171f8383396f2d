#include "tokenizer/utf8.h"

#include <utility>

namespace dsv4::tokenizer {

size_t utf8_length(std::string_view text, size_t i) {
  const auto lead = static_cast<unsigned char>(text[i]);
  const size_t n = lead < 0x80           ? 1
                   : (lead >> 5) == 0x6  ? 2
                   : (lead >> 4) == 0xE  ? 3
                   : (lead >> 3) == 0x1E ? 4
                                         : 1;
  if (i + n > text.size()) return 1;
  for (size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) return 1;
  }
  return n;
}

void append_utf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

uint32_t decode_utf8(std::string_view text, size_t i, size_t n) {
  const auto byte = [&](size_t k) {
    return static_cast<uint32_t>(static_cast<unsigned char>(text[i + k]));
  };
  switch (n) {
    case 2:
      return ((byte(0) & 0x1F) << 6) | (byte(1) & 0x3F);
    case 3:
      return ((byte(0) & 0x0F) << 12) | ((byte(1) & 0x3F) << 6) | (byte(2) & 0x3F);
    case 4:
      return ((byte(0) & 0x07) << 18) | ((byte(1) & 0x3F) << 12) | ((byte(2) & 0x3F) << 6) |
             (byte(3) & 0x3F);
    default:
      return byte(0);
  }
}

namespace {

// The length of the UTF-8 sequence a byte begins (0: none begins with it) and the range its
// second byte must be in: Unicode's Table 3-7, which rules out overlong forms, surrogates and
// anything past U+10FFFF.
struct Lead {
  size_t length;
  unsigned char low, high;
};

Lead lead_of(unsigned char b) {
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b >= 0xE1 && b <= 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// The bytes of the character at bytes[i] (i < size) and whether they are well formed; an
// ill-formed run is the maximal ill-formed subpart Unicode counts as one replacement.
std::pair<size_t, bool> scan_character(std::string_view bytes, size_t i) {
  const auto lead = static_cast<unsigned char>(bytes[i]);
  if (lead < 0x80) return {1, true};
  const Lead need = lead_of(lead);
  size_t good = 1;  // bytes of the well-formed prefix, the lead included
  while (good < need.length && i + good < bytes.size()) {
    const auto b = static_cast<unsigned char>(bytes[i + good]);
    const bool fits = good == 1 ? (b >= need.low && b <= need.high) : (b >= 0x80 && b <= 0xBF);
    if (!fits) break;
    ++good;
  }
  return {good, good == need.length};
}

}  // namespace

std::string to_valid_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    const auto [n, well_formed] = scan_character(bytes, i);
    if (well_formed) {
      out.append(bytes.substr(i, n));
    } else {
      out += "\xEF\xBF\xBD";  // one U+FFFD for the maximal ill-formed subpart
    }
    i += n;
  }
  return out;
}

size_t first_invalid_utf8(std::string_view bytes) {
  for (size_t i = 0; i < bytes.size();) {
    const auto [n, well_formed] = scan_character(bytes, i);
    if (!well_formed) return i;
    i += n;
  }
  return bytes.size();
}

}  // namespace dsv4::tokenizer
