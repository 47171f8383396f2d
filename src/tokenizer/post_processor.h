// tokenizer.json's "post_processor", as far as it changes ids: the special tokens a
// TemplateProcessing "single" template puts around the text when special tokens are added.
// ByteLevel only trims offsets, so it adds nothing; a Sequence composes its processors in
// order. Anything else (RobertaProcessing, BertProcessing, pair templates in use) is refused.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "dsv4/status.h"
#include "format/json.h"

namespace dsv4::tokenizer {

struct PostProcessor {
  std::vector<int64_t> before, after;  // ids around the text

  using HasId = std::function<bool(int64_t)>;
  // `post` is the post_processor value (null: nothing is added); every id it adds must be one
  // that `has_id` (the tokenizer's vocabulary and added tokens).
  static Result<PostProcessor> from_json(const format::Json& post, const HasId& has_id);
};

}  // namespace dsv4::tokenizer
