// dsv4::Tokenizer (include/dsv4/tokenizer.h): tokenizer.json's added tokens, normalizer (none),
// pre_tokenizer (pre_tokenizer.h), BPE model (bpe_model.h), post_processor (none, ByteLevel, or
// a TemplateProcessing "single" template) and decoder (ByteLevel for byte-level
// pre-tokenizers, none otherwise).
#include "dsv4/tokenizer.h"

#include <algorithm>
#include <array>
#include <unordered_map>

#include "base/mapped_file.h"
#include "format/json.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pre_tokenizer.h"

namespace dsv4 {

using format::Json;
using tokenizer::BpeModel;
using tokenizer::PreTokenizer;

namespace {

struct AddedToken {
  int64_t id;
  std::string content;
};

// Special token ids a TemplateProcessing "single" template puts before and after the text.
struct Template {
  std::vector<int64_t> before, after;
};

Result<std::vector<AddedToken>> parse_added_tokens(const Json& list, const BpeModel& model) {
  std::vector<AddedToken> added;
  if (list.is_null()) return added;
  if (!list.is_array()) return invalid_argument("added_tokens must be an array");
  for (size_t i = 0; i < list.size(); ++i) {
    const Json& t = list[i];
    const std::string where = "added_tokens[" + std::to_string(i) + "]";
    if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() ||
        t["id"].get<int64_t>() < 0 || !t.contains("content") || !t["content"].is_string() ||
        t["content"].get<std::string>().empty()) {
      return invalid_argument(where + " needs an id >= 0 and a non-empty content");
    }
    for (const char* flag : {"single_word", "lstrip", "rstrip"}) {
      if (t.value(flag, false)) return unimplemented(where + "." + flag + " true is not supported");
    }
    AddedToken token{t["id"].get<int64_t>(), t["content"].get<std::string>()};
    if (const std::string* in_vocab = model.token_of(token.id);
        in_vocab != nullptr && *in_vocab != token.content) {
      return invalid_argument(where + " gives id " + std::to_string(token.id) + " to \"" +
                              token.content + "\", which model.vocab gives to \"" + *in_vocab +
                              "\"");
    }
    added.push_back(std::move(token));
  }
  // Longest first, so that the first match at a position is the longest.
  std::stable_sort(added.begin(), added.end(), [](const AddedToken& a, const AddedToken& b) {
    return a.content.size() > b.content.size();
  });
  return added;
}

Result<Template> parse_post_processor(const Json& post) {
  Template out;
  if (post.is_null()) return out;
  const std::string type = post.is_object() ? post.value("type", std::string()) : std::string();
  if (type == "ByteLevel") return out;  // offsets only; ids unchanged
  if (type != "TemplateProcessing") {
    return unimplemented("post_processor.type \"" + type +
                         "\" is not supported (ByteLevel, TemplateProcessing)");
  }
  const Json single = post.value("single", Json());
  const Json specials = post.value("special_tokens", Json::object());
  if (!single.is_array()) return invalid_argument("post_processor.single must be an array");
  bool seen_text = false;
  for (const Json& item : single) {
    if (item.is_object() && item.contains("Sequence") && !seen_text) {
      seen_text = true;
      continue;
    }
    if (!item.is_object() || !item.contains("SpecialToken")) {
      return invalid_argument("post_processor.single holds " + item.dump() +
                              " (one Sequence and SpecialToken entries expected)");
    }
    const std::string name = item["SpecialToken"].value("id", std::string());
    if (!specials.contains(name) || !specials[name].contains("ids") ||
        !specials[name]["ids"].is_array()) {
      return invalid_argument("post_processor.special_tokens has no ids for \"" + name + "\"");
    }
    for (const Json& id : specials[name]["ids"]) {
      if (!id.is_number_integer()) {
        return invalid_argument("post_processor.special_tokens[\"" + name +
                                "\"].ids: " + id.dump());
      }
      (seen_text ? out.after : out.before).push_back(id.get<int64_t>());
    }
  }
  if (!seen_text) return invalid_argument("post_processor.single has no Sequence entry");
  return out;
}

Status check_decoder(const Json& decoder, bool byte_level) {
  const std::string type =
      decoder.is_object() ? decoder.value("type", std::string()) : std::string();
  if (byte_level && type == "ByteLevel") return ok_status();
  if (!byte_level && decoder.is_null()) return ok_status();
  return unimplemented("decoder " + decoder.dump() + " with " +
                       (byte_level ? "a byte-level" : "a plain") +
                       " pre_tokenizer is not supported (ByteLevel with ByteLevel, else null)");
}

}  // namespace

struct Tokenizer::State {
  BpeModel model;
  PreTokenizer pre;
  std::vector<AddedToken> added;  // longest content first
  std::unordered_map<int64_t, const AddedToken*> added_by_id;
  Template wrap;
  // Whether some added token starts with this byte: most positions of a text need no search.
  std::array<bool, 256> added_starts_with{};
};

Tokenizer::Tokenizer(std::unique_ptr<State> state) : state_(std::move(state)) {}
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

Result<Tokenizer> Tokenizer::parse(std::string_view json_text, const std::string& what) {
  DSV4_ASSIGN_OR_RETURN(Json json, format::parse_json(json_text, what));
  auto build = [&]() -> Result<std::unique_ptr<State>> {
    if (!json.is_object()) return invalid_argument("not a JSON object");
    if (json.contains("normalizer") && !json["normalizer"].is_null()) {
      return unimplemented("normalizer " + json["normalizer"].dump() + " is not supported");
    }
    if (json.contains("truncation") && !json["truncation"].is_null()) {
      return unimplemented("truncation is not supported (it would cut the prompt silently)");
    }
    if (!json.contains("model")) return invalid_argument("no model");
    DSV4_ASSIGN_OR_RETURN(BpeModel model, BpeModel::from_json(json["model"]));
    DSV4_ASSIGN_OR_RETURN(PreTokenizer pre,
                          PreTokenizer::from_json(json.value("pre_tokenizer", Json())));
    DSV4_RETURN_IF_ERROR(check_decoder(json.value("decoder", Json()), pre.byte_level()));
    DSV4_ASSIGN_OR_RETURN(auto added,
                          parse_added_tokens(json.value("added_tokens", Json()), model));
    DSV4_ASSIGN_OR_RETURN(Template wrap,
                          parse_post_processor(json.value("post_processor", Json())));
    auto state = std::make_unique<State>(
        State{std::move(model), std::move(pre), std::move(added), {}, std::move(wrap)});
    for (const AddedToken& token : state->added) {
      state->added_by_id.emplace(token.id, &token);
      state->added_starts_with[static_cast<unsigned char>(token.content[0])] = true;
    }
    return state;
  };
  Result<std::unique_ptr<State>> state = build();
  if (!state.ok()) return state.status().with_context(what);
  return Tokenizer(std::move(state).value());
}

Result<Tokenizer> Tokenizer::load(const std::string& path) {
  DSV4_ASSIGN_OR_RETURN(MappedFile file, MappedFile::open(path));
  return parse(std::string_view(reinterpret_cast<const char*>(file.data()), file.size()), path);
}

Result<std::vector<int64_t>> Tokenizer::encode(std::string_view text) const {
  const State& s = *state_;
  std::vector<int64_t> ids = s.wrap.before;
  auto encode_plain = [&](std::string_view plain) -> Status {
    if (plain.empty()) return ok_status();
    DSV4_ASSIGN_OR_RETURN(std::vector<std::string> pieces, s.pre.split(plain));
    for (const std::string& piece : pieces) DSV4_RETURN_IF_ERROR(s.model.encode_piece(piece, ids));
    return ok_status();
  };
  size_t plain_begin = 0;
  for (size_t at = 0; at < text.size();) {
    if (!s.added_starts_with[static_cast<unsigned char>(text[at])]) {
      ++at;
      continue;
    }
    const auto match = std::find_if(s.added.begin(), s.added.end(), [&](const AddedToken& t) {
      return text.compare(at, t.content.size(), t.content) == 0;
    });
    if (match == s.added.end()) {
      ++at;
      continue;
    }
    DSV4_RETURN_IF_ERROR(encode_plain(text.substr(plain_begin, at - plain_begin)));
    ids.push_back(match->id);
    at += match->content.size();
    plain_begin = at;
  }
  DSV4_RETURN_IF_ERROR(encode_plain(text.substr(plain_begin)));
  ids.insert(ids.end(), s.wrap.after.begin(), s.wrap.after.end());
  return ids;
}

Result<std::string> Tokenizer::decode(const std::vector<int64_t>& ids) const {
  const State& s = *state_;
  std::string out, pending;  // pending: vocabulary characters not yet turned into bytes
  auto flush = [&]() -> Status {
    if (!s.pre.byte_level()) {
      out += pending;
    } else {
      DSV4_ASSIGN_OR_RETURN(std::string bytes, tokenizer::chars_to_bytes(pending));
      out += bytes;
    }
    pending.clear();
    return ok_status();
  };
  for (const int64_t id : ids) {
    if (const auto it = s.added_by_id.find(id); it != s.added_by_id.end()) {
      DSV4_RETURN_IF_ERROR(flush());
      out += it->second->content;
    } else if (const std::string* token = s.model.token_of(id)) {
      pending += *token;
    } else {
      return invalid_argument("token id " + std::to_string(id) + " is not in the tokenizer");
    }
  }
  DSV4_RETURN_IF_ERROR(flush());
  return out;
}

std::optional<int64_t> Tokenizer::token_id(std::string_view token) const {
  for (const auto& added : state_->added) {
    if (added.content == token) return added.id;
  }
  return state_->model.id_of(token);
}

}  // namespace dsv4
