#include "tokenizer/regex.h"

#include <optional>

#include "tokenizer/regex_program.h"
#include "tokenizer/utf8.h"

namespace dsv4::tokenizer {
namespace {

// The code point at text[i] (valid UTF-8, i < size) and its length in bytes.
inline std::pair<char32_t, size_t> decode_at(std::string_view text, size_t i) {
  const auto lead = static_cast<unsigned char>(text[i]);
  if (lead < 0x80) return {lead, 1};
  const size_t n = lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
  return {decode_utf8(text, i, n), n};
}

// One search's state: the backtracking stack, shared by the lookaheads' nested runs, and the
// steps left before the search gives up.
class Matcher {
 public:
  Matcher(const RegexProgram& program, std::string_view text)
      : program_(program),
        text_(text),
        table_(unicode::PropertyTable::get()),
        steps_left_(Regex::kMaxStepsPerByte * (text.size() + 1)) {}

  // The end of the first match (in Oniguruma's order of preference) of the program from `pc`
  // anchored at `pos`; nullopt if none. Errors when out of steps.
  Result<std::optional<size_t>> run(uint32_t pc, size_t pos) {
    const size_t base = stack_.size();
    stack_.push_back({pc, pos});
    while (stack_.size() > base) {
      std::tie(pc, pos) = stack_.back();
      stack_.pop_back();
      for (bool alive = true; alive;) {
        if (steps_left_-- == 0) {
          stack_.resize(base);
          return resource_exhausted("pattern \"" + program_.pattern + "\" backtracks more than " +
                                    std::to_string(Regex::kMaxStepsPerByte) +
                                    " steps a byte on this text");
        }
        const Instruction& in = program_.code[pc];
        switch (in.op) {
          case Instruction::Op::kClass: {
            alive = false;
            if (pos < text_.size()) {
              const auto [cp, n] = decode_at(text_, pos);
              if (program_.classes[in.x].contains(cp, table_)) {
                alive = true;
                pos += n;
                ++pc;
              }
            }
            break;
          }
          case Instruction::Op::kSplit:
            stack_.push_back({in.y, pos});
            pc = in.x;
            break;
          case Instruction::Op::kJump:
            pc = in.x;
            break;
          case Instruction::Op::kLookahead: {
            DSV4_ASSIGN_OR_RETURN(std::optional<size_t> sub, run(pc + 1, pos));
            alive = sub.has_value() != in.negate;
            pc = in.x;
            break;
          }
          case Instruction::Op::kMatch:
            stack_.resize(base);
            return std::optional<size_t>(pos);
        }
      }
    }
    return std::optional<size_t>();
  }

  // Whether a match can begin at `pos` (false only where the program's first classes rule it
  // out).
  bool may_start(size_t pos) const {
    if (program_.first_classes.empty()) return true;
    if (pos >= text_.size()) return false;
    const auto [cp, n] = decode_at(text_, pos);
    for (uint32_t c : program_.first_classes) {
      if (program_.classes[c].contains(cp, table_)) return true;
    }
    return false;
  }

 private:
  const RegexProgram& program_;
  std::string_view text_;
  const unicode::PropertyTable& table_;
  size_t steps_left_;
  std::vector<std::pair<uint32_t, size_t>> stack_;  // (pc, position) to resume at
};

}  // namespace

Result<Regex> Regex::compile(const std::string& pattern, bool literal) {
  DSV4_ASSIGN_OR_RETURN(RegexProgram program, compile_regex(pattern, literal));
  Regex regex;
  regex.program_ = std::make_shared<const RegexProgram>(std::move(program));
  return regex;
}

Result<std::vector<std::pair<size_t, size_t>>> Regex::find_all(std::string_view text) const {
  if (const size_t bad = first_invalid_utf8(text); bad != text.size()) {
    return invalid_argument("regex match failed: the text is not valid UTF-8 at byte " +
                            std::to_string(bad));
  }
  Matcher matcher(*program_, text);
  std::vector<std::pair<size_t, size_t>> found;
  std::optional<size_t> last_match_end;
  for (size_t start = 0; start <= text.size();) {
    std::optional<size_t> end;
    if (matcher.may_start(start)) {
      DSV4_ASSIGN_OR_RETURN(end, matcher.run(0, start));
    }
    if (!end || (*end == start && last_match_end == start)) {
      start += start < text.size() ? utf8_length(text, start) : 1;
      continue;
    }
    found.emplace_back(start, *end);
    last_match_end = *end;
    start = *end;
  }
  return found;
}

}  // namespace dsv4::tokenizer
