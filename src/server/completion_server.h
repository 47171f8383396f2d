// An OpenAI- and Anthropic-compatible HTTP server over one Engine (HTTP: http_server.h):
//   GET  /health          {"status": "ok"}
//   GET  /v1/models       the one model (with max_model_len, the context, as vLLM has it);
//                         GET /v1/models/{id} that model alone
//   POST /v1/completions  completion_request.h; answers {"choices": [{"index", "text",
//                         "token_ids", "logprobs", "finish_reason"}, ...], "usage": {...}}
//   POST /v1/chat/completions  chat_request.h; the conversation through DeepSeek-V4's chat
//                         encoder (include/dsv4/chat.h); answers {"choices": [{"message":
//                         {"role", "content", "reasoning_content" (thinking mode), "tool_calls"},
//                         "finish_reason": "stop" | "length" | "tool_calls"}], "usage": {...}}.
//                         A reply the chat parser refuses (the model broke its format) comes back
//                         whole as content.
//   POST /v1/messages     Anthropic's Messages API (messages_request.h), the conversation through
//                         the same encoder; answers {"type": "message", "content": [thinking,
//                         text, tool_use blocks], "stop_reason": "end_turn" | "max_tokens" |
//                         "stop_sequence" | "tool_use", "stop_sequence", "usage": {input_tokens,
//                         output_tokens}}; streamed as Anthropic's named events (message_start,
//                         content_block_*, message_delta, message_stop); errors as
//                         {"type": "error", "error": {"type", "message"}}.
//   POST /v1/messages/count_tokens  {"input_tokens": N} of the encoded conversation.
//   POST /tokenize, /detokenize  text <-> the model's ids (tokenize_request.h), as vLLM has them.
//   GET  /metrics         the engine's and the server's counts, Prometheus' text format
//                         (server_metrics.h).
// With "stream": true either answer comes as server-sent events instead (stream_choices.h): one
// chunk object per event ("text_completion" / "chat.completion.chunk", each with the logprobs of
// its tokens when asked), data: [DONE] last.
// Every refusal is OpenAI's {"error": {"message", "type", "param", "code"}}: 400 for a bad
// request (naming the field), 401 without the API key (when one is set), 404 for an unknown path,
// 408 for a request that came too slowly, 413 for a body over the limit, 503 when a sequence's
// caches do not fit in memory (retry), 500 when the engine or the tokenizer fails; once a stream
// has begun, a failure is an error event before [DONE]. Requests are served concurrently, each
// on a worker thread, and the engine steps them together (continuous batching,
// runtime/scheduler.h); a client that leaves, streamed or not, cancels its generation within a
// step.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "dsv4/engine.h"
#include "dsv4/status.h"
#include "dsv4/tokenizer.h"
#include "server/http_server.h"

namespace dsv4::server {

struct ServerOptions {
  std::string model_name = "dsv4";  // reported by /v1/models and in every response
  int64_t max_context = 4096;       // the engine's; bounds max_tokens
  // Limits, deadlines and threads of the HTTP layer (http_server.h). Each request that
  // generates waits for its answer on a worker: keep n_workers above the engine's max_batch.
  HttpOptions http;
  bool access_log = false;  // a line on stderr for every request answered (server_metrics.h)
  // Non-empty: every route but /health and /metrics answers 401 unless "Authorization: Bearer
  // <api_key>" (the scheme in any case) or (as Anthropic's clients send it) "x-api-key:
  // <api_key>".
  std::string api_key;
};

class CompletionServer {
 public:
  // `tokenizer` may be null: then only token-id prompts are served, "text" is empty and chat
  // is refused.
  CompletionServer(Engine& engine, const Tokenizer* tokenizer, ServerOptions options);
  ~CompletionServer();
  CompletionServer(const CompletionServer&) = delete;
  CompletionServer& operator=(const CompletionServer&) = delete;

  // As HttpServer's (http_server.h), with options.http: bind `host`:`port` (0: any free port,
  // returned), serve until stop() and its drain are over, and stop from any thread but a
  // signal handler.
  Result<int> bind(const std::string& host, int port);
  Status serve();
  void stop();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace dsv4::server
