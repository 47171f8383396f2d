#include "server/completion_request.h"

#include <optional>

#include "server/openai_fields.h"
#include "server/output_format.h"

namespace dsv4::server {
namespace {

using format::OrderedJson;

// Most prompts one request may list (OpenAI's limit).
constexpr size_t kMaxPrompts = 2048;

// One prompt: a non-empty string or an array of token ids; `field` names it in errors.
std::variant<Prompt, RequestError> read_one_prompt(const OrderedJson& prompt,
                                                   const std::string& field) {
  if (prompt.is_string()) {
    if (prompt.get<std::string>().empty()) {
      return request_error("prompt", (field == "prompt" ? "the prompt" : field) + " is empty");
    }
    return Prompt(prompt.get<std::string>());
  }
  if (prompt.is_array()) {
    auto ids = token_ids(prompt, field.c_str());
    if (auto* bad = std::get_if<RequestError>(&ids)) return *bad;
    return Prompt(std::get<std::vector<int64_t>>(std::move(ids)));
  }
  return request_error("prompt", field + " must be a string or an array of token ids");
}

// A prompt, or a list of them: strings, or arrays of token ids.
std::variant<std::vector<Prompt>, RequestError> read_prompts(const OrderedJson& body) {
  if (!body.contains("prompt")) return request_error("prompt", "prompt is required");
  const OrderedJson& prompt = body["prompt"];
  const bool list = prompt.is_array() && !prompt.empty() &&
                    (prompt.front().is_string() || prompt.front().is_array());
  if (!list) {
    auto one = read_one_prompt(prompt, "prompt");
    if (auto* bad = std::get_if<RequestError>(&one)) return *bad;
    return std::vector<Prompt>{std::get<Prompt>(std::move(one))};
  }
  if (prompt.size() > kMaxPrompts) {
    return request_error("prompt", "prompt lists " + std::to_string(prompt.size()) +
                                       " prompts; at most " + std::to_string(kMaxPrompts));
  }
  std::vector<Prompt> prompts;
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (!prompt[i].is_string() && !prompt[i].is_array()) {
      return request_error("prompt", indexed("prompt", i) +
                                         " must be a string or an array of token ids, as the "
                                         "first prompt of the list");
    }
    auto one = read_one_prompt(prompt[i], indexed("prompt", i));
    if (auto* bad = std::get_if<RequestError>(&one)) return *bad;
    prompts.push_back(std::get<Prompt>(std::move(one)));
  }
  return prompts;
}

// Unknown fields, and the legacy API's own unimplemented ones unless they ask for nothing.
std::optional<RequestError> refuse_unsupported(const OrderedJson& body) {
  if (auto unknown = refuse_unknown(body, kOpenAiSharedFields,
                                    {"prompt", "echo", "suffix", "best_of"})) {
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
  auto prompts = read_prompts(body);
  if (auto* bad = std::get_if<RequestError>(&prompts)) return *bad;
  CompletionRequest request;
  request.prompts = std::get<std::vector<Prompt>>(std::move(prompts));
  if (auto bad = read_sampling(body, "max_tokens", limits, request.sampling)) {
    return *bad;
  }
  if (auto bad = read_stream(body, request.stream)) return *bad;
  if (auto bad = read_stop(body, request.stop)) return *bad;
  if (auto bad = read_logprobs(body, request)) return *bad;
  if (auto bad = read_choices(body, request.n)) return *bad;
  if (request.stream.enabled && request.prompts.size() > 1) {
    return request_error("prompt",
                         "a list of several prompts is answered whole, not streamed: send "
                         "\"stream\": false, or one request per prompt");
  }
  if (auto bad = read_output_format(body, request.format)) return *bad;
  return request;
}

}  // namespace dsv4::server
