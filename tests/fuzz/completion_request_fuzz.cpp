// libFuzzer target: any byte string as the body of POST /v1/completions (and of /tokenize and
// /detokenize, whose parsers share its fields' readers). Each parser must accept it with values
// in range or refuse it naming a field; never crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/completion_request.h"
#include "server/tokenize_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const auto detokenize = dsv4::server::parse_detokenize_request(body);
  if (const auto* ids = std::get_if<dsv4::server::DetokenizeRequest>(&detokenize)) {
    for (const int64_t id : ids->tokens) {
      if (id < 0) std::abort();
    }
  }
  (void)dsv4::server::parse_tokenize_request(body);
  const auto parsed = dsv4::server::parse_completion_request(body, {4096, 640});
  const auto* request = std::get_if<dsv4::server::CompletionRequest>(&parsed);
  if (request == nullptr) return 0;
  const dsv4::SamplingParams& s = request->sampling;
  if (s.max_tokens < 0 || s.max_tokens > 4096 || s.top_k < 0 || !(s.temperature >= 0.0f) ||
      s.temperature > 2.0f || !(s.top_p > 0.0f) || s.top_p > 1.0f) {
    std::abort();
  }
  for (const auto& [id, bias] : s.logit_bias) {
    if (id < 0 || id >= 640 || !(bias >= -100.0f && bias <= 100.0f)) std::abort();
  }
  // stream_options are refused unless streaming; echo with it.
  if (request->stream.include_usage && !request->stream.enabled) std::abort();
  if (request->stream.enabled && request->echo) std::abort();
  if (request->n < 1 || request->n > 16 || request->logprobs > 20 || request->stop.size() > 4) {
    std::abort();
  }
  return 0;
}
