#include "server/completion_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>

#include "dsv4/chat.h"
#include "format/json.h"
#include "server/chat_request.h"
#include "server/completion_request.h"
#include "server/generated_text.h"
#include "server/openai_json.h"
#include "server/server_metrics.h"
#include "server/server_state.h"
#include "server/stream_choices.h"
#include "server/tokenize_request.h"

namespace dsv4::server {
namespace {

using format::Json;

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The OpenAI assistant message for a reply; `id` is the response's.
Json assistant_message(const ChatReply& reply, ThinkingMode thinking, const std::string& id) {
  Json message = {{"role", "assistant"}, {"content", reply.content}};
  if (thinking == ThinkingMode::kThinking) message["reasoning_content"] = reply.reasoning_content;
  if (!reply.tool_calls.empty()) message["tool_calls"] = tool_calls_json(reply.tool_calls, id);
  return message;
}

// What names choice i's tool calls: the response's id and, past the first choice, the index.
std::string choice_id(const std::string& id, size_t i) {
  return i == 0 ? id : id + "." + std::to_string(i);
}

// {"prompt_tokens", "completion_tokens", "total_tokens"}: the prompt once, every choice's tokens.
Json answers_usage(int64_t n_prompt, const std::vector<Answer>& answers) {
  int64_t n_completion = 0;
  for (const Answer& a : answers) n_completion += static_cast<int64_t>(a.out.tokens.size());
  return usage_json(n_prompt, n_completion);
}

}  // namespace

std::optional<std::vector<int64_t>> CompletionServer::State::prompt_ids(
    const CompletionRequest& request, httplib::Response& res) const {
  if (const auto* ids = std::get_if<std::vector<int64_t>>(&request.prompt)) return *ids;
  if (tokenizer == nullptr) {
    send_error(res, 400, "this server has no tokenizer.json: send the prompt as token ids",
               "prompt");
    return std::nullopt;
  }
  Result<std::vector<int64_t>> ids = tokenizer->encode(std::get<std::string>(request.prompt));
  if (!ids.ok()) {
    send_error(res, 400, ids.status().message(), "prompt");
    return std::nullopt;
  }
  return *std::move(ids);
}

void CompletionServer::State::complete(const httplib::Request& req, httplib::Response& res) {
  auto parsed = parse_completion_request(req.body, limits());
  if (const auto* bad = std::get_if<RequestError>(&parsed)) {
    return send_error(res, 400, bad->message, bad->param);
  }
  CompletionRequest& request = std::get<CompletionRequest>(parsed);
  if (!constrain_output(vocabulary, request.format, request.sampling, res, Api::kOpenAi)) return;
  std::optional<std::vector<int64_t>> prompt = prompt_ids(request, res);
  if (!prompt) return;
  if (tokenizer == nullptr && !request.stop.empty()) {
    return send_error(res, 400, "this server has no tokenizer.json, which stop strings need",
                      "stop");
  }
  const Result<std::string> prompt_text = echoed_text(request, *prompt);
  if (!prompt_text.ok()) return send_error(res, 500, prompt_text.status().message());
  if (request.stream.enabled) {
    if (refused({*prompt, request.sampling}, "prompt", res)) return;
    const std::string id = "cmpl-" + std::to_string(next_id++);
    std::vector<std::unique_ptr<StreamChoices>> choices;
    for (int64_t i = 0; i < request.n; ++i) {
      choices.push_back(completion_choices(tokenizer, request.stop, static_cast<size_t>(i),
                                           logprob_text(request.logprobs), *prompt_text,
                                           hidden_text_token(request)));
    }
    return stream(
        res, std::make_shared<Stream>(Stream{*std::move(prompt), request.sampling, request.stream,
                                             chunk_envelope(id, "text_completion"),
                                             std::move(choices), Api::kOpenAi, request.logprobs}));
  }
  GenerateRequest base{*prompt, request.sampling};
  base.logprobs = request.logprobs;
  base.prompt_logprobs = request.echo && request.logprobs >= 0;
  std::vector<GeneratedText> texts;
  for (int64_t i = 0; tokenizer != nullptr && i < request.n; ++i)
    texts.emplace_back(*tokenizer, request.stop, hidden_text_token(request));
  const auto answers =
      generate(choices_of(base, static_cast<size_t>(request.n)), texts, "prompt", res);
  if (!answers) return;
  Json choices = Json::array();
  for (size_t i = 0; i < answers->size(); ++i)
    choices.push_back(completion_choice(request, *prompt, *prompt_text, (*answers)[i], i));
  send_json(res, 200,
            {{"id", "cmpl-" + std::to_string(next_id++)},
             {"object", "text_completion"},
             {"created", unix_seconds()},
             {"model", options.model_name},
             {"choices", std::move(choices)},
             {"usage", answers_usage(static_cast<int64_t>(prompt->size()), *answers)}});
}

int64_t CompletionServer::State::hidden_text_token(const CompletionRequest& request) const {
  return request.format ? engine.eos_token_id() : -1;
}

Result<std::string> CompletionServer::State::echoed_text(const CompletionRequest& request,
                                                         const std::vector<int64_t>& prompt) const {
  if (!request.echo) return std::string();
  if (const auto* given = std::get_if<std::string>(&request.prompt)) return *given;
  if (tokenizer == nullptr) return std::string();
  return tokenizer->decode(prompt);
}

Json CompletionServer::State::completion_choice(const CompletionRequest& request,
                                                const std::vector<int64_t>& prompt,
                                                const std::string& prompt_text,
                                                const Answer& answer, size_t index) const {
  const Generation& out = answer.out;
  Json choice = {{"index", index},
                 {"text", prompt_text + answer.text},
                 {"token_ids", out.tokens},
                 {"logprobs", nullptr},
                 {"finish_reason", finish_reason(out, answer.stop_string)}};
  if (request.logprobs < 0) return choice;
  std::vector<int64_t> tokens;
  std::vector<const TokenLogprob*> logprobs;
  if (request.echo) {
    tokens = prompt;
    logprobs.push_back(nullptr);  // the first prompt token has no context
    for (const TokenLogprob& lp : out.prompt_logprobs) logprobs.push_back(&lp);
  }
  tokens.insert(tokens.end(), out.tokens.begin(), out.tokens.end());
  for (const TokenLogprob& lp : out.logprobs) logprobs.push_back(&lp);
  choice["logprobs"] =
      completion_logprobs_json(tokens, logprobs, [this](int64_t id) { return token_text(id); });
  return choice;
}

RequestLimits CompletionServer::State::limits() const {
  return {options.max_context, engine.vocab_size()};
}

TokenText CompletionServer::State::logprob_text(int64_t logprobs) const {
  if (logprobs < 0) return nullptr;
  return [this](int64_t id) { return token_text(id); };
}

std::string CompletionServer::State::token_text(int64_t id) const {
  if (tokenizer == nullptr) return "token_id:" + std::to_string(id);
  Result<std::string> text = tokenizer->decode({id});
  return text.ok() ? *std::move(text) : "token_id:" + std::to_string(id);
}

bool CompletionServer::State::refused(const GenerateRequest& request, const char* param,
                                      httplib::Response& res, Api api) const {
  const Status checked = engine.check(request);
  if (!checked.ok()) send_engine_error(res, checked, param, api);
  return !checked.ok();
}

std::optional<std::vector<Answer>> CompletionServer::State::generate(
    std::vector<GenerateRequest> requests, std::vector<GeneratedText>& texts, const char* param,
    httplib::Response& res, Api api) {
  std::vector<Answer> answers(requests.size());
  Status unreadable = ok_status();  // an id the tokenizer does not know
  for (size_t i = 0; i < texts.size(); ++i) {
    requests[i].on_token = [&, i](int64_t token) {
      Result<std::string> piece = texts[i].add(token);
      if (!piece.ok()) unreadable = piece.status();
      if (piece.ok()) answers[i].text += *piece;
      return piece.ok() && !texts[i].stopped();
    };
  }
  Result<std::vector<Generation>> out = engine.generate_batch(requests);
  if (!out.ok()) {
    send_engine_error(res, out.status(), param, api);
    return std::nullopt;
  }
  for (size_t i = 0; i < answers.size(); ++i) {
    answers[i].out = std::move((*out)[i]);
    if (i >= texts.size() || !unreadable.ok()) continue;
    Result<std::string> rest = texts[i].finish();
    if (rest.ok()) answers[i].text += *rest;
    if (!rest.ok()) unreadable = rest.status();
    answers[i].stop_string = texts[i].stopped();
  }
  if (!unreadable.ok()) {
    send_error(res, 500, unreadable.message(), "", api);
    return std::nullopt;
  }
  return answers;
}

std::optional<std::vector<int64_t>> CompletionServer::State::chat_prompt_ids(
    const Conversation& conversation, httplib::Response& res, Api api) const {
  if (tokenizer == nullptr) {
    send_error(res, 400, "this server has no tokenizer.json, which chat needs", "messages", api);
    return std::nullopt;
  }
  Result<std::string> prompt = encode_chat(conversation);
  Result<std::vector<int64_t>> ids =
      prompt.ok() ? tokenize_chat_prompt(*tokenizer, *prompt) : prompt.status();
  if (!ids.ok()) {
    send_error(res, 400, ids.status().message(), "messages", api);
    return std::nullopt;
  }
  return *std::move(ids);
}

void CompletionServer::State::chat(const httplib::Request& req, httplib::Response& res) {
  auto parsed = parse_chat_request(req.body, limits());
  if (const auto* bad = std::get_if<RequestError>(&parsed)) {
    return send_error(res, 400, bad->message, bad->param);
  }
  ChatRequest& request = std::get<ChatRequest>(parsed);
  if (!constrain_output(vocabulary, request.format, request.sampling, res, Api::kOpenAi)) return;
  std::optional<std::vector<int64_t>> prompt = chat_prompt_ids(request.conversation, res);
  if (!prompt) return;
  if (!request.max_tokens_given) {
    // The rest of the context (the engine refuses a prompt that fills it already).
    request.sampling.max_tokens =
        std::max<int64_t>(options.max_context - static_cast<int64_t>(prompt->size()), 0);
  }
  const std::string id = std::to_string(next_id++);
  if (request.stream.enabled) {
    if (refused({*prompt, request.sampling}, "messages", res)) return;
    std::vector<std::unique_ptr<StreamChoices>> choices;
    for (int64_t i = 0; i < request.n; ++i) {
      choices.push_back(chat_choices(*tokenizer, request.conversation,
                                     choice_id(id, static_cast<size_t>(i)), engine.eos_token_id(),
                                     reply_stops(request.stop, request.conversation),
                                     static_cast<size_t>(i), logprob_text(request.logprobs)));
    }
    return stream(res, std::make_shared<Stream>(
                           Stream{*std::move(prompt), request.sampling, request.stream,
                                  chunk_envelope("chatcmpl-" + id, "chat.completion.chunk"),
                                  std::move(choices), Api::kOpenAi, request.logprobs}));
  }
  GenerateRequest base{*prompt, request.sampling};
  base.logprobs = request.logprobs;
  std::vector<GeneratedText> texts;
  for (int64_t i = 0; i < request.n; ++i)
    texts.emplace_back(*tokenizer, reply_stops(request.stop, request.conversation),
                       engine.eos_token_id());
  const auto answers =
      generate(choices_of(base, static_cast<size_t>(request.n)), texts, "messages", res);
  if (!answers) return;
  Json choices = Json::array();
  for (size_t i = 0; i < answers->size(); ++i) {
    const Answer& answer = (*answers)[i];
    // The reply reached its end of sentence unless a stop string cut it first.
    const ChatReply reply = read_reply(request.conversation, answer.text,
                                       answer.out.stopped_at_eos && !answer.stop_string);
    const std::string call_id = choice_id(id, i);
    Json choice = {{"index", i},
                   {"message", assistant_message(reply, request.conversation.thinking, call_id)},
                   {"logprobs", nullptr},
                   {"finish_reason", chat_finish_reason(reply, answer.out, answer.stop_string)}};
    if (request.logprobs >= 0) {
      choice["logprobs"] = chat_logprobs_json(answer.out.logprobs,
                                              [this](int64_t token) { return token_text(token); });
    }
    choices.push_back(std::move(choice));
  }
  send_json(res, 200,
            {{"id", "chatcmpl-" + id},
             {"object", "chat.completion"},
             {"created", unix_seconds()},
             {"model", options.model_name},
             {"choices", std::move(choices)},
             {"usage", answers_usage(static_cast<int64_t>(prompt->size()), *answers)}});
}

void CompletionServer::State::tokenize(const httplib::Request& req, httplib::Response& res) const {
  auto parsed = parse_tokenize_request(req.body);
  if (const auto* bad = std::get_if<RequestError>(&parsed)) {
    return send_error(res, 400, bad->message, bad->param);
  }
  if (tokenizer == nullptr) return send_error(res, 400, "this server has no tokenizer.json");
  const TokenizeRequest& request = std::get<TokenizeRequest>(parsed);
  Result<std::vector<int64_t>> ids = tokenizer->encode(request.prompt, request.add_special_tokens);
  if (!ids.ok()) return send_error(res, 400, ids.status().message(), "prompt");
  send_json(res, 200,
            {{"tokens", *ids}, {"count", ids->size()}, {"max_model_len", options.max_context}});
}

void CompletionServer::State::detokenize(const httplib::Request& req,
                                         httplib::Response& res) const {
  auto parsed = parse_detokenize_request(req.body);
  if (const auto* bad = std::get_if<RequestError>(&parsed)) {
    return send_error(res, 400, bad->message, bad->param);
  }
  if (tokenizer == nullptr) return send_error(res, 400, "this server has no tokenizer.json");
  Result<std::string> text = tokenizer->decode(std::get<DetokenizeRequest>(parsed).tokens);
  if (!text.ok()) return send_error(res, 400, text.status().message(), "tokens");
  send_json(res, 200, {{"prompt", *text}});
}

Json CompletionServer::State::chunk_envelope(const std::string& id, const char* object) const {
  return {
      {"id", id}, {"object", object}, {"created", unix_seconds()}, {"model", options.model_name}};
}

void CompletionServer::State::stream(httplib::Response& res, std::shared_ptr<Stream> s) {
  // httplib calls the provider after this handler returns, on the same worker thread, and
  // again until sink.done(); run_stream does all in one call. A false return (the client left)
  // makes httplib drop the connection.
  res.set_chunked_content_provider("text/event-stream", [this, s](size_t, httplib::DataSink& sink) {
    return run_stream(*s, sink);
  });
}

bool CompletionServer::State::run_stream(Stream& s, httplib::DataSink& sink) {
  for (const auto& choices : s.choices) {
    if (!s.send(sink, choices->start())) return false;
  }
  bool connected = true;
  Status failed = ok_status();  // a chunk that could not be made (an id the tokenizer lacks)
  GenerateRequest base{s.prompt, s.sampling};
  base.logprobs = s.logprobs;
  std::vector<GenerateRequest> requests = choices_of(base, s.choices.size());
  std::vector<std::optional<TokenLogprob>> logprob(requests.size());  // of the token drawn next
  for (size_t i = 0; i < requests.size(); ++i) {
    StreamChoices& choices = *s.choices[i];
    if (s.logprobs >= 0) {
      requests[i].on_logprob = [&, i](const TokenLogprob& lp) { logprob[i] = lp; };
    }
    requests[i].on_token = [&, i](int64_t token) {
      if (!connected || !failed.ok()) return false;
      const std::optional<TokenLogprob> lp = std::exchange(logprob[i], std::nullopt);
      Result<std::vector<Json>> chunk = choices.add(token, lp ? &*lp : nullptr);
      if (!chunk.ok()) failed = chunk.status();
      connected = chunk.ok() && s.send(sink, *chunk);
      return connected && !choices.stopped();  // a stop string ends generation too
    };
  }
  Result<std::vector<Generation>> out = engine.generate_batch(requests);
  if (failed.ok() && !out.ok()) failed = out.status();
  if (!connected && failed.ok()) return false;  // the client left: generation stopped
  int64_t n_generated = 0;
  for (size_t i = 0; i < s.choices.size() && failed.ok(); ++i) {
    Result<std::vector<Json>> last = s.choices[i]->finish((*out)[i]);
    if (!last.ok()) {
      failed = last.status();
      break;
    }
    if (!s.send(sink, *last)) return false;
    n_generated += static_cast<int64_t>((*out)[i].tokens.size());
  }
  // The status went out with the first event: an error is an event of its own.
  if (!failed.ok() && !s.send_error(sink, failed.message())) return false;
  if (!s.end(sink, failed.ok(), n_generated)) return false;
  sink.done();
  return true;
}

// The listening socket's options in place of httplib's: SO_REUSEADDR, so a restarted server
// rebinds its port at once, but not the SO_REUSEPORT httplib sets, with which a second server
// binds a port in use and silently takes part of its connections. Keeps the socket, whose
// backlog bind() then raises.
void CompletionServer::State::listen_socket_options() {
  http.set_socket_options([this](socket_t sock) {
    const int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    listening = sock;  // the last socket offered is the one that bound
  });
}

// Every answered request counts for /metrics, and goes to stderr with the access log on. The
// time runs from routing (a thread handles one request at a time) to the response's last byte.
// With an API key, the /v1/ routes need "Authorization: Bearer <key>" (as OpenAI's and vLLM's
// servers) or "x-api-key: <key>" (Anthropic's); /health, /metrics and the tokenizer routes stay
// open. The key is compared in time
// independent of where it differs.
bool CompletionServer::State::authorized(const httplib::Request& req) const {
  if (options.api_key.empty() || !req.path.starts_with("/v1/")) return true;
  const auto equal = [](const std::string& given, const std::string& want) {
    if (given.size() != want.size()) return false;
    unsigned char differ = 0;
    for (size_t i = 0; i < want.size(); ++i)
      differ |= static_cast<unsigned char>(given[i] ^ want[i]);
    return differ == 0;
  };
  // Anthropic's clients send the key as x-api-key.
  return equal(req.get_header_value("Authorization"), "Bearer " + options.api_key) ||
         equal(req.get_header_value("x-api-key"), options.api_key);
}

void CompletionServer::State::count_requests() {
  static thread_local std::chrono::steady_clock::time_point started;
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    started = std::chrono::steady_clock::now();
    if (authorized(req)) return httplib::Server::HandlerResponse::Unhandled;
    const std::string message =
        "a valid API key is needed: Authorization: Bearer <key>, or x-api-key";
    send_error(res, 401, message, "",
               req.path.starts_with("/v1/messages") ? Api::kAnthropic : Api::kOpenAi);
    return httplib::Server::HandlerResponse::Handled;
  });
  http.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    metrics.record(req.path, res.status);
    if (!options.access_log) return;
    const std::string line =
        access_log_line(req.method, metrics.route_of(req.path), res.status, res.body.size(),
                        std::chrono::steady_clock::now() - started);
    std::fprintf(stderr, "dsv4-serve: %s\n", line.c_str());
  });
}

void CompletionServer::State::get(const char* path, httplib::Server::Handler handler) {
  metrics.add_route(path);
  http.Get(path, std::move(handler));
}

void CompletionServer::State::post(const char* path, httplib::Server::Handler handler) {
  metrics.add_route(path);
  http.Post(path, std::move(handler));
}

void CompletionServer::State::routes() {
  http.set_payload_max_length(options.max_body_bytes);
  http.new_task_queue = [n = options.n_threads] { return new httplib::ThreadPool(n); };
  listen_socket_options();
  get("/health", [](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, {{"status", "ok"}});
  });
  get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.prometheus(engine.stats()), "text/plain; version=0.0.4");
  });
  count_requests();
  get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    // max_model_len as vLLM reports it: clients size their requests by it.
    const Json model = {{"id", options.model_name},
                        {"object", "model"},
                        {"owned_by", "dsv4"},
                        {"max_model_len", options.max_context}};
    send_json(res, 200, {{"object", "list"}, {"data", {model}}});
  });
  post("/v1/completions",
       [this](const httplib::Request& req, httplib::Response& res) { complete(req, res); });
  post("/v1/chat/completions",
       [this](const httplib::Request& req, httplib::Response& res) { chat(req, res); });
  post("/v1/messages",
       [this](const httplib::Request& req, httplib::Response& res) { messages(req, res); });
  post("/v1/messages/count_tokens",
       [this](const httplib::Request& req, httplib::Response& res) { count_tokens(req, res); });
  post("/tokenize",
       [this](const httplib::Request& req, httplib::Response& res) { tokenize(req, res); });
  post("/detokenize",
       [this](const httplib::Request& req, httplib::Response& res) { detokenize(req, res); });
  // Statuses httplib sets itself (404, 413, 400 for an unreadable request) get an error body too.
  http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    const std::string message = res.status == 404   ? "no route " + req.method + " " + req.path
                                : res.status == 413 ? "the request body is too large"
                                                    : "the request could not be read";
    send_error(res, res.status, message);
  });
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res,
                                std::exception_ptr) { send_error(res, 500, "internal error"); });
}

CompletionServer::CompletionServer(Engine& engine, const Tokenizer* tokenizer,
                                   ServerOptions options)
    : state_(std::make_unique<State>(engine, tokenizer, std::move(options))) {
  state_->routes();
}

CompletionServer::~CompletionServer() = default;

Result<int> CompletionServer::bind(const std::string& host, int port) {
  const int bound = port == 0 ? state_->http.bind_to_any_port(host)
                              : (state_->http.bind_to_port(host, port) ? port : -1);
  if (bound <= 0) {
    return invalid_argument("cannot listen on " + host + ":" + std::to_string(port) +
                            " (in use, or not an address of this machine)");
  }
  state_->port = bound;
  // Debian's httplib listens with a backlog of 5: in a burst of more new connections than that
  // (clients of a batching server), the kernel dropped the rest's SYNs and they came 1 s later,
  // on the retransmit. listen() again on the bound socket only raises the backlog.
  if (::listen(state_->listening, SOMAXCONN) != 0) {
    return internal_error("listen() on " + host + ":" + std::to_string(bound) + " failed");
  }
  return bound;
}

Status CompletionServer::serve() {
  if (state_->port < 0) return internal_error("serve() before bind()");
  if (!state_->http.listen_after_bind()) return internal_error("the server stopped with an error");
  return ok_status();
}

void CompletionServer::stop() { state_->http.stop(); }

}  // namespace dsv4::server
