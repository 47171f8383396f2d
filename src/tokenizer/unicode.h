// The Unicode character properties the tokenizer's regexes ask about (General_Category for
// \p{L}, \p{N}, \p{P}, ... and White_Space for \s), from the tables scripts/make_unicode_tables.mjs
// generates from the Unicode Character Database (unicode_tables.cpp). The version is the one
// Hugging Face tokenizers' Oniguruma has (16.0.0), not the system's: a character assigned since
// the C library's or PCRE2's tables were made would otherwise be split differently.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace dsv4::tokenizer::unicode {

// The 30 values of General_Category; kCn (unassigned) is every code point the tables omit.
enum class GeneralCategory : uint8_t {
  kCn,
  kLu,
  kLl,
  kLt,
  kLm,
  kLo,
  kMn,
  kMc,
  kMe,
  kNd,
  kNl,
  kNo,
  kPc,
  kPd,
  kPs,
  kPe,
  kPi,
  kPf,
  kPo,
  kSm,
  kSc,
  kSk,
  kSo,
  kZs,
  kZl,
  kZp,
  kCc,
  kCf,
  kCs,
  kCo,
};
constexpr int kCategoryCount = 30;

struct CategoryRange {
  char32_t first, last;
  GeneralCategory category;
};
struct CodePointRange {
  char32_t first, last;
};

// The generated tables, sorted by code point.
extern const char kVersion[];
extern const std::span<const CategoryRange> kCategoryRanges;
extern const std::span<const CodePointRange> kWhiteSpaceRanges;

constexpr char32_t kMaxCodePoint = 0x10FFFF;

// A code point's properties in one byte: its category in the low 5 bits, kWhiteSpaceBit set for
// White_Space.
constexpr uint8_t kCategoryMask = 0x1F;
constexpr uint8_t kWhiteSpaceBit = 0x20;

// The tables unpacked into a two-stage lookup (a 256-code-point block index, then the blocks,
// each distinct block stored once: 163 blocks, about 50 KiB), built once on first use.
class PropertyTable {
 public:
  static const PropertyTable& get();
  uint8_t properties(char32_t cp) const {
    return blocks_[static_cast<size_t>(block_of_[cp >> 8]) << 8 | (cp & 0xFF)];
  }
  GeneralCategory category(char32_t cp) const {
    return static_cast<GeneralCategory>(properties(cp) & kCategoryMask);
  }
  bool white_space(char32_t cp) const { return (properties(cp) & kWhiteSpaceBit) != 0; }

 private:
  PropertyTable();
  std::vector<uint16_t> block_of_;  // [0x1100] index of each 256-code-point block
  std::vector<uint8_t> blocks_;     // [n_block * 256] properties, block after block
};

}  // namespace dsv4::tokenizer::unicode
