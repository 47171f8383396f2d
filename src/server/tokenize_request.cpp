#include "server/tokenize_request.h"

namespace dsv4::server {

using format::OrderedJson;

std::variant<TokenizeRequest, RequestError> parse_tokenize_request(std::string_view body_text) {
  auto parsed = parse_request_body(body_text);
  if (auto* bad = std::get_if<RequestError>(&parsed)) return *bad;
  const OrderedJson& body = std::get<OrderedJson>(parsed);
  if (auto bad = refuse_unknown(body, {"model", "prompt", "add_special_tokens"})) return *bad;
  if (auto bad = check_model_and_user(body)) return *bad;
  TokenizeRequest request;
  if (!present(body, "prompt")) return request_error("prompt", "prompt is required");
  if (auto bad = read_string(body, "prompt", request.prompt)) return *bad;
  if (auto bad = read_bool(body, "", "add_special_tokens", request.add_special_tokens)) return *bad;
  return request;
}

std::variant<DetokenizeRequest, RequestError> parse_detokenize_request(std::string_view body_text) {
  auto parsed = parse_request_body(body_text);
  if (auto* bad = std::get_if<RequestError>(&parsed)) return *bad;
  const OrderedJson& body = std::get<OrderedJson>(parsed);
  if (auto bad = refuse_unknown(body, {"model", "tokens"})) return *bad;
  if (auto bad = check_model_and_user(body)) return *bad;
  if (!present(body, "tokens") || !body["tokens"].is_array()) {
    return request_error("tokens", "tokens must be an array of token ids");
  }
  auto ids = token_ids(body["tokens"], "tokens");
  if (auto* bad = std::get_if<RequestError>(&ids)) return *bad;
  return DetokenizeRequest{std::get<std::vector<int64_t>>(std::move(ids))};
}

}  // namespace dsv4::server
