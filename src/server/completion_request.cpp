#include "server/completion_request.h"

#include <optional>

#include "server/output_format.h"

namespace dsv4::server {
namespace {

using format::OrderedJson;

std::variant<std::string, std::vector<int64_t>, RequestError> read_prompt(const OrderedJson& body) {
  if (!body.contains("prompt")) return request_error("prompt", "prompt is required");
  const OrderedJson& prompt = body["prompt"];
  if (prompt.is_string()) {
    if (prompt.get<std::string>().empty()) return request_error("prompt", "the prompt is empty");
    return prompt.get<std::string>();
  }
  if (prompt.is_array()) {
    auto ids = token_ids(prompt, "prompt");
    if (auto* bad = std::get_if<RequestError>(&ids)) return *bad;
    return std::get<std::vector<int64_t>>(std::move(ids));
  }
  return request_error("prompt", "prompt must be a string or an array of token ids");
}

// Unknown fields, and the legacy API's own unimplemented ones unless they ask for nothing.
std::optional<RequestError> refuse_unsupported(const OrderedJson& body) {
  if (auto unknown = refuse_unknown(body, {"model",
                                           "prompt",
                                           "max_tokens",
                                           "temperature",
                                           "top_p",
                                           "top_k",
                                           "seed",
                                           "stream",
                                           "stream_options",
                                           "n",
                                           "stop",
                                           "logprobs",
                                           "echo",
                                           "suffix",
                                           "best_of",
                                           "presence_penalty",
                                           "frequency_penalty",
                                           "logit_bias",
                                           "user",
                                           "response_format",
                                           "structured_outputs"})) {
    return unknown;
  }
  if (auto bad = check_model_and_user(body)) return bad;
  if (present(body, "best_of") && body["best_of"] != 1) {
    return request_error("best_of", "best_of other than 1 is not supported");
  }
  if (present(body, "suffix")) return request_error("suffix", "suffix is not supported");
  return std::nullopt;
}

// logprobs (0 ... kMaxLogprobs alternatives) and echo (with stream only without logprobs: the
// prompt's logprobs come at the end of generation, after the first chunk).
std::optional<RequestError> read_logprobs(const OrderedJson& body, CompletionRequest& request) {
  if (auto bad = read_integer(body, "logprobs", 0, kMaxLogprobs, request.logprobs)) return bad;
  if (auto bad = read_bool(body, "", "echo", request.echo)) return bad;
  if (request.stream.enabled && request.echo && request.logprobs >= 0) {
    return request_error("echo",
                         "echo with stream and logprobs is not supported: the prompt's logprobs "
                         "are known only when generation ends");
  }
  return std::nullopt;
}

}  // namespace

std::variant<CompletionRequest, RequestError> parse_completion_request(
    std::string_view body_text, const RequestLimits& limits) {
  auto parsed = parse_request_body(body_text);
  if (auto* bad = std::get_if<RequestError>(&parsed)) return *bad;
  const OrderedJson& body = std::get<OrderedJson>(parsed);
  if (auto refused = refuse_unsupported(body)) return *refused;
  auto prompt = read_prompt(body);
  if (auto* bad = std::get_if<RequestError>(&prompt)) return *bad;
  CompletionRequest request;
  if (auto* text = std::get_if<std::string>(&prompt)) {
    request.prompt = std::move(*text);
  } else {
    request.prompt = std::get<std::vector<int64_t>>(std::move(prompt));
  }
  if (auto bad = read_sampling(body, "max_tokens", limits, request.sampling)) {
    return *bad;
  }
  if (auto bad = read_stream(body, request.stream)) return *bad;
  if (auto bad = read_stop(body, request.stop)) return *bad;
  if (auto bad = read_logprobs(body, request)) return *bad;
  if (auto bad = read_choices(body, request.n)) return *bad;
  if (auto bad = read_output_format(body, request.format)) return *bad;
  return request;
}

}  // namespace dsv4::server
