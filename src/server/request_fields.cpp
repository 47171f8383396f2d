#include "server/request_fields.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <random>
#include <utility>
#include <vector>

namespace dsv4::server {
namespace {

using format::OrderedJson;

// `field` as a number in [lo, hi] into `out` (left as is when absent); an error otherwise.
std::optional<RequestError> read_number(const OrderedJson& body, const char* field, double lo,
                                        double hi, double& out) {
  if (!present(body, field)) return std::nullopt;
  const OrderedJson& v = body[field];
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < lo ||
      v.get<double>() > hi) {
    return request_error(field, std::string(field) + " must be a number in [" +
                                    OrderedJson(lo).dump() + ", " + OrderedJson(hi).dump() +
                                    "], got " + v.dump());
  }
  out = v.get<double>();
  return std::nullopt;
}

bool holds(std::span<const std::string_view> names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// The first field of `object` that `known` does not take, as an error naming it inside `path`.
std::optional<RequestError> refuse_unknown_where(
    const OrderedJson& object, const std::function<bool(std::string_view)>& known,
    const std::string& path) {
  for (const auto& item : object.items()) {
    if (known(item.key())) continue;
    const std::string name = path.empty() ? item.key() : path + "." + item.key();
    return request_error(name, "unknown field \"" + name + "\"");
  }
  return std::nullopt;
}

}  // namespace

RequestError request_error(std::string param, std::string message) {
  return RequestError{std::move(message), std::move(param)};
}

std::variant<OrderedJson, RequestError> parse_request_body(std::string_view body) {
  Result<OrderedJson> parsed = format::parse_ordered_json(body, "request body");
  if (!parsed.ok()) return request_error("", parsed.status().message());
  if (!parsed->is_object()) return request_error("", "the request body must be a JSON object");
  return *std::move(parsed);
}

bool present(const OrderedJson& body, const char* field) {
  return body.contains(field) && !body[field].is_null();
}

std::optional<RequestError> refuse_unknown(const OrderedJson& object,
                                           std::initializer_list<std::string_view> known,
                                           const std::string& path) {
  return refuse_unknown_where(
      object, [&](std::string_view name) { return holds({known.begin(), known.size()}, name); },
      path);
}

std::optional<RequestError> refuse_unknown(const OrderedJson& object,
                                           std::span<const std::string_view> shared,
                                           std::initializer_list<std::string_view> own) {
  return refuse_unknown_where(
      object,
      [&](std::string_view name) {
        return holds(shared, name) || holds({own.begin(), own.size()}, name);
      },
      "");
}

std::optional<RequestError> check_model_and_user(const OrderedJson& body) {
  std::string ignored;
  for (const char* field : {"model", "user"}) {
    if (auto bad = read_string(body, field, ignored)) return bad;
  }
  return std::nullopt;
}

std::variant<std::vector<int64_t>, RequestError> token_ids(const OrderedJson& array,
                                                           const char* field) {
  std::vector<int64_t> ids;
  for (const OrderedJson& id : array) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0) {
      return request_error(
          field, std::string(field) + " holds token ids (integers >= 0), got " + id.dump());
    }
    ids.push_back(id.get<int64_t>());
  }
  if (ids.empty()) return request_error(field, std::string("the ") + field + " is empty");
  return ids;
}

std::optional<RequestError> read_choices(const OrderedJson& body, int64_t& n) {
  return read_integer(body, "n", 1, kMaxChoices, n);
}

std::string indexed(const std::string& path, size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

std::optional<RequestError> read_text(const OrderedJson& object, const std::string& path,
                                      const char* field, bool required, std::string& out) {
  const std::string name = path.empty() ? std::string(field) : path + "." + field;
  if (!present(object, field)) {
    if (required) return request_error(name, name + " is required");
    return std::nullopt;
  }
  if (!object[field].is_string()) return request_error(name, name + " must be a string");
  out = object[field].get<std::string>();
  return std::nullopt;
}

std::optional<RequestError> read_bool(const OrderedJson& object, const std::string& path,
                                      const char* field, bool& out) {
  if (!present(object, field)) return std::nullopt;
  const std::string name = path.empty() ? std::string(field) : path + "." + field;
  if (!object[field].is_boolean()) {
    return request_error(name, name + " must be true or false, got " + object[field].dump());
  }
  out = object[field].get<bool>();
  return std::nullopt;
}

std::optional<RequestError> expect_object(const OrderedJson& value, const std::string& path) {
  if (value.is_object()) return std::nullopt;
  return request_error(path, path + " must be an object");
}

std::optional<RequestError> read_objects(
    const OrderedJson& body, const char* field,
    const std::function<std::optional<RequestError>(const OrderedJson&, const std::string&)>&
        read) {
  if (!present(body, field)) return std::nullopt;
  if (!body[field].is_array())
    return request_error(field, std::string(field) + " must be an array");
  for (size_t i = 0; i < body[field].size(); ++i) {
    const std::string path = indexed(field, i);
    if (auto bad = expect_object(body[field][i], path)) return bad;
    if (auto bad = read(body[field][i], path)) return bad;
  }
  return std::nullopt;
}

std::optional<RequestError> read_stop(const OrderedJson& body, std::vector<std::string>& out,
                                      const char* field, size_t max_stops) {
  if (!present(body, field)) return std::nullopt;
  const OrderedJson& stop = body[field];
  const OrderedJson list = stop.is_array() ? stop : OrderedJson::array({stop});
  if (list.size() > max_stops) {
    return request_error(field, std::string(field) + " has " + std::to_string(list.size()) +
                                    " strings; at most " + std::to_string(max_stops));
  }
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string where = stop.is_array() ? indexed(field, i) : std::string(field);
    if (!list[i].is_string()) {
      return request_error(field, where + " must be a string, got " + list[i].dump());
    }
    const std::string& text = list[i].get_ref<const std::string&>();
    if (text.empty()) return request_error(field, where + " is empty");
    if (text.size() > kMaxStopBytes) {
      return request_error(field, where + " is " + std::to_string(text.size()) +
                                      " bytes; at most " + std::to_string(kMaxStopBytes));
    }
    out.push_back(list[i].get<std::string>());
  }
  return std::nullopt;
}

std::optional<RequestError> read_stream(const OrderedJson& body, StreamOptions& out) {
  if (auto bad = read_bool(body, "", "stream", out.enabled)) return bad;
  if (!present(body, "stream_options")) return std::nullopt;
  const OrderedJson& options = body["stream_options"];
  if (!out.enabled) {
    return request_error("stream_options", "stream_options is only allowed with stream true");
  }
  if (!options.is_object())
    return request_error("stream_options", "stream_options must be an object");
  if (auto bad = refuse_unknown(options, {"include_usage"}, "stream_options")) return bad;
  return read_bool(options, "stream_options", "include_usage", out.include_usage);
}

std::optional<RequestError> read_string(const OrderedJson& body, const char* field,
                                        std::string& out) {
  if (!present(body, field)) return std::nullopt;
  if (!body[field].is_string())
    return request_error(field, std::string(field) + " must be a string");
  out = body[field].get<std::string>();
  return std::nullopt;
}

std::optional<RequestError> read_integer(const OrderedJson& body, const char* field, int64_t lo,
                                         int64_t hi, int64_t& out) {
  if (!present(body, field)) return std::nullopt;
  const OrderedJson& v = body[field];
  if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi) {
    return request_error(field, std::string(field) + " must be an integer in [" +
                                    std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                                    v.dump());
  }
  out = v.get<int64_t>();
  return std::nullopt;
}

// OpenAI's logit_bias: an object from token ids (as strings, below vocab_size) to biases in
// [-100, 100], at most kMaxLogitBias of them.
std::optional<RequestError> read_logit_bias(const OrderedJson& body, int64_t vocab_size,
                                            std::vector<std::pair<int64_t, float>>& out) {
  constexpr size_t kMaxLogitBias = 300;  // OpenAI's limit
  if (!present(body, "logit_bias")) return std::nullopt;
  const OrderedJson& bias = body["logit_bias"];
  if (!bias.is_object()) return request_error("logit_bias", "logit_bias must be an object");
  if (bias.size() > kMaxLogitBias) {
    return request_error("logit_bias", "logit_bias has " + std::to_string(bias.size()) +
                                           " entries; at most " + std::to_string(kMaxLogitBias));
  }
  for (const auto& [key, value] : bias.items()) {
    int64_t id = -1;
    const auto [end, error] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (error != std::errc() || end != key.data() + key.size() || id < 0) {
      return request_error("logit_bias", "logit_bias key \"" + key + "\" is not a token id");
    }
    if (id >= vocab_size) {
      return request_error("logit_bias", "logit_bias token id " + key +
                                             " outside the vocabulary [0, " +
                                             std::to_string(vocab_size) + ")");
    }
    if (!value.is_number() || !(std::fabs(value.get<double>()) <= 100.0)) {
      return request_error(
          "logit_bias",
          "logit_bias of token " + key + " must be a number in [-100, 100], got " + value.dump());
    }
    out.emplace_back(id, static_cast<float>(value.get<double>()));
  }
  return std::nullopt;
}

std::optional<RequestError> read_sampling(const OrderedJson& body, const char* max_tokens_field,
                                          const RequestLimits& limits, SamplingParams& s) {
  double temperature = 1.0, top_p = 1.0;  // OpenAI's defaults
  double presence = 0.0, frequency = 0.0;
  int64_t seed = 0;
  for (auto bad : {read_integer(body, max_tokens_field, 0, limits.max_context, s.max_tokens),
                   read_integer(body, "top_k", 0, std::numeric_limits<int32_t>::max(), s.top_k),
                   read_integer(body, "seed", 0, std::numeric_limits<int64_t>::max(), seed),
                   read_number(body, "temperature", 0.0, 2.0, temperature),
                   read_number(body, "top_p", 0.0, 1.0, top_p),
                   read_number(body, "presence_penalty", -2.0, 2.0, presence),
                   read_number(body, "frequency_penalty", -2.0, 2.0, frequency),
                   read_logit_bias(body, limits.vocab_size, s.logit_bias)}) {
    if (bad) return bad;
  }
  // Without a seed every request draws differently, as OpenAI's do (the engine's default seed
  // would give every unseeded request the same answer).
  s.seed = present(body, "seed") ? static_cast<uint64_t>(seed) : std::random_device{}();
  s.temperature = static_cast<float>(temperature);
  s.top_p = static_cast<float>(top_p);
  s.presence_penalty = static_cast<float>(presence);
  s.frequency_penalty = static_cast<float>(frequency);
  // In the engine's float: a positive double below float's smallest value becomes 0 (the fuzzer
  // sent 9e-56), which the engine would refuse as an internal error instead of a request error.
  if (!(s.top_p > 0.0f)) {
    return request_error("top_p", "top_p must be greater than 0 (and at least 1.4e-45)");
  }
  return std::nullopt;
}

}  // namespace dsv4::server
