#include "tokenizer/pre_tokenizer.h"

#include "tokenizer/byte_level.h"

namespace dsv4::tokenizer {
namespace {

using format::Json;

// GPT-2's split, which ByteLevel applies first when use_regex is true.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Pieces of `text` around the matches of `pattern`; the matches kept unless `remove_matches`.
Status split_piece(const Regex& pattern, bool remove_matches, const std::string& text,
                   std::vector<std::string>& out) {
  DSV4_ASSIGN_OR_RETURN(auto matches, pattern.find_all(text));
  size_t at = 0;
  for (const auto& [begin, end] : matches) {
    if (begin > at) out.push_back(text.substr(at, begin - at));
    if (!remove_matches) out.push_back(text.substr(begin, end - begin));
    at = end;
  }
  if (at < text.size()) out.push_back(text.substr(at));
  return ok_status();
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
    if (behavior != "Isolated" && behavior != "Removed") {
      return unimplemented(where + ".behavior \"" + behavior +
                           "\" is not supported (Isolated, Removed)");
    }
    if (pre.value("invert", false)) return unimplemented(where + ".invert true is not supported");
    Result<Regex> regex = Regex::compile(pattern[key].get<std::string>(), literal);
    if (!regex.ok()) return regex.status().with_context(where);
    steps.push_back({Step::Kind::kSplit, std::move(regex).value(), behavior == "Removed"});
    return ok_status();
  }
  if (type == "ByteLevel") {
    Step step{Step::Kind::kByteLevel, {}};
    step.use_regex = pre.value("use_regex", true);
    step.add_prefix_space = pre.value("add_prefix_space", false);
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
        DSV4_RETURN_IF_ERROR(split_piece(step.pattern, step.remove_matches, piece, next));
        continue;
      }
      if (step.add_prefix_space && !piece.empty() && piece[0] != ' ') piece = " " + piece;
      std::vector<std::string> parts;
      if (step.use_regex) {
        DSV4_RETURN_IF_ERROR(split_piece(step.pattern, false, piece, parts));
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
