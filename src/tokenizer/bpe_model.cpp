#include "tokenizer/bpe_model.h"

#include <algorithm>

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
    if (!item.value().is_number_integer() || item.value().get<int64_t>() < 0) {
      return invalid_argument("model.vocab[\"" + item.key() + "\"] is not an id >= 0");
    }
    const int64_t id = item.value().get<int64_t>();
    if (!bpe.token_of_id_.emplace(id, item.key()).second) {
      return invalid_argument("model.vocab gives id " + std::to_string(id) + " to \"" +
                              bpe.token_of_id_[id] + "\" and \"" + item.key() + "\"");
    }
    bpe.id_of_token_.emplace(item.key(), id);
    bpe.id_bound_ = std::max(bpe.id_bound_, id + 1);
  }
  const Json& merges = model["merges"];
  for (size_t i = 0; i < merges.size(); ++i) {
    DSV4_ASSIGN_OR_RETURN(auto pair, parse_merge(merges[i], i));
    for (const std::string& token : {pair.first, pair.second, pair.first + pair.second}) {
      if (!bpe.id_of_token_.count(token)) {
        return invalid_argument("model.merges[" + std::to_string(i) + "] needs \"" + token +
                                "\", which is not in the vocabulary");
      }
    }
    bpe.merge_rank_.emplace(std::move(pair), static_cast<int>(i));  // the first rank wins
  }
  if (model.contains("unk_token") && !model["unk_token"].is_null()) {
    const auto unk = bpe.id_of(model["unk_token"].get<std::string>());
    if (!unk) return invalid_argument("model.unk_token is not in the vocabulary");
    bpe.unk_id_ = *unk;
  }
  bpe.ignore_merges_ = model.value("ignore_merges", false);
  return bpe;
}

std::optional<int> BpeModel::rank_of(const std::string& left, const std::string& right) const {
  const auto it = merge_rank_.find({left, right});
  if (it == merge_rank_.end()) return std::nullopt;
  return it->second;
}

Status BpeModel::encode_piece(std::string_view piece, std::vector<int64_t>& ids) const {
  if (piece.empty()) return ok_status();
  if (ignore_merges_) {
    if (const auto id = id_of(piece)) {
      ids.push_back(*id);
      return ok_status();
    }
  }
  std::vector<std::string> symbols;
  for (size_t i = 0; i < piece.size();) {
    const size_t n = utf8_length(piece, i);
    symbols.emplace_back(piece.substr(i, n));
    i += n;
  }
  while (symbols.size() > 1) {
    std::optional<int> best;
    size_t best_at = 0;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      const auto rank = rank_of(symbols[i], symbols[i + 1]);
      if (rank && (!best || *rank < *best)) best = rank, best_at = i;
    }
    if (!best) break;
    // Join every occurrence of the best pair, left to right (ranks are unique per pair, so the
    // pair is known by its strings; no second lookup).
    const std::string left = symbols[best_at], right = symbols[best_at + 1];
    std::vector<std::string> merged;
    merged.reserve(symbols.size());
    for (size_t i = 0; i < symbols.size(); ++i) {
      if (i + 1 < symbols.size() && symbols[i] == left && symbols[i + 1] == right) {
        merged.push_back(symbols[i] + symbols[i + 1]);
        ++i;
      } else {
        merged.push_back(std::move(symbols[i]));
      }
    }
    symbols = std::move(merged);
  }
  for (const std::string& symbol : symbols) {
    const auto id = id_of(symbol);
    if (!id && !unk_id_) {
      return invalid_argument("\"" + symbol +
                              "\" is not in the vocabulary and it has no unk_token");
    }
    ids.push_back(id ? *id : *unk_id_);
  }
  return ok_status();
}

const std::string* BpeModel::token_of(int64_t id) const {
  const auto it = token_of_id_.find(id);
  return it == token_of_id_.end() ? nullptr : &it->second;
}

std::optional<int64_t> BpeModel::id_of(std::string_view token) const {
  const auto it = id_of_token_.find(std::string(token));
  if (it == id_of_token_.end()) return std::nullopt;
  return it->second;
}

}  // namespace dsv4::tokenizer
