// A compiled regex: a program for a backtracking matcher (regex.cpp), made from the pattern by
// regex_compiler.cpp. Instructions run from pc 0 at a position of the text; kSplit tries its
// first branch and, when that fails, its second, which is how alternation, optional parts and
// greedy or lazy repetition keep Oniguruma's order of preference (the first match found is the
// one Oniguruma returns).
#pragma once

#include <bitset>
#include <cstdint>
#include <string>
#include <vector>

#include "dsv4/status.h"
#include "tokenizer/unicode.h"

namespace dsv4::tokenizer {

// A set of code points: listed ranges, whole General_Categories, White_Space or its complement,
// the union of these, negated or not. ASCII membership is precomputed (finish()).
struct CharClass {
  std::vector<unicode::CodePointRange> ranges;
  uint32_t categories = 0;  // bit c: GeneralCategory c is in the set
  bool white_space = false;
  bool non_white_space = false;
  bool negated = false;
  std::bitset<128> ascii;  // membership of U+0000-007F, negation applied

  void finish();
  bool contains(char32_t cp, const unicode::PropertyTable& table) const {
    if (cp < 128) return ascii[cp];
    return listed(cp, table.properties(cp)) != negated;
  }
  // Whether cp is in the union, before negation; `properties` is cp's from the table.
  bool listed(char32_t cp, uint8_t properties) const {
    if ((categories >> (properties & unicode::kCategoryMask)) & 1) return true;
    const bool ws = (properties & unicode::kWhiteSpaceBit) != 0;
    if ((white_space && ws) || (non_white_space && !ws)) return true;
    for (const unicode::CodePointRange& r : ranges) {
      if (cp >= r.first && cp <= r.last) return true;
    }
    return false;
  }
};

struct Instruction {
  enum class Op : uint8_t {
    kClass,      // consume one character in classes[arg], else fail
    kSplit,      // try pc `x`, then pc `y`
    kJump,       // continue at pc `x`
    kLookahead,  // run the sub-program at pc + 1 anchored here; on success (failure if negate)
                 // continue at `x` without consuming, else fail
    kMatch,      // the (sub-)program matched
  };
  Op op;
  bool negate = false;
  uint32_t x = 0, y = 0;
};

struct RegexProgram {
  std::string pattern;  // as written, for messages
  std::vector<Instruction> code;
  std::vector<CharClass> classes;
  // When every match begins by consuming a character of one of these classes, a search skips
  // the positions where none does; empty when a match can begin otherwise.
  std::vector<uint32_t> first_classes;
};

// `pattern` in Oniguruma's syntax as Hugging Face tokenizers compiles it (or, with `literal`, a
// plain string), or an error naming what it does not support.
Result<RegexProgram> compile_regex(const std::string& pattern, bool literal);

}  // namespace dsv4::tokenizer
