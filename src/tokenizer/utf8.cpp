#include "tokenizer/utf8.h"

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

std::string to_valid_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  const auto at = [&](size_t k) { return static_cast<unsigned char>(bytes[k]); };
  for (size_t i = 0; i < bytes.size();) {
    const unsigned char lead = at(i);
    if (lead < 0x80) {
      out += static_cast<char>(lead);
      ++i;
      continue;
    }
    // The sequence's length and the range its second byte must be in (Unicode Table 3-7:
    // no overlong forms, no surrogates, nothing past U+10FFFF).
    size_t n = 0;
    unsigned char low = 0x80, high = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) n = 2;
    else if (lead == 0xE0) n = 3, low = 0xA0;
    else if (lead == 0xED) n = 3, high = 0x9F;
    else if (lead >= 0xE1 && lead <= 0xEF) n = 3;
    else if (lead == 0xF0) n = 4, low = 0x90;
    else if (lead == 0xF4) n = 4, high = 0x8F;
    else if (lead >= 0xF1 && lead <= 0xF3) n = 4;
    size_t good = 1;  // bytes of a well-formed prefix, the lead included
    while (n != 0 && good < n && i + good < bytes.size()) {
      const unsigned char b = at(i + good);
      const bool fits = good == 1 ? (b >= low && b <= high) : (b >= 0x80 && b <= 0xBF);
      if (!fits) break;
      ++good;
    }
    if (n != 0 && good == n) {
      out.append(bytes.substr(i, n));
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD for the maximal subpart (at least the lead byte)
    }
    i += n != 0 && good == n ? n : good;
  }
  return out;
}

}  // namespace dsv4::tokenizer
