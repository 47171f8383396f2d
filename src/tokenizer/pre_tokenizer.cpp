#include "tokenizer/pre_tokenizer.h"

#include <algorithm>
#include <optional>

#include "tokenizer/byte_level.h"

namespace dsv4::tokenizer {
namespace {

using format::Json;

// GPT-2's split, which ByteLevel applies first when use_regex is true.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// A stretch [begin, end) of a piece; `flag` is first "is a match", later "is dropped".
struct Span {
  size_t begin, end;
  bool flag;
};

// The matches of `pattern` and the stretches between them, covering `text` in order
// (tokenizers' Pattern::find_matches for a regex).
Result<std::vector<Span>> find_matches(const Regex& pattern, const std::string& text) {
  if (text.empty()) return std::vector<Span>{{0, 0, false}};
  DSV4_ASSIGN_OR_RETURN(auto matches, pattern.find_all(text));
  std::vector<Span> spans;
  size_t at = 0;
  for (const auto& [begin, end] : matches) {
    if (begin != at) spans.push_back({at, begin, false});
    spans.push_back({begin, end, true});
    at = end;
  }
  if (at != text.size()) spans.push_back({at, text.size(), false});
  return spans;
}

// MergedWithPrevious over `spans` in order (or MergedWithNext, run over them reversed): a match
// that follows a non-match is joined onto the piece before it. Joined pieces are never dropped.
template <typename It>
std::vector<Span> merge_matches(It first, It last, bool onto_previous) {
  std::vector<Span> out;
  bool previous_match = false;
  for (It it = first; it != last; ++it) {
    if (it->flag && !previous_match && !out.empty()) {
      if (onto_previous) {
        out.back().end = it->end;
      } else {
        out.back().begin = it->begin;
      }
    } else {
      out.push_back({it->begin, it->end, false});
    }
    previous_match = it->flag;
  }
  return out;
}

}  // namespace

Status PreTokenizer::split_piece(const Step& step, const std::string& piece,
                                 std::vector<std::string>& out) {
  DSV4_ASSIGN_OR_RETURN(std::vector<Span> spans, find_matches(step.pattern, piece));
  if (step.invert) {
    for (Span& span : spans) span.flag = !span.flag;
  }
  switch (step.behavior) {
    case Behavior::kIsolated:
      for (Span& span : spans) span.flag = false;
      break;
    case Behavior::kRemoved:
      break;
    case Behavior::kContiguous: {
      std::vector<Span> joined;
      bool previous_match = false;
      for (const Span& span : spans) {
        if (span.flag == previous_match && !joined.empty()) {
          joined.back().end = span.end;
        } else {
          joined.push_back({span.begin, span.end, false});
        }
        previous_match = span.flag;
      }
      spans = std::move(joined);
      break;
    }
    case Behavior::kMergedWithPrevious:
      spans = merge_matches(spans.begin(), spans.end(), true);
      break;
    case Behavior::kMergedWithNext:
      spans = merge_matches(spans.rbegin(), spans.rend(), false);
      std::reverse(spans.begin(), spans.end());
      break;
  }
  for (const Span& span : spans) {
    if (!span.flag && span.end > span.begin) {
      out.push_back(piece.substr(span.begin, span.end - span.begin));
    }
  }
  return ok_status();
}

namespace {

std::optional<int> behavior_of(const std::string& name) {
  static const char* const kNames[] = {"Isolated", "Removed", "MergedWithPrevious",
                                       "MergedWithNext", "Contiguous"};
  for (int i = 0; i < 5; ++i) {
    if (name == kNames[i]) return i;
  }
  return std::nullopt;
}

}  // namespace

Status PreTokenizer::add_steps(const Json& pre, const std::string& where,
                               std::vector<Step>& steps) {
  const std::string type = pre.is_object() ? pre.value("type", std::string()) : std::string();
  if (type == "Sequence") {
    if (!pre.contains("pretokenizers") || !pre["pretokenizers"].is_array()) {
      return invalid_argument(where + ".pretokenizers must be an array");
    }
    for (size_t i = 0; i < pre["pretokenizers"].size(); ++i) {
      DSV4_RETURN_IF_ERROR(add_steps(pre["pretokenizers"][i],
                                     where + ".pretokenizers[" + std::to_string(i) + "]", steps));
    }
    return ok_status();
  }
  if (type == "Split") {
    const Json pattern = pre.value("pattern", Json());
    const bool literal = pattern.is_object() && pattern.contains("String");
    const char* key = literal ? "String" : "Regex";
    if (!pattern.is_object() || !pattern.contains(key) || !pattern[key].is_string()) {
      return invalid_argument(where + ".pattern must be {\"Regex\": ...} or {\"String\": ...}");
    }
    const std::string behavior = pre.value("behavior", std::string());
    const std::optional<int> kind = behavior_of(behavior);
    if (!kind) {
      return unimplemented(where + ".behavior \"" + behavior +
                           "\" is not supported (Isolated, Removed, MergedWithPrevious, "
                           "MergedWithNext, Contiguous)");
    }
    if (!pre.contains("invert") || !pre["invert"].is_boolean()) {
      return invalid_argument(where + ".invert must be true or false");
    }
    Result<Regex> regex = Regex::compile(pattern[key].get<std::string>(), literal);
    if (!regex.ok()) return regex.status().with_context(where);
    Step step{Step::Kind::kSplit, std::move(regex).value()};
    step.behavior = static_cast<Behavior>(*kind);
    step.invert = pre["invert"].get<bool>();
    steps.push_back(std::move(step));
    return ok_status();
  }
  if (type == "ByteLevel") {
    // As tokenizers reads it: add_prefix_space and trim_offsets must be given, use_regex
    // defaults to true.
    for (const char* flag : {"add_prefix_space", "trim_offsets"}) {
      if (!pre.contains(flag) || !pre[flag].is_boolean()) {
        return invalid_argument(where + "." + flag + " must be true or false");
      }
    }
    Step step{Step::Kind::kByteLevel, {}};
    step.use_regex = pre.value("use_regex", true);
    step.add_prefix_space = pre["add_prefix_space"].get<bool>();
    if (step.use_regex) {
      DSV4_ASSIGN_OR_RETURN(step.pattern, Regex::compile(kGpt2Pattern, false));
    }
    steps.push_back(std::move(step));
    return ok_status();
  }
  return unimplemented(where + ".type " + (type.empty() ? pre.dump() : "\"" + type + "\"") +
                       " is not supported (Sequence, Split, ByteLevel)");
}

Result<PreTokenizer> PreTokenizer::from_json(const Json& pre) {
  PreTokenizer out;
  if (!pre.is_null()) DSV4_RETURN_IF_ERROR(add_steps(pre, "pre_tokenizer", out.steps_));
  return out;
}

bool PreTokenizer::byte_level() const {
  for (const Step& step : steps_) {
    if (step.kind == Step::Kind::kByteLevel) return true;
  }
  return false;
}

Result<std::vector<std::string>> PreTokenizer::split(std::string_view text) const {
  std::vector<std::string> pieces{std::string(text)};
  for (const Step& step : steps_) {
    std::vector<std::string> next;
    for (std::string& piece : pieces) {
      if (step.kind == Step::Kind::kSplit) {
        DSV4_RETURN_IF_ERROR(split_piece(step, piece, next));
        continue;
      }
      if (step.add_prefix_space && !piece.starts_with(' ')) piece = " " + piece;
      std::vector<std::string> parts;
      if (step.use_regex) {
        DSV4_RETURN_IF_ERROR(split_piece(step, piece, parts));
      } else {
        parts.push_back(std::move(piece));
      }
      for (const std::string& part : parts) next.push_back(bytes_to_chars(part));
    }
    pieces = std::move(next);
  }
  return pieces;
}

}  // namespace dsv4::tokenizer
