// The body of POST /v1/completions (OpenAI's legacy completions API), checked field by field.
// Supported: prompt (a string, which needs the checkpoint's tokenizer, or an array of token
// ids; or a list of either, each answered with its own n choices, not streamed), max_tokens,
// temperature, top_p, seed, top_k (an extension, as vLLM has it), response_format and vLLM's
// structured_outputs (server/output_format.h), presence_penalty,
// frequency_penalty, logit_bias, stop, n, logprobs (streamed too, each chunk with its tokens'),
// echo (not with stream), stream and stream_options; model and user are accepted and ignored (one
// model per server). Fields that would change the answer and are not implemented (suffix, best_of)
// are refused, never ignored; unknown fields are refused too, so a typo is not silently dropped.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "dsv4/engine.h"
#include "dsv4/structured_output.h"
#include "server/request_fields.h"

namespace dsv4::server {

using Prompt = std::variant<std::string, std::vector<int64_t>>;  // text or token ids

struct CompletionRequest {
  // One or more (OpenAI's list of prompts): prompt p's choice i is choice p * n + i.
  std::vector<Prompt> prompts;
  SamplingParams sampling;
  StreamOptions stream;
  std::vector<std::string> stop;       // stop strings (stop_strings.h)
  int64_t logprobs = -1;               // each token's logprob and this many alternatives; -1: none
  bool echo = false;                   // the prompt is part of the answer (its text and logprobs)
  int64_t n = 1;                       // choices, each drawn with its own seed (seed + index)
  std::optional<OutputFormat> format;  // the text the reply must be (structured outputs)
};

// Parses and checks `body` within the engine's `limits`.
std::variant<CompletionRequest, RequestError> parse_completion_request(std::string_view body,
                                                                       const RequestLimits& limits);

}  // namespace dsv4::server
