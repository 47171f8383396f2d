// dsv4::Tokenizer (include/dsv4/tokenizer.h): tokenizer.json's stages in the order Hugging Face
// tokenizers runs them: added tokens (added_vocabulary.h), normalizer (only ones that change
// nothing), pre_tokenizer (pre_tokenizer.h), BPE model (bpe_model.h), post_processor
// (post_processor.h); and the decoder (ByteLevel, or none).
#include "dsv4/tokenizer.h"

#include "base/mapped_file.h"
#include "format/json.h"
#include "tokenizer/added_vocabulary.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/utf8.h"

namespace dsv4 {

using format::Json;
using tokenizer::AddedVocabulary;
using tokenizer::BpeModel;
using tokenizer::PostProcessor;
using tokenizer::PreTokenizer;

namespace {

// Only normalizers that change nothing: null, or a Sequence of them (DeepSeek's file has an
// empty Sequence).
Status check_normalizer(const Json& normalizer, const std::string& where) {
  if (normalizer.is_null()) return ok_status();
  if (normalizer.is_object() && normalizer.value("type", std::string()) == "Sequence" &&
      normalizer.contains("normalizers") && normalizer["normalizers"].is_array()) {
    for (size_t i = 0; i < normalizer["normalizers"].size(); ++i) {
      DSV4_RETURN_IF_ERROR(check_normalizer(normalizer["normalizers"][i],
                                            where + ".normalizers[" + std::to_string(i) + "]"));
    }
    return ok_status();
  }
  return unimplemented(where + " " + normalizer.dump() + " is not supported");
}

// Padding to the longest of a batch leaves a single encoding as it is; any other padding
// would add ids.
Status check_padding(const Json& padding) {
  if (padding.is_null()) return ok_status();
  const bool batch_longest = padding.is_object() && padding.contains("strategy") &&
                             padding["strategy"] == "BatchLongest" &&
                             padding.value("pad_to_multiple_of", Json()).is_null();
  if (batch_longest) return ok_status();
  return unimplemented("padding " + padding.dump() + " is not supported");
}

// Whether the decoder is ByteLevel (else it is none).
Result<bool> parse_decoder(const Json& decoder) {
  if (decoder.is_null()) return false;
  if (decoder.is_object() && decoder.value("type", std::string()) == "ByteLevel") return true;
  return unimplemented("decoder " + decoder.dump() + " is not supported (ByteLevel, null)");
}

}  // namespace

struct Tokenizer::State {
  BpeModel model;
  PreTokenizer pre;
  AddedVocabulary added;
  PostProcessor post;
  bool byte_level_decoder;
};

Tokenizer::Tokenizer(std::unique_ptr<State> state) : state_(std::move(state)) {}
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

Result<Tokenizer> Tokenizer::parse(std::string_view json_text, const std::string& what) {
  DSV4_ASSIGN_OR_RETURN(Json json, format::parse_json(json_text, what));
  auto build = [&]() -> Result<std::unique_ptr<State>> {
    if (!json.is_object()) return invalid_argument("not a JSON object");
    if (json.contains("version") && json["version"] != "1.0") {
      return unimplemented("version " + json["version"].dump() + " is not supported (\"1.0\")");
    }
    DSV4_RETURN_IF_ERROR(check_normalizer(json.value("normalizer", Json()), "normalizer"));
    if (json.contains("truncation") && !json["truncation"].is_null()) {
      return unimplemented("truncation is not supported (it would cut the prompt silently)");
    }
    DSV4_RETURN_IF_ERROR(check_padding(json.value("padding", Json())));
    if (!json.contains("model")) return invalid_argument("no model");
    DSV4_ASSIGN_OR_RETURN(BpeModel model, BpeModel::from_json(json["model"]));
    DSV4_ASSIGN_OR_RETURN(PreTokenizer pre,
                          PreTokenizer::from_json(json.value("pre_tokenizer", Json())));
    DSV4_ASSIGN_OR_RETURN(AddedVocabulary added,
                          AddedVocabulary::from_json(json.value("added_tokens", Json()), model));
    DSV4_ASSIGN_OR_RETURN(
        PostProcessor post,
        PostProcessor::from_json(json.value("post_processor", Json()), [&](int64_t id) {
          return added.content_of(id) != nullptr || model.token_of(id) != nullptr;
        }));
    DSV4_ASSIGN_OR_RETURN(const bool byte_level_decoder,
                          parse_decoder(json.value("decoder", Json())));
    return std::make_unique<State>(State{std::move(model), std::move(pre), std::move(added),
                                         std::move(post), byte_level_decoder});
  };
  Result<std::unique_ptr<State>> state = invalid_argument("unreachable");
  // Json's accessors throw on a value of the wrong type (a string where a boolean belongs);
  // that is the file's fault, so it becomes an error here rather than escaping.
  try {
    state = build();
  } catch (const Json::exception& e) {
    state = invalid_argument(e.what());
  }
  if (!state.ok()) return state.status().with_context(what);
  return Tokenizer(std::move(state).value());
}

Result<Tokenizer> Tokenizer::load(const std::string& path) {
  DSV4_ASSIGN_OR_RETURN(MappedFile file, MappedFile::open(path));
  return parse(std::string_view(reinterpret_cast<const char*>(file.data()), file.size()), path);
}

Result<std::vector<int64_t>> Tokenizer::encode(std::string_view text,
                                               bool add_special_tokens) const {
  const State& s = *state_;
  std::vector<int64_t> ids;
  if (add_special_tokens) ids = s.post.before;
  for (const AddedVocabulary::Segment& segment : s.added.split(text)) {
    if (segment.id) {
      ids.push_back(*segment.id);
      continue;
    }
    DSV4_ASSIGN_OR_RETURN(std::vector<std::string> pieces,
                          s.pre.split(text.substr(segment.begin, segment.end - segment.begin)));
    for (const std::string& piece : pieces) DSV4_RETURN_IF_ERROR(s.model.encode_piece(piece, ids));
  }
  if (add_special_tokens) ids.insert(ids.end(), s.post.after.begin(), s.post.after.end());
  return ids;
}

Result<std::string> Tokenizer::decode(const std::vector<int64_t>& ids) const {
  const State& s = *state_;
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string* token = s.added.content_of(ids[i]);
    if (token == nullptr) token = s.model.token_of(ids[i]);
    if (token == nullptr) {
      return invalid_argument("token id " + std::to_string(ids[i]) + " is not in the tokenizer");
    }
    if (!s.byte_level_decoder) {
      // tokenizers joins the tokens with spaces when there is no decoder.
      if (i > 0) out += ' ';
      out += *token;
      continue;
    }
    // ByteLevel: a token made of byte-level characters stands for their bytes; any other
    // (an added token such as <｜User｜>) for its own text.
    Result<std::string> bytes = tokenizer::chars_to_bytes(*token);
    out += bytes.ok() ? *bytes : *token;
  }
  return tokenizer::to_valid_utf8(out);
}

std::optional<std::string> Tokenizer::token_bytes(int64_t id) const {
  const State& s = *state_;
  if (s.added.content_of(id) != nullptr) return std::nullopt;
  const std::string* token = s.model.token_of(id);
  if (token == nullptr) return std::nullopt;
  // Without a ByteLevel decoder, decode() joins tokens with spaces: no token's bytes stand alone.
  if (!s.byte_level_decoder) return std::nullopt;
  Result<std::string> bytes = tokenizer::chars_to_bytes(*token);
  return bytes.ok() ? *bytes : *token;
}

std::optional<int64_t> Tokenizer::token_id(std::string_view token) const {
  if (const auto id = state_->added.id_of(token)) return id;
  return state_->model.id_of(token);
}

}  // namespace dsv4
