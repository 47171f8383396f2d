// The byte-level alphabet of GPT-2-style BPE (Hugging Face's ByteLevel pre-tokenizer and
// decoder): each of the 256 byte values stands for one printable Unicode character, so any byte
// string becomes a string of characters that a BPE vocabulary can cover completely. Printable
// Latin-1 bytes ('!'..'~', '¡'..'¬', '®'..'ÿ') stand for themselves; the other 68 take U+0100
// onwards in byte order.
#pragma once

#include <string>
#include <string_view>

#include "dsv4/status.h"

namespace dsv4::tokenizer {

// The UTF-8 spelling of the character that stands for each byte of `bytes`.
std::string bytes_to_chars(std::string_view bytes);
// The inverse; an error names the first character that stands for no byte.
Result<std::string> chars_to_bytes(std::string_view chars);

}  // namespace dsv4::tokenizer
