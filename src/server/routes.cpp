// The server's routes and what every request goes through before and after one: the API key,
// the 404, which routes the event loop answers itself, the access log and the metrics; and the
// CompletionServer's life (bind, serve, stop) over the HTTP layer.
#include <strings.h>

#include <chrono>
#include <cstdio>

#include "server/completion_server.h"
#include "server/openai_json.h"
#include "server/server_state.h"

namespace dsv4::server {
namespace {

using format::Json;

// The routes a key does not guard: a load balancer's probe and a Prometheus scrape, which do no
// work and tell nothing about requests.
bool open_route(const std::string& path) { return path == "/health" || path == "/metrics"; }

// Whether `given` equals `want`, in time independent of where they differ.
bool equal_keys(std::string_view given, std::string_view want) {
  if (given.size() != want.size()) return false;
  unsigned char differ = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    differ |= static_cast<unsigned char>(given[i] ^ want[i]);
  }
  return differ == 0;
}

// The credentials of "Authorization: Bearer <token>": the scheme is case-insensitive (RFC 9110,
// section 11.1), and spaces may follow it. Empty for another scheme.
std::string_view bearer_token(std::string_view authorization) {
  constexpr std::string_view kScheme = "bearer ";
  if (authorization.size() < kScheme.size() ||
      strncasecmp(authorization.data(), kScheme.data(), kScheme.size()) != 0) {
    return {};
  }
  authorization.remove_prefix(kScheme.size());
  while (!authorization.empty() && authorization.front() == ' ') authorization.remove_prefix(1);
  return authorization;
}

// A body sent as a form that is not JSON text. curl -d labels a JSON body so too; that one is
// read as JSON, whatever its label.
bool form_encoded(const HttpRequest& req) {
  const std::string type = req.header("Content-Type");
  if (strncasecmp(type.c_str(), "application/x-www-form-urlencoded", 33) != 0) return false;
  const size_t first = req.body.find_first_not_of(" \t\r\n");
  return first != std::string::npos && req.body[first] != '{';
}

constexpr const char* kModelRoute = "/v1/models/{id}";

}  // namespace

bool CompletionServer::State::authorized(const HttpRequest& req) const {
  if (options.api_key.empty() || open_route(req.path)) return true;
  const std::string authorization = req.header("Authorization");
  const std::string_view token = bearer_token(authorization);
  return (!token.empty() && equal_keys(token, options.api_key)) ||
         equal_keys(req.header("x-api-key"), options.api_key);
}

const CompletionServer::State::Route* CompletionServer::State::route_of(
    const HttpRequest& req) const {
  auto it = routes_by_path.find({req.method, req.path});
  if (it == routes_by_path.end() && req.method == "GET" && req.path.starts_with("/v1/models/")) {
    it = routes_by_path.find({"GET", kModelRoute});
  }
  return it == routes_by_path.end() ? nullptr : &it->second;
}

std::string CompletionServer::State::metrics_label(const HttpRequest& req) const {
  if (routes_by_path.contains({req.method, req.path})) return req.path;
  return route_of(req) != nullptr ? kModelRoute : "other";
}

void CompletionServer::State::handle(const HttpRequest& req, HttpResponse& res) const {
  const Api api = req.path.starts_with("/v1/messages") ? Api::kAnthropic : Api::kOpenAi;
  if (!authorized(req)) {
    return send_error(
        res, 401, "a valid API key is needed: Authorization: Bearer <key>, or x-api-key", "", api);
  }
  const Route* route = route_of(req);
  if (route == nullptr) return send_error(res, 404, "no route " + req.method + " " + req.path);
  if (form_encoded(req)) {
    return send_error(res, 400,
                      "the body is form data (Content-Type: application/x-www-form-urlencoded, "
                      "as curl -d sends it): send JSON, with -H 'Content-Type: application/json'",
                      "", api);
  }
  route->handler(req, res);
}

// Every answered request counts for /metrics, and goes to stderr with the access log on; the
// time runs from the request's first byte to the response's last.
void CompletionServer::State::answered(const HttpRequest& req, int status, size_t body_bytes,
                                       Clock::duration took) {
  const std::string label = metrics_label(req);
  metrics.record(label, status);
  if (!options.access_log) return;
  const std::string line =
      access_log_line(req.method.empty() ? "-" : req.method, label, status, body_bytes, took);
  std::fprintf(stderr, "dsv4-serve: %s\n", line.c_str());
}

void CompletionServer::State::model(const HttpRequest& req, HttpResponse& res) const {
  // max_model_len as vLLM reports it: clients size their requests by it.
  const Json entry = {{"id", options.model_name},
                      {"object", "model"},
                      {"created", created},
                      {"owned_by", "dsv4"},
                      {"max_model_len", options.max_context}};
  if (req.path == "/v1/models") return send_json(res, 200, {{"object", "list"}, {"data", {entry}}});
  const std::string id = req.path.substr(std::string_view("/v1/models/").size());
  if (id == options.model_name) return send_json(res, 200, entry);
  send_json(res, 404,
            {{"error",
              {{"message", "The model '" + id + "' does not exist: this server serves '" +
                               options.model_name + "'"},
               {"type", "invalid_request_error"},
               {"param", "model"},
               {"code", "model_not_found"}}}});
}

void CompletionServer::State::get(const char* path, Handler handler, bool at_once) {
  metrics.add_route(path);
  routes_by_path[{"GET", path}] = {std::move(handler), at_once};
}

void CompletionServer::State::post(const char* path, Handler handler) {
  metrics.add_route(path);
  routes_by_path[{"POST", path}] = {std::move(handler), false};
}

void CompletionServer::State::routes() {
  using Request = const HttpRequest&;
  get(
      "/health",
      [](Request, HttpResponse& res) {
        send_json(res, 200, {{"status", "ok"}});
      },
      true);
  get(
      "/metrics",
      [this](Request, HttpResponse& res) {
        res.set_content(metrics.prometheus(engine.stats()), "text/plain; version=0.0.4");
      },
      true);
  const auto model_route = [this](Request req, HttpResponse& res) { model(req, res); };
  get("/v1/models", model_route, true);
  get(kModelRoute, model_route, true);
  post("/v1/completions", [this](Request req, HttpResponse& res) { complete(req, res); });
  post("/v1/chat/completions", [this](Request req, HttpResponse& res) { chat(req, res); });
  post("/v1/messages", [this](Request req, HttpResponse& res) { messages(req, res); });
  post("/v1/messages/count_tokens",
       [this](Request req, HttpResponse& res) { count_tokens(req, res); });
  post("/tokenize", [this](Request req, HttpResponse& res) { tokenize(req, res); });
  post("/detokenize", [this](Request req, HttpResponse& res) { detokenize(req, res); });
  HttpHandlers handlers;
  handlers.answers_at_once = [this](const HttpRequest& req) {
    const Route* route = route_of(req);
    return !authorized(req) || route == nullptr || route->at_once;
  };
  handlers.handle = [this](const HttpRequest& req, HttpResponse& res) { handle(req, res); };
  handlers.refuse = [](int status, const std::string& message, HttpResponse& res) {
    send_error(res, status, message);
  };
  handlers.answered = [this](const HttpRequest& req, int status, size_t bytes,
                             Clock::duration took) { answered(req, status, bytes, took); };
  http = std::make_unique<HttpServer>(options.http, std::move(handlers));
}

CompletionServer::CompletionServer(Engine& engine, const Tokenizer* tokenizer,
                                   ServerOptions options)
    : state_(std::make_unique<State>(engine, tokenizer, std::move(options))) {
  state_->routes();
}

CompletionServer::~CompletionServer() = default;

Result<int> CompletionServer::bind(const std::string& host, int port) {
  return state_->http->bind(host, port);
}

Status CompletionServer::serve() { return state_->http->serve(); }

void CompletionServer::stop() { state_->http->stop(); }

}  // namespace dsv4::server
