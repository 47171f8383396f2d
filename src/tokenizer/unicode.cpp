#include "tokenizer/unicode.h"

#include <map>
#include <string_view>

namespace dsv4::tokenizer::unicode {

PropertyTable::PropertyTable() : block_of_((kMaxCodePoint >> 8) + 1) {
  std::vector<uint8_t> flat(kMaxCodePoint + 1, static_cast<uint8_t>(GeneralCategory::kCn));
  for (const CategoryRange& r : kCategoryRanges) {
    for (char32_t cp = r.first; cp <= r.last; ++cp) flat[cp] = static_cast<uint8_t>(r.category);
  }
  for (const CodePointRange& r : kWhiteSpaceRanges) {
    for (char32_t cp = r.first; cp <= r.last; ++cp) flat[cp] |= kWhiteSpaceBit;
  }
  // Most blocks repeat (unassigned planes, CJK ideographs, private use): each distinct one once.
  std::map<std::string_view, uint16_t> seen;
  for (size_t block = 0; block < block_of_.size(); ++block) {
    const std::string_view bytes(reinterpret_cast<const char*>(flat.data() + (block << 8)), 256);
    auto [it, inserted] = seen.try_emplace(bytes, static_cast<uint16_t>(seen.size()));
    if (inserted) blocks_.insert(blocks_.end(), bytes.begin(), bytes.end());
    block_of_[block] = it->second;
  }
}

const PropertyTable& PropertyTable::get() {
  static const PropertyTable table;
  return table;
}

}  // namespace dsv4::tokenizer::unicode
