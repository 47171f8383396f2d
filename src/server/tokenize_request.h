// The bodies of POST /tokenize and POST /detokenize (vLLM's endpoints): text to the ids the model
// would see, and ids back to text, through the checkpoint's tokenizer.json.
//   /tokenize    {"prompt": text, "add_special_tokens": bool (default true)}
//   /detokenize  {"tokens": [id, ...]}
// "model" is accepted and ignored (one model per server); other fields are refused by name.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "server/request_fields.h"

namespace dsv4::server {

struct TokenizeRequest {
  std::string prompt;
  bool add_special_tokens = true;  // the post-processor's tokens (begin of sentence) around it
};

struct DetokenizeRequest {
  std::vector<int64_t> tokens;
};

std::variant<TokenizeRequest, RequestError> parse_tokenize_request(std::string_view body);
std::variant<DetokenizeRequest, RequestError> parse_detokenize_request(std::string_view body);

}  // namespace dsv4::server
