// What the server's endpoint files share (completion_server.cpp: the OpenAI routes and the
// server itself; messages_endpoint.cpp: Anthropic's): the server's state and the ways they
// answer (JSON bodies and errors in either API's shape, server-sent event streams). Internal to
// server/; completion_server.h is the interface.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dsv4/chat.h"
#include "dsv4/engine.h"
#include "dsv4/structured_output.h"
#include "format/json.h"
#include "server/completion_request.h"
#include "server/completion_server.h"
#include "server/generated_text.h"
#include "server/http_server.h"
#include "server/output_constraint.h"
#include "server/request_fields.h"
#include "server/server_metrics.h"
#include "server/stream_choices.h"

namespace dsv4::server {

// Whose API a route speaks, which decides the shape of its errors and of its stream.
enum class Api { kOpenAi, kAnthropic };

void send_json(HttpResponse& res, int status, const format::Json& body);

// An error body in `api`'s shape (OpenAI's names the field `param`).
void send_error(HttpResponse& res, int status, const std::string& message,
                const std::string& param = "", Api api = Api::kOpenAi);

// The engine refuses ids outside the vocabulary and prompts over the context: the caller's
// mistake, in the prompt's field. Memory running out (a sequence's caches) is 503, worth a
// retry once others finish; anything else is the server's.
void send_engine_error(HttpResponse& res, const Status& status, const char* param, Api api);

// A streamed answer: what to generate, the chunk object's fields, and its choices.
struct Stream {
  std::vector<int64_t> prompt;
  SamplingParams sampling;
  StreamOptions options;
  format::Json envelope;  // id, object, created, model: the same in every chunk
  std::vector<std::unique_ptr<StreamChoices>> choices;  // a request's n, choice i at index i
  Api api = Api::kOpenAi;  // Anthropic's choices are whole events: no envelope, no [DONE]
  int64_t logprobs = -1;   // alternatives of each token's logprob; -1: none

  // Each choice as a chunk (or an Anthropic event); false once the client is gone.
  bool send(ResponseStream& sink, const std::vector<format::Json>& list) const;
  // A failure once the status went out: an error event of the API's kind.
  bool send_error(ResponseStream& sink, const std::string& message) const;
  // After the last choice: OpenAI's usage chunk (when asked and all went well) and data:
  // [DONE]; Anthropic's message_stop was the last event already.
  bool end(ResponseStream& sink, bool succeeded, int64_t n_generated) const;
};

// One choice's generation and its text (cut at a stop string when `stop_string`).
struct Answer {
  Generation out;
  std::string text;
  bool stop_string = false;
};

// A request's n choices: the same request, each drawn with its own seed (seed + index).
std::vector<GenerateRequest> choices_of(const GenerateRequest& request, size_t n);

// A chat reply's stop strings: the request's, and where a tool call would begin when the
// conversation allows none (tool_choice "none").
std::vector<std::string> reply_stops(std::vector<std::string> stop, const Conversation& c);

struct CompletionServer::State {
  // A route's work: the request in, the response out.
  using Handler = std::function<void(const HttpRequest& req, HttpResponse& res)>;
  struct Route {
    Handler handler;
    bool at_once = false;  // answered on the event loop (http_server.h): quick and never blocks
  };

  Engine& engine;
  const Tokenizer* tokenizer;
  ServerOptions options;
  std::map<std::pair<std::string, std::string>, Route> routes_by_path;  // (method, path)
  std::atomic<int64_t> next_id{0};
  // /v1/models' "created": when the server started, in Unix seconds.
  const int64_t created = std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
  ServerMetrics metrics;
  // The vocabulary's bytes for structured outputs (with a tokenizer only).
  std::optional<ConstraintVocabulary> vocabulary;
  std::unique_ptr<HttpServer> http;  // last: its threads use the above

  State(Engine& e, const Tokenizer* t, ServerOptions o)
      : engine(e), tokenizer(t), options(std::move(o)), vocabulary(output_vocabulary(e, t)) {}
  void routes();
  // A route, registered with the metrics' labels too.
  void get(const char* path, Handler handler, bool at_once = false);
  void post(const char* path, Handler handler);
  // The route for `req`, or null (404); a GET /v1/models/{id} is the model route's.
  const Route* route_of(const HttpRequest& req) const;
  // The label /metrics counts `req` under.
  std::string metrics_label(const HttpRequest& req) const;
  bool authorized(const HttpRequest& req) const;
  // What the HTTP layer calls: route (with the key check and 404), and the access log.
  void handle(const HttpRequest& req, HttpResponse& res) const;
  void answered(const HttpRequest& req, int status, size_t body_bytes, Clock::duration took);
  void model(const HttpRequest& req, HttpResponse& res) const;
  void complete(const HttpRequest& req, HttpResponse& res);
  void chat(const HttpRequest& req, HttpResponse& res);
  // Anthropic's POST /v1/messages and /v1/messages/count_tokens.
  void messages(const HttpRequest& req, HttpResponse& res);
  void count_tokens(const HttpRequest& req, HttpResponse& res);
  void tokenize(const HttpRequest& req, HttpResponse& res) const;
  void detokenize(const HttpRequest& req, HttpResponse& res) const;
  // The prompt's ids, or the error already sent.
  std::optional<std::vector<int64_t>> prompt_ids(const Prompt& prompt, HttpResponse& res) const;
  std::optional<std::vector<int64_t>> chat_prompt_ids(const Conversation& conversation,
                                                      HttpResponse& res,
                                                      Api api = Api::kOpenAi) const;
  // The engine's answers to `requests` (a request's n choices) and their texts, read through
  // `texts` (one per request, or none), which end a generation at a stop string; or the error
  // already sent; `param` names the prompt's field.
  std::optional<std::vector<Answer>> generate(std::vector<GenerateRequest> requests,
                                              std::vector<GeneratedText>& texts, const char* param,
                                              HttpResponse& res, Api api = Api::kOpenAi);
  // The token whose text a completion leaves out: a formatted reply is the format's text alone,
  // so its eos adds none; -1 for none.
  int64_t hidden_text_token(const CompletionRequest& request) const;
  // The echoed prompt's text: the one given, or its ids decoded (empty without echo).
  Result<std::string> echoed_text(bool echo, const Prompt& given,
                                  const std::vector<int64_t>& ids) const;
  // A completion's choice `index`: its text (after `prompt_text`, the echoed prompt's), ids,
  // logprobs when asked (of the echoed prompt's tokens too) and finish reason.
  format::Json completion_choice(const CompletionRequest& request,
                                 const std::vector<int64_t>& prompt, const std::string& prompt_text,
                                 const Answer& answer, size_t index) const;
  // What the request parsers check against: the context and the engine's vocabulary.
  RequestLimits limits() const;
  // A token's text in logprobs: what it decodes to alone, or "token_id:N" without a tokenizer.
  std::string token_text(int64_t id) const;
  // token_text for a stream's choices when `logprobs` asks for them (>= 0), else null.
  TokenText logprob_text(int64_t logprobs) const;
  // Answers with server-sent events: the request was checked, so the status is 200 and what
  // goes wrong from here is an error event.
  void stream(HttpResponse& res, std::shared_ptr<Stream> s);
  // Runs `s` in the engine, its events into `sink`, until done or `client_gone`; false when the
  // client left.
  bool run_stream(Stream& s, ResponseStream& sink,
                  const std::shared_ptr<const std::atomic<bool>>& client_gone);
  // The envelope of a response's chunks.
  format::Json chunk_envelope(const std::string& id, const char* object) const;
  // Sends the engine's refusal of `request` and returns true, or returns false when it is fine.
  bool refused(const GenerateRequest& request, const char* param, HttpResponse& res,
               Api api = Api::kOpenAi) const;
};

}  // namespace dsv4::server
