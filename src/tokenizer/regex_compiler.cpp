// The pattern dialect: Oniguruma's (Ruby syntax, UTF-8), as far as tokenizer.json's Split
// patterns use it: literals, `.`, classes with ranges and negation, \p{..} / \P{..} / \p{^..} of
// General_Category (one- and two-letter names and their long names, Any), \s \S (White_Space),
// \d \D (Nd), the escapes of single characters, groups (capturing, (?:..), (?<name>..)),
// lookahead (?=..) (?!..), alternation, * + ? {n} {n,} {,m} {n,m} greedy or lazy, and (?i:..)
// over ASCII text. What Oniguruma reads otherwise or this matcher lacks (\w, \b, \h, anchors,
// lookbehind, atomic groups, possessive quantifiers, scripts, case folds beyond ASCII) is refused
// by name rather than read differently.
#include <optional>
#include <set>
#include <tuple>

#include "tokenizer/regex_program.h"
#include "tokenizer/utf8.h"

namespace dsv4::tokenizer {
namespace {

using unicode::CodePointRange;
using unicode::GeneralCategory;

constexpr int kUnbounded = -1;
// Counted repetition copies its body; past this size a pattern is refused.
constexpr size_t kMaxInstructions = 1 << 16;

constexpr uint32_t bits(GeneralCategory first, GeneralCategory last) {
  uint32_t mask = 0;
  for (int c = static_cast<int>(first); c <= static_cast<int>(last); ++c) mask |= 1u << c;
  return mask;
}
constexpr uint32_t kAllCategories = (1u << unicode::kCategoryCount) - 1;

struct CategoryName {
  const char* short_name;
  const char* long_name;  // normalized: lower case, no '_', '-' or ' '
  uint32_t mask;
};

// General_Category's values and groups, as Oniguruma names them (C includes Cn, unassigned).
constexpr CategoryName kCategoryNames[] = {
    {"l", "letter", bits(GeneralCategory::kLu, GeneralCategory::kLo)},
    {"lc", "casedletter", bits(GeneralCategory::kLu, GeneralCategory::kLt)},
    {"lu", "uppercaseletter", bits(GeneralCategory::kLu, GeneralCategory::kLu)},
    {"ll", "lowercaseletter", bits(GeneralCategory::kLl, GeneralCategory::kLl)},
    {"lt", "titlecaseletter", bits(GeneralCategory::kLt, GeneralCategory::kLt)},
    {"lm", "modifierletter", bits(GeneralCategory::kLm, GeneralCategory::kLm)},
    {"lo", "otherletter", bits(GeneralCategory::kLo, GeneralCategory::kLo)},
    {"m", "mark", bits(GeneralCategory::kMn, GeneralCategory::kMe)},
    {"mn", "nonspacingmark", bits(GeneralCategory::kMn, GeneralCategory::kMn)},
    {"mc", "spacingmark", bits(GeneralCategory::kMc, GeneralCategory::kMc)},
    {"me", "enclosingmark", bits(GeneralCategory::kMe, GeneralCategory::kMe)},
    {"n", "number", bits(GeneralCategory::kNd, GeneralCategory::kNo)},
    {"nd", "decimalnumber", bits(GeneralCategory::kNd, GeneralCategory::kNd)},
    {"nl", "letternumber", bits(GeneralCategory::kNl, GeneralCategory::kNl)},
    {"no", "othernumber", bits(GeneralCategory::kNo, GeneralCategory::kNo)},
    {"p", "punctuation", bits(GeneralCategory::kPc, GeneralCategory::kPo)},
    {"pc", "connectorpunctuation", bits(GeneralCategory::kPc, GeneralCategory::kPc)},
    {"pd", "dashpunctuation", bits(GeneralCategory::kPd, GeneralCategory::kPd)},
    {"ps", "openpunctuation", bits(GeneralCategory::kPs, GeneralCategory::kPs)},
    {"pe", "closepunctuation", bits(GeneralCategory::kPe, GeneralCategory::kPe)},
    {"pi", "initialpunctuation", bits(GeneralCategory::kPi, GeneralCategory::kPi)},
    {"pf", "finalpunctuation", bits(GeneralCategory::kPf, GeneralCategory::kPf)},
    {"po", "otherpunctuation", bits(GeneralCategory::kPo, GeneralCategory::kPo)},
    {"s", "symbol", bits(GeneralCategory::kSm, GeneralCategory::kSo)},
    {"sm", "mathsymbol", bits(GeneralCategory::kSm, GeneralCategory::kSm)},
    {"sc", "currencysymbol", bits(GeneralCategory::kSc, GeneralCategory::kSc)},
    {"sk", "modifiersymbol", bits(GeneralCategory::kSk, GeneralCategory::kSk)},
    {"so", "othersymbol", bits(GeneralCategory::kSo, GeneralCategory::kSo)},
    {"z", "separator", bits(GeneralCategory::kZs, GeneralCategory::kZp)},
    {"zs", "spaceseparator", bits(GeneralCategory::kZs, GeneralCategory::kZs)},
    {"zl", "lineseparator", bits(GeneralCategory::kZl, GeneralCategory::kZl)},
    {"zp", "paragraphseparator", bits(GeneralCategory::kZp, GeneralCategory::kZp)},
    {"c", "other",
     bits(GeneralCategory::kCn, GeneralCategory::kCn) |
         bits(GeneralCategory::kCc, GeneralCategory::kCo)},
    {"cc", "control", bits(GeneralCategory::kCc, GeneralCategory::kCc)},
    {"cf", "format", bits(GeneralCategory::kCf, GeneralCategory::kCf)},
    {"cn", "unassigned", bits(GeneralCategory::kCn, GeneralCategory::kCn)},
    {"cs", "surrogate", bits(GeneralCategory::kCs, GeneralCategory::kCs)},
    {"co", "privateuse", bits(GeneralCategory::kCo, GeneralCategory::kCo)},
    {"any", "any", kAllCategories},
};

std::optional<uint32_t> category_mask(const std::string& name) {
  std::string key;
  for (char c : name) {
    if (c == '_' || c == '-' || c == ' ') continue;
    key += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  }
  for (const CategoryName& n : kCategoryNames) {
    if (key == n.short_name || key == n.long_name) return n.mask;
  }
  return std::nullopt;
}

// \t \n \r \f \v \a \e: one control character each.
constexpr std::pair<char, char32_t> kControlEscapes[] = {
    {'t', U'\t'}, {'n', U'\n'}, {'r', U'\r'}, {'f', U'\f'}, {'v', U'\v'}, {'a', 0x07}, {'e', 0x1B}};

struct Node {
  enum class Kind { kEmpty, kClass, kConcat, kAlternate, kRepeat, kLookahead };
  explicit Node(Kind k) : kind(k) {}
  Kind kind;
  uint32_t class_idx = 0;
  int min = 0, max = 0;  // kRepeat; max kUnbounded for no limit
  bool greedy = true;
  bool negate = false;  // kLookahead
  std::vector<Node> children;
};

bool nullable(const Node& node) {
  switch (node.kind) {
    case Node::Kind::kClass:
      return false;
    case Node::Kind::kConcat:
      for (const Node& c : node.children) {
        if (!nullable(c)) return false;
      }
      return true;
    case Node::Kind::kAlternate:
      for (const Node& c : node.children) {
        if (nullable(c)) return true;
      }
      return false;
    case Node::Kind::kRepeat:
      return node.min == 0 || nullable(node.children[0]);
    default:
      return true;
  }
}

// A class item an escape stands for (\s, \D, \p{L}, ...), as the union fields of a CharClass.
struct SetItem {
  uint32_t categories = 0;
  bool white_space = false, non_white_space = false;
};

// One escape: a single code point, or a set.
struct Escape {
  std::optional<char32_t> code_point;
  SetItem set;
};

class Parser {
 public:
  Parser(const std::string& pattern, RegexProgram& program)
      : pattern_(pattern), program_(program) {}

  Result<Node> parse() {
    if (const size_t bad = first_invalid_utf8(pattern_); bad != pattern_.size()) {
      return fail(bad, "the pattern is not valid UTF-8");
    }
    DSV4_ASSIGN_OR_RETURN(Node node, alternation());
    if (at_ < pattern_.size()) return fail(at_, "unmatched )");
    return node;
  }

  Node literal_string() {
    Node node{Node::Kind::kConcat};
    while (at_ < pattern_.size()) node.children.push_back(class_node(literal_class(next())));
    return node;
  }

 private:
  Status fail(size_t offset, const std::string& what) const {
    return invalid_argument("pattern \"" + pattern_ + "\" does not compile at offset " +
                            std::to_string(offset) + ": " + what);
  }
  Status refuse(const std::string& what) const {
    return unimplemented("pattern \"" + pattern_ + "\": " + what +
                         " is not supported (Oniguruma's reading of it is not implemented)");
  }

  bool more() const { return at_ < pattern_.size(); }
  char peek() const { return more() ? pattern_[at_] : '\0'; }
  bool take(char c) {
    if (peek() != c || !more()) return false;
    ++at_;
    return true;
  }
  char32_t next() {
    const size_t n = utf8_length(pattern_, at_);
    const char32_t cp = decode_utf8(pattern_, at_, n);
    at_ += n;
    return cp;
  }

  Node class_node(CharClass cls) {
    cls.finish();
    program_.classes.push_back(std::move(cls));
    Node node{Node::Kind::kClass};
    node.class_idx = static_cast<uint32_t>(program_.classes.size() - 1);
    return node;
  }

  // Adds code points [first, last] to `cls`, with their ASCII case variants under (?i) (and
  // the two non-ASCII characters whose simple case fold is ASCII: U+017F ſ -> s, U+212A K -> k).
  Status add_range(CharClass& cls, char32_t first, char32_t last) {
    cls.ranges.push_back({first, last});
    if (!ignore_case_) return ok_status();
    if (last >= 0x80) return refuse("(?i) on characters beyond ASCII");
    for (char32_t c = first; c <= last; ++c) {
      const char32_t lower = c | 0x20;
      if (lower < 'a' || lower > 'z') continue;
      cls.ranges.push_back({lower, lower});
      cls.ranges.push_back({lower - 0x20, lower - 0x20});
      if (lower == 's') cls.ranges.push_back({0x17F, 0x17F});
      if (lower == 'k') cls.ranges.push_back({0x212A, 0x212A});
    }
    return ok_status();
  }

  CharClass literal_class(char32_t cp) {
    CharClass cls;
    cls.ranges.push_back({cp, cp});
    return cls;
  }

  Result<Node> alternation() {
    Node alt{Node::Kind::kAlternate};
    for (;;) {
      DSV4_ASSIGN_OR_RETURN(Node branch, concatenation());
      alt.children.push_back(std::move(branch));
      if (!take('|')) break;
    }
    if (alt.children.size() == 1) return std::move(alt.children[0]);
    return alt;
  }

  Result<Node> concatenation() {
    Node seq{Node::Kind::kConcat};
    char32_t previous_letter = 0;  // the last atom, when it was one ASCII letter under (?i)
    while (more() && peek() != '|' && peek() != ')') {
      const size_t start = at_;
      DSV4_ASSIGN_OR_RETURN(Node atom, this->atom());
      const bool one_char = at_ == start + 1 && atom.kind == Node::Kind::kClass;
      DSV4_ASSIGN_OR_RETURN(bool repeated, quantifiers(atom));
      // Oniguruma folds "ss", "st", "ff", "fi", "fl" to single characters (ß, ﬆ, ﬀ, ...)
      // under (?i); this matcher does not.
      const char32_t letter = one_char && !repeated ? (pattern_[start] | 0x20) : 0;
      if (ignore_case_ && previous_letter != 0 && letter != 0) {
        const char pair[] = {static_cast<char>(previous_letter), static_cast<char>(letter), 0};
        for (const char* fold : {"ss", "st", "ff", "fi", "fl"}) {
          if (std::string_view(pair) == fold) {
            return refuse(std::string("\"") + pair + "\" under (?i) (a multi-character fold)");
          }
        }
      }
      previous_letter = letter >= 'a' && letter <= 'z' ? letter : 0;
      seq.children.push_back(std::move(atom));
    }
    if (seq.children.size() == 1) return std::move(seq.children[0]);
    if (seq.children.empty()) return Node{Node::Kind::kEmpty};
    return seq;
  }

  // An interval {n}, {n,}, {,m} or {n,m} at at_ (past the '{'), or nullopt (then '{' is a
  // literal, as Oniguruma reads it).
  std::optional<std::pair<int, int>> interval() {
    size_t i = at_;
    auto number = [&](int& out) {
      const size_t begin = i;
      long value = 0;
      while (i < pattern_.size() && pattern_[i] >= '0' && pattern_[i] <= '9') {
        value = value * 10 + (pattern_[i++] - '0');
        if (value > 100000) return false;
      }
      out = static_cast<int>(value);
      return i > begin;
    };
    int low = 0, high = 0;
    const bool has_low = number(low);
    if (i < pattern_.size() && pattern_[i] == '}') {
      if (!has_low) return std::nullopt;
      at_ = i + 1;
      return std::make_pair(low, low);
    }
    if (i >= pattern_.size() || pattern_[i] != ',') return std::nullopt;
    ++i;
    const bool has_high = number(high);
    if (i >= pattern_.size() || pattern_[i] != '}' || (!has_low && !has_high)) return std::nullopt;
    at_ = i + 1;
    return std::make_pair(has_low ? low : 0, has_high ? high : kUnbounded);
  }

  Result<bool> quantifiers(Node& atom) {
    bool repeated = false;
    for (;;) {
      const size_t start = at_;
      int min = 0, max = 0;
      if (take('*')) {
        max = kUnbounded;
      } else if (take('+')) {
        min = 1;
        max = kUnbounded;
      } else if (take('?')) {
        max = 1;
      } else if (take('{')) {
        const std::optional<std::pair<int, int>> range = interval();
        if (!range) {
          at_ = start;
          return repeated;
        }
        std::tie(min, max) = *range;
        if (max != kUnbounded && max < min) return fail(start, "{n,m} with m < n");
      } else {
        return repeated;
      }
      if (repeated) return refuse("a quantifier on a quantifier (possessive or nested)");
      bool greedy = true;
      if (take('?')) greedy = false;
      if (peek() == '+') return refuse("a possessive quantifier");
      if (max == kUnbounded && nullable(atom)) {
        return refuse("an unbounded repetition of something that can match empty");
      }
      Node repeat{Node::Kind::kRepeat};
      repeat.min = min;
      repeat.max = max;
      repeat.greedy = greedy;
      repeat.children.push_back(std::move(atom));
      atom = std::move(repeat);
      repeated = true;
    }
  }

  Result<Node> group() {
    const size_t start = at_ - 1;
    const bool saved_ignore_case = ignore_case_;
    Node lookahead{Node::Kind::kLookahead};
    bool is_lookahead = false;
    if (take('?')) {
      if (take(':')) {
      } else if (take('=') || take('!')) {
        is_lookahead = true;
        lookahead.negate = pattern_[at_ - 1] == '!';
      } else if (take('<')) {
        if (peek() == '=' || peek() == '!') return refuse("lookbehind (?<= or (?<!");
        while (more() && peek() != '>') ++at_;  // a named group, matched as any group
        if (!take('>')) return fail(start, "unterminated group name");
      } else if (peek() == 'i' || peek() == '-') {
        const bool on = !take('-');
        if (!take('i')) return refuse("group options other than i");
        if (!take(':')) return refuse("(?i) or (?-i) without ':' (options to the group's end)");
        ignore_case_ = on;
      } else {
        return refuse(std::string("the group (?") + peek());
      }
    }
    DSV4_ASSIGN_OR_RETURN(Node inner, alternation());
    ignore_case_ = saved_ignore_case;
    if (!take(')')) return fail(start, "missing )");
    if (!is_lookahead) return inner;
    lookahead.children.push_back(std::move(inner));
    return lookahead;
  }

  Result<uint32_t> property(bool negated) {
    const size_t start = at_ - 2;
    if (!take('{')) return fail(start, "\\p needs {name}");
    if (take('^')) negated = !negated;
    const size_t name_start = at_;
    while (more() && peek() != '}') ++at_;
    if (!more()) return fail(start, "unterminated \\p{");
    const std::string name = pattern_.substr(name_start, at_ - name_start);
    ++at_;
    const std::optional<uint32_t> mask = category_mask(name);
    if (!mask) return refuse("\\p{" + name + "} (only General_Category values and Any)");
    return negated ? kAllCategories & ~*mask : *mask;
  }

  Result<uint32_t> hex(size_t digits_min, size_t digits_max, char close) {
    const size_t start = at_;
    uint32_t value = 0;
    size_t n = 0;
    while (n < digits_max && more()) {
      const char c = peek();
      const int d = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
      if (d < 0) break;
      value = value * 16 + static_cast<uint32_t>(d);
      ++at_;
      ++n;
    }
    if (n < digits_min || (close != '\0' && !take(close)) || value > unicode::kMaxCodePoint) {
      return fail(start, "bad hexadecimal escape");
    }
    return value;
  }

  // The escape after a '\' at at_.
  Result<Escape> escape() {
    const size_t start = at_ - 1;
    if (!more()) return fail(start, "a trailing \\");
    const char e = peek();
    Escape out;
    if (static_cast<unsigned char>(e) >= 0x80) {
      out.code_point = next();
      return out;
    }
    ++at_;
    for (const auto& [letter, cp] : kControlEscapes) {
      if (e == letter) {
        out.code_point = cp;
        return out;
      }
    }
    switch (e) {
      case 'x': {
        Result<uint32_t> cp = take('{') ? hex(1, 8, '}') : hex(1, 2, '\0');
        if (!cp.ok()) return cp.status();
        out.code_point = *cp;
        break;
      }
      case 'u': {
        DSV4_ASSIGN_OR_RETURN(uint32_t cp, hex(4, 4, '\0'));
        out.code_point = cp;
        break;
      }
      case 's':
        out.set.white_space = true;
        break;
      case 'S':
        out.set.non_white_space = true;
        break;
      case 'd':
        out.set.categories = bits(GeneralCategory::kNd, GeneralCategory::kNd);
        break;
      case 'D':
        out.set.categories = kAllCategories & ~bits(GeneralCategory::kNd, GeneralCategory::kNd);
        break;
      case 'p':
      case 'P': {
        DSV4_ASSIGN_OR_RETURN(out.set.categories, property(e == 'P'));
        break;
      }
      default:
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9')) {
          return refuse(std::string("\\") + e);
        }
        out.code_point = static_cast<char32_t>(e);
    }
    if (!out.code_point && ignore_case_) return refuse(std::string("\\") + e + " under (?i)");
    return out;
  }

  static void add_set(CharClass& cls, const SetItem& set) {
    cls.categories |= set.categories;
    cls.white_space |= set.white_space;
    cls.non_white_space |= set.non_white_space;
  }

  // A class member that is one code point (a literal or an escape of one), or nullopt for a set.
  Result<std::optional<char32_t>> class_member(CharClass& cls) {
    if (take('\\')) {
      DSV4_ASSIGN_OR_RETURN(Escape e, escape());
      if (!e.code_point) add_set(cls, e.set);
      return e.code_point;
    }
    if (peek() == '[') return refuse("a nested class or POSIX bracket inside [...]");
    if (peek() == '&' && at_ + 1 < pattern_.size() && pattern_[at_ + 1] == '&') {
      return refuse("class intersection &&");
    }
    return std::optional<char32_t>(next());
  }

  Result<Node> bracket() {
    const size_t start = at_ - 1;
    CharClass cls;
    cls.negated = take('^');
    bool first = true;
    for (;;) {
      if (!more()) return fail(start, "missing ]");
      if (peek() == ']' && !first) break;
      first = false;
      if (peek() == ']') {  // a ']' first in the class is a member
        ++at_;
        DSV4_RETURN_IF_ERROR(add_range(cls, U']', U']'));
        continue;
      }
      DSV4_ASSIGN_OR_RETURN(std::optional<char32_t> low, class_member(cls));
      if (!low) continue;
      if (peek() == '-' && at_ + 1 < pattern_.size() && pattern_[at_ + 1] != ']') {
        const size_t dash = at_++;
        DSV4_ASSIGN_OR_RETURN(std::optional<char32_t> high, class_member(cls));
        if (!high) return refuse("a range ending in a set such as \\s or \\p{..}");
        if (*high < *low) return fail(dash, "range out of order");
        DSV4_RETURN_IF_ERROR(add_range(cls, *low, *high));
        continue;
      }
      DSV4_RETURN_IF_ERROR(add_range(cls, *low, *low));
    }
    ++at_;
    return class_node(std::move(cls));
  }

  Result<Node> atom() {
    const size_t start = at_;
    const char c = peek();
    if (c == '(') {
      ++at_;
      return group();
    }
    if (c == '[') {
      ++at_;
      return bracket();
    }
    if (c == '*' || c == '+' || c == '?') return fail(start, "nothing to repeat");
    if (c == '^' || c == '$') return refuse(std::string("the anchor ") + c);
    CharClass cls;
    if (take('.')) {
      cls.negated = true;
      cls.ranges.push_back({U'\n', U'\n'});
    } else if (take('\\')) {
      DSV4_ASSIGN_OR_RETURN(Escape e, escape());
      if (e.code_point) {
        DSV4_RETURN_IF_ERROR(add_range(cls, *e.code_point, *e.code_point));
      } else {
        add_set(cls, e.set);
      }
    } else {
      const char32_t cp = next();
      DSV4_RETURN_IF_ERROR(add_range(cls, cp, cp));
    }
    return class_node(std::move(cls));
  }

  const std::string& pattern_;
  RegexProgram& program_;
  size_t at_ = 0;
  bool ignore_case_ = false;
};

class Emitter {
 public:
  explicit Emitter(RegexProgram& program) : code_(program.code) {}

  Status emit(const Node& node) {
    if (code_.size() > kMaxInstructions) {
      return resource_exhausted("the pattern compiles to more than " +
                                std::to_string(kMaxInstructions) + " instructions");
    }
    switch (node.kind) {
      case Node::Kind::kEmpty:
        return ok_status();
      case Node::Kind::kClass:
        code_.push_back({Instruction::Op::kClass, false, node.class_idx});
        return ok_status();
      case Node::Kind::kConcat:
        for (const Node& c : node.children) DSV4_RETURN_IF_ERROR(emit(c));
        return ok_status();
      case Node::Kind::kAlternate: {
        std::vector<size_t> to_end;
        for (size_t i = 0; i < node.children.size(); ++i) {
          const bool last = i + 1 == node.children.size();
          const size_t split = code_.size();
          if (!last) code_.push_back({Instruction::Op::kSplit, false, pc() + 1});
          DSV4_RETURN_IF_ERROR(emit(node.children[i]));
          if (!last) {
            to_end.push_back(code_.size());
            code_.push_back({Instruction::Op::kJump});
            code_[split].y = pc();
          }
        }
        for (size_t j : to_end) code_[j].x = pc();
        return ok_status();
      }
      case Node::Kind::kRepeat:
        return emit_repeat(node);
      case Node::Kind::kLookahead: {
        const size_t look = code_.size();
        code_.push_back({Instruction::Op::kLookahead, node.negate});
        DSV4_RETURN_IF_ERROR(emit(node.children[0]));
        code_.push_back({Instruction::Op::kMatch});
        code_[look].x = pc();
        return ok_status();
      }
    }
    return internal_error("unknown regex node");
  }

 private:
  uint32_t pc() const { return static_cast<uint32_t>(code_.size()); }

  // A split that prefers the body at pc + 1 when greedy, the way past it when lazy; the way
  // past is patched in by `end`.
  size_t split() {
    code_.push_back({Instruction::Op::kSplit});
    return code_.size() - 1;
  }
  void end(size_t split, bool greedy, uint32_t body, uint32_t past) {
    code_[split].x = greedy ? body : past;
    code_[split].y = greedy ? past : body;
  }

  // A body that emits nothing (an empty group, a{0}) matches the empty string however often it
  // is repeated, so one copy stands for all, and an optional one is no choice: nested counts of
  // it would otherwise take the product of the counts in calls (10^10 for
  // (?:(?:){100000}){100000}) without one instruction.
  Status emit_repeat(const Node& node) {
    const Node& body = node.children[0];
    for (int i = 0; i < node.min; ++i) {
      const size_t before = code_.size();
      DSV4_RETURN_IF_ERROR(emit(body));
      if (code_.size() == before) break;
    }
    if (node.max == kUnbounded) {
      const size_t loop = split();
      DSV4_RETURN_IF_ERROR(emit(body));
      code_.push_back({Instruction::Op::kJump, false, static_cast<uint32_t>(loop)});
      end(loop, node.greedy, static_cast<uint32_t>(loop + 1), pc());
      return ok_status();
    }
    std::vector<size_t> splits;
    for (int i = node.min; i < node.max; ++i) {
      const size_t at = split();
      DSV4_RETURN_IF_ERROR(emit(body));
      if (code_.size() == at + 1) {  // nothing to choose: the split goes too
        code_.pop_back();
        break;
      }
      splits.push_back(at);
    }
    for (size_t s : splits) end(s, node.greedy, static_cast<uint32_t>(s + 1), pc());
    return ok_status();
  }

  std::vector<Instruction>& code_;
};

// The classes a match must begin with, or empty when a match can begin without consuming (an
// empty match, a lookahead first).
std::vector<uint32_t> first_classes(const std::vector<Instruction>& code) {
  std::set<uint32_t> classes;
  std::vector<bool> seen(code.size());
  std::vector<uint32_t> todo{0};
  while (!todo.empty()) {
    const uint32_t pc = todo.back();
    todo.pop_back();
    if (seen[pc]) continue;
    seen[pc] = true;
    const Instruction& in = code[pc];
    switch (in.op) {
      case Instruction::Op::kClass:
        classes.insert(in.x);
        break;
      case Instruction::Op::kSplit:
        todo.push_back(in.x);
        todo.push_back(in.y);
        break;
      case Instruction::Op::kJump:
        todo.push_back(in.x);
        break;
      case Instruction::Op::kLookahead:
      case Instruction::Op::kMatch:
        return {};
    }
  }
  return {classes.begin(), classes.end()};
}

}  // namespace

void CharClass::finish() {
  const unicode::PropertyTable& table = unicode::PropertyTable::get();
  for (char32_t cp = 0; cp < 128; ++cp) ascii[cp] = listed(cp, table.properties(cp)) != negated;
}

Result<RegexProgram> compile_regex(const std::string& pattern, bool literal) {
  RegexProgram program;
  program.pattern = pattern;
  Parser parser(pattern, program);
  Node root{Node::Kind::kEmpty};
  if (literal) {
    root = parser.literal_string();
  } else {
    DSV4_ASSIGN_OR_RETURN(root, parser.parse());
  }
  Emitter emitter(program);
  DSV4_RETURN_IF_ERROR(emitter.emit(root));
  program.code.push_back({Instruction::Op::kMatch});
  program.first_classes = first_classes(program.code);
  return program;
}

}  // namespace dsv4::tokenizer
