#include "tokenizer/added_vocabulary.h"

#include <algorithm>

#include "tokenizer/utf8.h"

namespace dsv4::tokenizer {
namespace {

using format::Json;

// Unicode White_Space, which Rust's regex \s (tokenizers' lstrip and rstrip) matches.
bool is_white_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

// Where the whitespace that ends text[0, end) begins.
size_t trailing_space_start(std::string_view text, size_t end) {
  size_t run = 0;
  for (size_t i = 0; i < end;) {
    const size_t n = utf8_length(text, i);
    if (!is_white_space(decode_utf8(text, i, n))) run = i + n;
    i += n;
  }
  return run;
}

// Where the whitespace that starts text[begin, size) ends.
size_t leading_space_end(std::string_view text, size_t begin) {
  size_t i = begin;
  while (i < text.size()) {
    const size_t n = utf8_length(text, i);
    if (!is_white_space(decode_utf8(text, i, n))) break;
    i += n;
  }
  return i;
}

// tokenizers requires every option of an added token.
Result<bool> flag(const Json& token, const char* name, const std::string& where) {
  if (!token.contains(name) || !token[name].is_boolean()) {
    return invalid_argument(where + "." + name + " must be true or false");
  }
  return token[name].get<bool>();
}

}  // namespace

Result<AddedVocabulary> AddedVocabulary::from_json(const Json& list, const BpeModel& model) {
  AddedVocabulary out;
  if (list.is_null()) return out;
  if (!list.is_array()) return invalid_argument("added_tokens must be an array");
  int64_t next_id = static_cast<int64_t>(model.vocab_size());
  std::vector<bool> normalized;  // per token
  for (size_t i = 0; i < list.size(); ++i) {
    const Json& t = list[i];
    const std::string where = "added_tokens[" + std::to_string(i) + "]";
    if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() ||
        !t.contains("content") || !t["content"].is_string()) {
      return invalid_argument(where + " needs an integer id and a string content");
    }
    Token token{t["id"].get<int64_t>(), t["content"].get<std::string>()};
    // tokenizers skips an empty token.
    if (token.content.empty()) continue;
    DSV4_ASSIGN_OR_RETURN(const bool single_word, flag(t, "single_word", where));
    if (single_word) return unimplemented(where + ".single_word true is not supported");
    DSV4_ASSIGN_OR_RETURN(token.lstrip, flag(t, "lstrip", where));
    DSV4_ASSIGN_OR_RETURN(token.rstrip, flag(t, "rstrip", where));
    DSV4_RETURN_IF_ERROR(flag(t, "special", where).status());
    DSV4_ASSIGN_OR_RETURN(const bool is_normalized, flag(t, "normalized", where));
    // The id tokenizers gives it, whatever the file says.
    std::optional<int64_t> id = out.id_of(token.content);
    if (!id) id = model.id_of(token.content);
    const bool fresh = !id.has_value();
    if (fresh) id = next_id;
    if (token.id != *id) {
      return invalid_argument(where + " \"" + token.content + "\" has id " +
                              std::to_string(token.id) + " in the file, but tokenizers gives it " +
                              std::to_string(*id));
    }
    if (const std::string* in_vocab = model.token_of(token.id); fresh && in_vocab != nullptr) {
      return invalid_argument(where + " gives id " + std::to_string(token.id) + " to \"" +
                              token.content + "\", which model.vocab gives to \"" + *in_vocab +
                              "\"");
    }
    if (fresh) ++next_id;
    // A content listed again replaces the earlier entry's options (tokenizers keeps the last).
    if (const auto seen = out.index_of_content_.find(token.content);
        seen != out.index_of_content_.end()) {
      out.tokens_[seen->second] = std::move(token);
      normalized[seen->second] = is_normalized;
      continue;
    }
    out.index_of_content_.emplace(token.content, out.tokens_.size());
    out.index_of_id_.emplace(token.id, out.tokens_.size());
    out.tokens_.push_back(std::move(token));
    normalized.push_back(is_normalized);
  }
  for (size_t k = 0; k < out.tokens_.size(); ++k) {
    Pass& pass = normalized[k] ? out.normalized_ : out.raw_;
    pass.by_first_byte[static_cast<unsigned char>(out.tokens_[k].content[0])].push_back(k);
  }
  for (Pass* pass : {&out.raw_, &out.normalized_}) {
    for (auto& bucket : pass->by_first_byte) {
      std::stable_sort(bucket.begin(), bucket.end(), [&](size_t a, size_t b) {
        return out.tokens_[a].content.size() > out.tokens_[b].content.size();
      });
    }
  }
  return out;
}

const AddedVocabulary::Token* AddedVocabulary::longest_at(const Pass& pass, std::string_view text,
                                                          size_t at) const {
  for (const size_t k : pass.by_first_byte[static_cast<unsigned char>(text[at])]) {
    if (text.compare(at, tokens_[k].content.size(), tokens_[k].content) == 0) return &tokens_[k];
  }
  return nullptr;
}

// tokenizers' AddedVocabulary::find_matches over `text` (which starts at `offset` of the whole
// input), appending its segments with whole-input offsets.
void AddedVocabulary::split_pass(const Pass& pass, std::string_view text, size_t offset,
                                 std::vector<Segment>& out) const {
  size_t start_offset = 0;  // the end of what has been cut so far
  size_t search = 0;        // the matcher goes on from the end of its last match
  while (search < text.size()) {
    const Token* found = nullptr;
    size_t at = search;
    while (at < text.size() && (found = longest_at(pass, text, at)) == nullptr) ++at;
    if (found == nullptr) break;
    size_t start = at, stop = at + found->content.size();
    search = stop;
    if (found->lstrip) start = std::max(trailing_space_start(text, start), start_offset);
    if (found->rstrip) stop = leading_space_end(text, stop);
    if (start_offset < start) out.push_back({offset + start_offset, offset + start, std::nullopt});
    out.push_back({offset + start, offset + stop, found->id});
    start_offset = stop;
  }
  if (start_offset < text.size()) {
    out.push_back({offset + start_offset, offset + text.size(), std::nullopt});
  }
}

std::vector<AddedVocabulary::Segment> AddedVocabulary::split(std::string_view text) const {
  std::vector<Segment> first, out;
  split_pass(raw_, text, 0, first);
  for (const Segment& segment : first) {
    if (segment.id) {
      out.push_back(segment);
    } else {
      split_pass(normalized_, text.substr(segment.begin, segment.end - segment.begin),
                 segment.begin, out);
    }
  }
  return out;
}

const std::string* AddedVocabulary::content_of(int64_t id) const {
  const auto it = index_of_id_.find(id);
  return it == index_of_id_.end() ? nullptr : &tokens_[it->second].content;
}

std::optional<int64_t> AddedVocabulary::id_of(std::string_view content) const {
  const auto it = index_of_content_.find(std::string(content));
  if (it == index_of_content_.end()) return std::nullopt;
  return tokens_[it->second].id;
}

}  // namespace dsv4::tokenizer
