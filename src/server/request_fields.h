// What the OpenAI-style request bodies have in common, checked one way for all endpoints: the
// error shape, the sampling fields (max_tokens, temperature, top_p, top_k, seed, penalties,
// logit_bias) and the fields
// that would change the answer and are not implemented, which are refused unless they ask for
// nothing; whether to stream. Bodies are read with their keys in order (the chat endpoint's tool
// schemas keep it).
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "dsv4/engine.h"
#include "format/json.h"

namespace dsv4::server {

// What a request may ask for, from the engine: max_tokens up to the context, token ids (in
// logit_bias) below the vocabulary size.
struct RequestLimits {
  int64_t max_context = 0;
  int64_t vocab_size = 0;
};

// A refused request: what is wrong and which field (empty for the body as a whole), in the
// shape of OpenAI's {"error": {"message", "param"}}.
struct RequestError {
  std::string message;
  std::string param;
};

RequestError request_error(std::string param, std::string message);

// The body as a JSON object, or the error.
std::variant<format::OrderedJson, RequestError> parse_request_body(std::string_view body);

// `field` is in `body` and not null.
bool present(const format::OrderedJson& body, const char* field);

// The first field of `object` that is not in `known`, as an error; `path` names the object
// inside the body ("messages[2]"), empty for the body itself.
std::optional<RequestError> refuse_unknown(const format::OrderedJson& object,
                                           std::initializer_list<std::string_view> known,
                                           const std::string& path = "");
// The same for a body whose known fields are in two lists: those several endpoints share
// (openai_fields.h) and the endpoint's own.
std::optional<RequestError> refuse_unknown(const format::OrderedJson& object,
                                           std::span<const std::string_view> shared,
                                           std::initializer_list<std::string_view> own);

// OpenAI's "stream" (the answer as server-sent events) and "stream_options".
struct StreamOptions {
  bool enabled = false;        // "stream": true
  bool include_usage = false;  // "stream_options": {"include_usage": true}: a last usage chunk
};

// stream (true or false) and stream_options (an object, with stream true only) into `out`.
std::optional<RequestError> read_stream(const format::OrderedJson& body, StreamOptions& out);

// model and user must be strings (one model per server: both are ignored).
std::optional<RequestError> check_model_and_user(const format::OrderedJson& body);

// A JSON array of token ids (integers >= 0; the vocabulary is the engine's to check), not empty;
// `field` names it in errors.
std::variant<std::vector<int64_t>, RequestError> token_ids(const format::OrderedJson& array,
                                                           const char* field);

// The most choices "n" may ask for.
inline constexpr int64_t kMaxChoices = 16;

// OpenAI's "n" (choices of one prompt, 1 ... kMaxChoices) into `n`.
std::optional<RequestError> read_choices(const format::OrderedJson& body, int64_t& n);

// The longest stop string, in bytes. Neither API documents one; holding back a reply's tail that
// may begin a stop string costs work in the string's length for every byte streamed, so a
// megabyte-long one would let a request slow its own and its neighbours' replies.
inline constexpr size_t kMaxStopBytes = 4096;

// OpenAI's "stop" (or Anthropic's "stop_sequences": `field`) into `out`: a string, or an array
// of at most `max_stops` (OpenAI's limit is 4); each non-empty and at most kMaxStopBytes.
// Absent or null: none.
std::optional<RequestError> read_stop(const format::OrderedJson& body,
                                      std::vector<std::string>& out, const char* field = "stop",
                                      size_t max_stops = 4);

// "path[i]", naming an array's element in errors.
std::string indexed(const std::string& path, size_t i);

// `object[field]` (named path.field, or field when path is empty) as a string into `out`;
// absent or null is an error only when `required`.
std::optional<RequestError> read_text(const format::OrderedJson& object, const std::string& path,
                                      const char* field, bool required, std::string& out);

// `object[field]` (named as read_text names it) as true or false into `out`, left as is when
// absent or null.
std::optional<RequestError> read_bool(const format::OrderedJson& object, const std::string& path,
                                      const char* field, bool& out);

// body[field], when present, must be an array of objects: `read` takes each with its path
// ("field[i]"); the first refusal is the answer.
std::optional<RequestError> read_objects(
    const format::OrderedJson& body, const char* field,
    const std::function<std::optional<RequestError>(const format::OrderedJson& object,
                                                    const std::string& path)>& read);

// An error naming `path` unless `value` is an object.
std::optional<RequestError> expect_object(const format::OrderedJson& value,
                                          const std::string& path);

// `field` as a string in `body` (left as is when absent); an error when it is another type.
std::optional<RequestError> read_string(const format::OrderedJson& body, const char* field,
                                        std::string& out);

// The most alternatives logprobs may ask for (vLLM's default limit).
inline constexpr int64_t kMaxLogprobs = 20;

// `field` as an integer in [lo, hi] in `body` (left as is when absent).
std::optional<RequestError> read_integer(const format::OrderedJson& body, const char* field,
                                         int64_t lo, int64_t hi, int64_t& out);

// The token limit (the field `max_tokens_field`, at most the context), temperature, top_p,
// top_k, seed, presence_penalty, frequency_penalty and logit_bias (ids in the vocabulary) into
// `s`, OpenAI's defaults where absent (temperature 1, top_p 1; no seed: a fresh random one).
std::optional<RequestError> read_sampling(const format::OrderedJson& body,
                                          const char* max_tokens_field, const RequestLimits& limits,
                                          SamplingParams& s);

}  // namespace dsv4::server
