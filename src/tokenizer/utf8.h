// The few UTF-8 helpers the tokenizer needs (text arrives as UTF-8 bytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dsv4::tokenizer {

// The length in bytes of the UTF-8 character starting at text[i] (1 for a stray byte, so every
// byte string can be walked).
size_t utf8_length(std::string_view text, size_t i);
// Appends code point `cp` (< 0x110000) as UTF-8.
void append_utf8(uint32_t cp, std::string& out);
// Decodes the character at text[i] of length n (as utf8_length gives it); a stray byte reads as
// itself.
uint32_t decode_utf8(std::string_view text, size_t i, size_t n);

// `bytes` as valid UTF-8, each maximal ill-formed subpart replaced by U+FFFD (Unicode's
// recommended practice, which Rust's String::from_utf8_lossy and Python's "replace" follow).
std::string to_valid_utf8(std::string_view bytes);
// The offset of the first byte of `bytes` that is not part of a well-formed character, or
// bytes.size() when all of it is valid UTF-8.
size_t first_invalid_utf8(std::string_view bytes);

}  // namespace dsv4::tokenizer
