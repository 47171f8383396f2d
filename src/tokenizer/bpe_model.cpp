#include "tokenizer/bpe_model.h"

#include <queue>

#include "tokenizer/utf8.h"

namespace dsv4::tokenizer {
namespace {

using format::Json;

// A field that must be absent, null, false or "" for this implementation.
Status require_unset(const Json& model, const char* field) {
  if (!model.contains(field)) return ok_status();
  const Json& v = model[field];
  const bool unset = v.is_null() || (v.is_boolean() && !v.get<bool>()) ||
                     (v.is_string() && v.get<std::string>().empty());
  if (unset) return ok_status();
  return unimplemented(std::string("model.") + field + " = " + v.dump() + " is not supported");
}

// One merge as (left, right): "a b" (the older format) or ["a", "b"].
Result<std::pair<std::string, std::string>> parse_merge(const Json& merge, size_t index) {
  const std::string where = "model.merges[" + std::to_string(index) + "]";
  if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
    return std::pair{merge[0].get<std::string>(), merge[1].get<std::string>()};
  }
  if (merge.is_string()) {
    const std::string text = merge.get<std::string>();
    const size_t space = text.find(' ');
    if (space != std::string::npos && space > 0 && space + 1 < text.size() &&
        text.find(' ', space + 1) == std::string::npos) {
      return std::pair{text.substr(0, space), text.substr(space + 1)};
    }
  }
  return invalid_argument(where + " is neither \"left right\" nor [left, right]: " + merge.dump());
}

// tokenizers keeps ids as u32.
constexpr int64_t kIdLimit = int64_t{1} << 32;

}  // namespace

Result<BpeModel> BpeModel::from_json(const Json& model) {
  if (!model.is_object() || model.value("type", std::string()) != "BPE") {
    return unimplemented(
        "model.type must be \"BPE\", got " +
        (model.is_object() && model.contains("type") ? model["type"].dump() : std::string("none")));
  }
  for (const char* field :
       {"dropout", "byte_fallback", "continuing_subword_prefix", "end_of_word_suffix"}) {
    DSV4_RETURN_IF_ERROR(require_unset(model, field));
  }
  if (!model.contains("vocab") || !model["vocab"].is_object() || model["vocab"].empty()) {
    return invalid_argument("model.vocab must be a non-empty object of token -> id");
  }
  if (!model.contains("merges") || !model["merges"].is_array()) {
    return invalid_argument("model.merges must be an array");
  }
  BpeModel bpe;
  for (const auto& item : model["vocab"].items()) {
    if (!item.value().is_number_integer() || item.value().get<int64_t>() < 0 ||
        item.value().get<int64_t>() >= kIdLimit) {
      return invalid_argument("model.vocab[\"" + item.key() + "\"] is not an id in [0, 2^32)");
    }
    const int64_t id = item.value().get<int64_t>();
    if (!bpe.token_of_id_.emplace(id, item.key()).second) {
      return invalid_argument("model.vocab gives id " + std::to_string(id) + " to \"" +
                              bpe.token_of_id_[id] + "\" and \"" + item.key() + "\"");
    }
    bpe.id_of_token_.emplace(item.key(), id);
  }
  const Json& merges = model["merges"];
  for (size_t i = 0; i < merges.size(); ++i) {
    DSV4_ASSIGN_OR_RETURN(auto pair, parse_merge(merges[i], i));
    std::vector<int64_t> ids;  // left, right, joined
    for (const std::string& token : {pair.first, pair.second, pair.first + pair.second}) {
      const std::optional<int64_t> id = bpe.id_of(token);
      if (!id) {
        return invalid_argument("model.merges[" + std::to_string(i) + "] needs \"" + token +
                                "\", which is not in the vocabulary");
      }
      ids.push_back(*id);
    }
    // A pair listed twice takes its later rank, as tokenizers' map of merges does.
    bpe.merges_.insert(pair_key(ids[0], ids[1]), Merge{static_cast<int>(i), ids[2]});
  }
  if (model.contains("unk_token") && !model["unk_token"].is_null()) {
    const auto unk = model["unk_token"].is_string()
                         ? bpe.id_of(model["unk_token"].get<std::string>())
                         : std::nullopt;
    if (!unk) return invalid_argument("model.unk_token is not in the vocabulary");
    bpe.unk_id_ = *unk;
  }
  bpe.char_id_.assign(0x800, -1);
  for (const auto& [token, id] : bpe.id_of_token_) {
    if (token.empty() || utf8_length(token, 0) != token.size()) continue;
    const uint32_t cp = decode_utf8(token, 0, token.size());
    if (cp < bpe.char_id_.size()) bpe.char_id_[cp] = id;
  }
  bpe.fuse_unk_ = model.value("fuse_unk", false);
  bpe.ignore_merges_ = model.value("ignore_merges", false);
  return bpe;
}

size_t BpeModel::MergeTable::slot(uint64_t key) const {
  // Fibonacci hashing: the key's bits spread over the index by one multiplication.
  const size_t mask = keys_.size() - 1;
  size_t i = static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 32) & mask;
  while (keys_[i] != kEmpty && keys_[i] != key) i = (i + 1) & mask;
  return i;
}

void BpeModel::MergeTable::grow() {
  std::vector<uint64_t> keys = std::move(keys_);
  std::vector<Merge> merges = std::move(merges_);
  keys_.assign(keys.empty() ? 1024 : keys.size() * 2, kEmpty);
  merges_.assign(keys_.size(), Merge{});
  for (size_t i = 0; i < keys.size(); ++i) {
    if (keys[i] == kEmpty) continue;
    const size_t j = slot(keys[i]);
    keys_[j] = keys[i];
    merges_[j] = merges[i];
  }
}

void BpeModel::MergeTable::insert(uint64_t key, Merge merge) {
  if (2 * (size_ + 1) > keys_.size()) grow();
  const size_t i = slot(key);
  if (keys_[i] == kEmpty) ++size_;
  keys_[i] = key;
  merges_[i] = merge;
}

const BpeModel::Merge* BpeModel::MergeTable::find(uint64_t key) const {
  if (keys_.empty()) return nullptr;
  const size_t i = slot(key);
  return keys_[i] == key ? &merges_[i] : nullptr;
}

const BpeModel::Merge* BpeModel::merge_of(int64_t left, int64_t right) const {
  return merges_.find(pair_key(left, right));
}

Status BpeModel::initial_symbols(std::string_view piece, std::vector<int64_t>& symbols) const {
  bool in_unknown_run = false;
  for (size_t i = 0; i < piece.size();) {
    const size_t n = utf8_length(piece, i);
    const std::string_view character = piece.substr(i, n);
    i += n;
    // (A stray byte, which utf8_length reads as a character of length 1, is not looked up here.)
    const uint32_t cp = decode_utf8(character, 0, n);
    const bool whole = n > 1 || cp < 0x80;
    if (whole && cp < char_id_.size() && char_id_[cp] >= 0) {
      symbols.push_back(char_id_[cp]);
      in_unknown_run = false;
      continue;
    }
    if (const auto id = id_of(character)) {
      symbols.push_back(*id);
      in_unknown_run = false;
      continue;
    }
    if (!unk_id_) {
      std::string message = "\"";
      message += character;
      message += "\" is not in the vocabulary and it has no unk_token";
      return invalid_argument(std::move(message));
    }
    if (!(fuse_unk_ && in_unknown_run)) symbols.push_back(*unk_id_);
    in_unknown_run = true;
  }
  return ok_status();
}

Status BpeModel::encode_piece(std::string_view piece, std::vector<int64_t>& ids) const {
  if (piece.empty()) return ok_status();
  if (ignore_merges_) {
    if (const auto id = id_of(piece)) {
      ids.push_back(*id);
      return ok_status();
    }
  }
  // symbol[i] is the id at original position i; next/prev link the live ones (a merged-away
  // symbol is dead), so a queued pair is known by its left position.
  std::vector<int64_t> symbol;
  DSV4_RETURN_IF_ERROR(initial_symbols(piece, symbol));
  const size_t n = symbol.size();
  std::vector<ptrdiff_t> prev(n), next(n);
  std::vector<bool> dead(n, false);
  for (size_t i = 0; i < n; ++i) {
    prev[i] = static_cast<ptrdiff_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<ptrdiff_t>(i + 1) : -1;
  }
  struct Candidate {
    int rank;
    size_t pos;
    int64_t result;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  auto push = [&](size_t left) {
    if (next[left] < 0) return;
    if (const Merge* m = merge_of(symbol[left], symbol[static_cast<size_t>(next[left])])) {
      queue.push({m->rank, left, m->result});
    }
  };
  for (size_t i = 0; i + 1 < n; ++i) push(i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    if (dead[top.pos] || next[top.pos] < 0) continue;
    const auto right = static_cast<size_t>(next[top.pos]);
    // A stale entry: the pair at this position has changed since it was queued.
    const Merge* now = merge_of(symbol[top.pos], symbol[right]);
    if (now == nullptr || now->result != top.result) continue;
    symbol[top.pos] = top.result;
    dead[right] = true;
    next[top.pos] = next[right];
    if (next[right] >= 0) prev[static_cast<size_t>(next[right])] = static_cast<ptrdiff_t>(top.pos);
    if (prev[top.pos] >= 0) push(static_cast<size_t>(prev[top.pos]));
    push(top.pos);
  }
  for (size_t i = 0; i < n; ++i) {
    if (!dead[i]) ids.push_back(symbol[i]);
  }
  return ok_status();
}

const std::string* BpeModel::token_of(int64_t id) const {
  const auto it = token_of_id_.find(id);
  return it == token_of_id_.end() ? nullptr : &it->second;
}

std::optional<int64_t> BpeModel::id_of(std::string_view token) const {
  const auto it = id_of_token_.find(token);
  if (it == id_of_token_.end()) return std::nullopt;
  return it->second;
}

}  // namespace dsv4::tokenizer
