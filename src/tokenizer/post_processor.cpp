#include "tokenizer/post_processor.h"

#include <string>

namespace dsv4::tokenizer {
namespace {

using format::Json;
using HasId = PostProcessor::HasId;

// The ids of one TemplateProcessing "single" template: SpecialToken entries around exactly one
// Sequence entry, each id one that `has_id`.
Result<PostProcessor> parse_template(const Json& post, const std::string& where,
                                     const HasId& has_id) {
  PostProcessor out;
  const Json single = post.value("single", Json());
  const Json specials = post.value("special_tokens", Json::object());
  if (!single.is_array()) return invalid_argument(where + ".single must be an array");
  bool seen_text = false;
  for (const Json& item : single) {
    if (item.is_object() && item.contains("Sequence") && !seen_text) {
      seen_text = true;
      continue;
    }
    if (!item.is_object() || !item.contains("SpecialToken") || !item["SpecialToken"].is_object()) {
      return invalid_argument(where + ".single holds " + item.dump() +
                              " (one Sequence and SpecialToken entries expected)");
    }
    const std::string name = item["SpecialToken"].value("id", std::string());
    if (!specials.is_object() || !specials.contains(name) || !specials[name].is_object() ||
        !specials[name].contains("ids") || !specials[name]["ids"].is_array()) {
      return invalid_argument(where + ".special_tokens has no ids for \"" + name + "\"");
    }
    for (const Json& id : specials[name]["ids"]) {
      const std::string field = where + ".special_tokens[\"" + name + "\"].ids: " + id.dump();
      if (!id.is_number_integer()) return invalid_argument(field);
      // An unsigned id past int64 reads as a negative one, which no tokenizer has either.
      if (!has_id(id.get<int64_t>())) {
        return invalid_argument(field + " is not a token of this tokenizer");
      }
      (seen_text ? out.after : out.before).push_back(id.get<int64_t>());
    }
  }
  if (!seen_text) return invalid_argument(where + ".single has no Sequence entry");
  return out;
}

Result<PostProcessor> parse(const Json& post, const std::string& where, const HasId& has_id) {
  if (post.is_null()) return PostProcessor{};
  const std::string type = post.is_object() ? post.value("type", std::string()) : std::string();
  if (type == "ByteLevel") return PostProcessor{};  // offsets only; ids unchanged
  if (type == "TemplateProcessing") return parse_template(post, where, has_id);
  if (type == "Sequence") {
    if (!post.contains("processors") || !post["processors"].is_array()) {
      return invalid_argument(where + ".processors must be an array");
    }
    // Each processor wraps what the ones before it produced.
    PostProcessor out;
    for (size_t i = 0; i < post["processors"].size(); ++i) {
      DSV4_ASSIGN_OR_RETURN(
          PostProcessor step,
          parse(post["processors"][i], where + ".processors[" + std::to_string(i) + "]", has_id));
      step.before.insert(step.before.end(), out.before.begin(), out.before.end());
      step.after.insert(step.after.begin(), out.after.begin(), out.after.end());
      out = std::move(step);
    }
    return out;
  }
  return unimplemented(where + ".type \"" + type +
                       "\" is not supported (ByteLevel, TemplateProcessing, Sequence)");
}

}  // namespace

Result<PostProcessor> PostProcessor::from_json(const Json& post, const HasId& has_id) {
  return parse(post, "post_processor", has_id);
}

}  // namespace dsv4::tokenizer
