#include "tokenizer/byte_level.h"

#include <array>
#include <cstdint>
#include <unordered_map>

#include "tokenizer/utf8.h"

namespace dsv4::tokenizer {
namespace {

bool stands_for_itself(int byte) {
  return (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) ||
         (byte >= 0xAE && byte <= 0xFF);
}

struct Alphabet {
  std::array<std::string, 256> char_of_byte;
  std::unordered_map<uint32_t, char> byte_of_char;
  Alphabet() {
    uint32_t next = 256;
    for (int byte = 0; byte < 256; ++byte) {
      const uint32_t cp = stands_for_itself(byte) ? static_cast<uint32_t>(byte) : next++;
      append_utf8(cp, char_of_byte[byte]);
      byte_of_char[cp] = static_cast<char>(byte);
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet table;
  return table;
}

}  // namespace

std::string bytes_to_chars(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char b : bytes) out += alphabet().char_of_byte[static_cast<unsigned char>(b)];
  return out;
}

Result<std::string> chars_to_bytes(std::string_view chars) {
  std::string out;
  out.reserve(chars.size());
  for (size_t i = 0; i < chars.size();) {
    const size_t n = utf8_length(chars, i);
    const auto it = alphabet().byte_of_char.find(decode_utf8(chars, i, n));
    if (it == alphabet().byte_of_char.end()) {
      return invalid_argument("character '" + std::string(chars.substr(i, n)) +
                              "' stands for no byte of the byte-level alphabet");
    }
    out += it->second;
    i += n;
  }
  return out;
}

}  // namespace dsv4::tokenizer
