#include "server/completion_request.h"

#include <cmath>
#include <limits>
#include <optional>
#include <set>

#include "format/json.h"

namespace dsv4::server {
namespace {

using format::Json;

RequestError error(std::string param, std::string message) {
  return RequestError{std::move(message), std::move(param)};
}

bool present(const Json& body, const char* field) {
  return body.contains(field) && !body[field].is_null();
}

// The ids of an array prompt: integers >= 0 (the engine checks them against the vocabulary).
std::variant<std::vector<int64_t>, RequestError> token_ids(const Json& prompt) {
  std::vector<int64_t> ids;
  for (const Json& id : prompt) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0) {
      return error("prompt", "an array prompt holds token ids (integers >= 0), got " + id.dump());
    }
    ids.push_back(id.get<int64_t>());
  }
  if (ids.empty()) return error("prompt", "the prompt is empty");
  return ids;
}

std::variant<std::string, std::vector<int64_t>, RequestError> read_prompt(const Json& body) {
  if (!body.contains("prompt")) return error("prompt", "prompt is required");
  const Json& prompt = body["prompt"];
  if (prompt.is_string()) {
    if (prompt.get<std::string>().empty()) return error("prompt", "the prompt is empty");
    return prompt.get<std::string>();
  }
  if (prompt.is_array()) {
    auto ids = token_ids(prompt);
    if (auto* bad = std::get_if<RequestError>(&ids)) return *bad;
    return std::get<std::vector<int64_t>>(std::move(ids));
  }
  return error("prompt", "prompt must be a string or an array of token ids");
}

// `field` as a number in [lo, hi] into `out` (left as is when absent); an error otherwise.
std::optional<RequestError> read_number(const Json& body, const char* field, double lo, double hi,
                                        double& out) {
  if (!present(body, field)) return std::nullopt;
  const Json& v = body[field];
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < lo ||
      v.get<double>() > hi) {
    return error(field, std::string(field) + " must be a number in [" + Json(lo).dump() + ", " +
                            Json(hi).dump() + "], got " + v.dump());
  }
  out = v.get<double>();
  return std::nullopt;
}

std::optional<RequestError> read_integer(const Json& body, const char* field, int64_t lo,
                                         int64_t hi, int64_t& out) {
  if (!present(body, field)) return std::nullopt;
  const Json& v = body[field];
  if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi) {
    return error(field, std::string(field) + " must be an integer in [" + std::to_string(lo) +
                            ", " + std::to_string(hi) + "], got " + v.dump());
  }
  out = v.get<int64_t>();
  return std::nullopt;
}

// Unknown fields, and known ones this server does not implement unless they ask for nothing.
std::optional<RequestError> refuse_unsupported(const Json& body) {
  static const std::set<std::string> kKnown = {"model",
                                               "prompt",
                                               "max_tokens",
                                               "temperature",
                                               "top_p",
                                               "top_k",
                                               "seed",
                                               "stream",
                                               "n",
                                               "stop",
                                               "logprobs",
                                               "echo",
                                               "suffix",
                                               "best_of",
                                               "presence_penalty",
                                               "frequency_penalty",
                                               "logit_bias",
                                               "user"};
  for (const auto& item : body.items()) {
    if (!kKnown.count(item.key())) return error(item.key(), "unknown field \"" + item.key() + "\"");
  }
  const auto asks_nothing = [&](const char* field, const Json& no_op) {
    return !present(body, field) || body[field] == no_op;
  };
  if (!asks_nothing("stream", false)) return error("stream", "streaming is not supported");
  for (const char* field : {"n", "best_of"}) {
    if (!asks_nothing(field, 1)) return error(field, "one completion per request (n = 1)");
  }
  if (!asks_nothing("echo", false)) return error("echo", "echo is not supported");
  for (const char* field : {"stop", "logprobs", "suffix", "logit_bias"}) {
    if (present(body, field)) return error(field, std::string(field) + " is not supported");
  }
  for (const char* field : {"presence_penalty", "frequency_penalty"}) {
    if (!asks_nothing(field, 0)) {
      return error(field, std::string(field) + " other than 0 is not supported");
    }
  }
  for (const char* field : {"model", "user"}) {
    if (present(body, field) && !body[field].is_string()) {
      return error(field, std::string(field) + " must be a string");
    }
  }
  return std::nullopt;
}

std::optional<RequestError> read_sampling(const Json& body, int64_t max_tokens_limit,
                                          SamplingParams& s) {
  double temperature = 1.0, top_p = 1.0;  // OpenAI's defaults
  int64_t seed = 0;
  for (auto bad : {read_integer(body, "max_tokens", 0, max_tokens_limit, s.max_tokens),
                   read_integer(body, "top_k", 0, std::numeric_limits<int32_t>::max(), s.top_k),
                   read_integer(body, "seed", 0, std::numeric_limits<int64_t>::max(), seed),
                   read_number(body, "temperature", 0.0, 2.0, temperature),
                   read_number(body, "top_p", 0.0, 1.0, top_p)}) {
    if (bad) return bad;
  }
  if (top_p <= 0.0) return error("top_p", "top_p must be greater than 0");
  s.seed = static_cast<uint64_t>(seed);
  s.temperature = static_cast<float>(temperature);
  s.top_p = static_cast<float>(top_p);
  return std::nullopt;
}

}  // namespace

std::variant<CompletionRequest, RequestError> parse_completion_request(std::string_view body_text,
                                                                       int64_t max_tokens_limit) {
  Result<Json> parsed = format::parse_json(body_text, "request body");
  if (!parsed.ok()) return error("", parsed.status().message());
  const Json& body = *parsed;
  if (!body.is_object()) return error("", "the request body must be a JSON object");
  if (auto refused = refuse_unsupported(body)) return *refused;
  auto prompt = read_prompt(body);
  if (auto* bad = std::get_if<RequestError>(&prompt)) return *bad;
  CompletionRequest request;
  if (auto* text = std::get_if<std::string>(&prompt)) {
    request.prompt = std::move(*text);
  } else {
    request.prompt = std::get<std::vector<int64_t>>(std::move(prompt));
  }
  if (auto bad = read_sampling(body, max_tokens_limit, request.sampling)) return *bad;
  return request;
}

}  // namespace dsv4::server
