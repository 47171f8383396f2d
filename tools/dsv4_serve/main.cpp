// dsv4-serve --model DIR [--tokenizer FILE] [--host H] [--port P] [--device cpu|cuda]
// [--experts w4a16|w4a4] [--max-context N] [--max-batch B] [--max-step-tokens N]
// [--served-model-name NAME] [--api-key KEY] [--max-connections N] [--shutdown-timeout S]: the
// OpenAI-compatible server (server/completion_server.h) until SIGINT or SIGTERM, which drains
// for at most S seconds; a second signal exits at once. The tokenizer defaults to
// MODEL/tokenizer.json; without one the server takes token-id prompts only and says so.
#include <pthread.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>

#include "dsv4/engine.h"
#include "dsv4/tokenizer.h"
#include "engine_flags.h"
#include "server/completion_server.h"

namespace {

using dsv4::Result;
using dsv4::Status;
using dsv4::Tokenizer;

struct ServeArgs {
  dsv4::tools::EngineFlags engine;
  std::string tokenizer;
  std::string host = "127.0.0.1";
  int port = 8000;
  int64_t max_context = 4096;
  int64_t max_batch = 32;
  int64_t prefix_cache_mb = dsv4::EngineOptions{}.prefix_cache_mb;
  std::string served_model_name = "dsv4";
  std::string api_key;  // --api-key, else $DSV4_API_KEY
  int64_t max_connections = 512;
  double shutdown_timeout_s = 5.0;
};

// SIGINT and SIGTERM, blocked in every thread so that only the waiter below takes them.
sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

// The first signal drains the server (on this thread: stop() is not async-signal-safe); a
// second ends the process at once, requests in flight or not.
void wait_for_signals(dsv4::server::CompletionServer& server) {
  const sigset_t set = stop_signals();
  int signal = 0;
  sigwait(&set, &signal);
  std::fprintf(stderr,
               "dsv4-serve: stopping: requests in flight may finish (a second signal "
               "exits at once)\n");
  server.stop();
  sigwait(&set, &signal);
  std::fprintf(stderr, "dsv4-serve: second signal: exiting now\n");
  std::_Exit(128 + signal);
}

int fail(const Status& status) {
  std::fprintf(stderr, "dsv4-serve: %s\n", status.to_string().c_str());
  return 1;
}

// The tokenizer to serve text with: --tokenizer must load; MODEL/tokenizer.json may be absent.
Result<std::optional<Tokenizer>> open_tokenizer(const ServeArgs& args) {
  const bool named = !args.tokenizer.empty();
  Result<Tokenizer> tok =
      Tokenizer::load(named ? args.tokenizer : args.engine.model + "/tokenizer.json");
  if (tok.ok()) return std::optional<Tokenizer>(std::move(tok).value());
  if (named || tok.status().code() != dsv4::StatusCode::kNotFound) return tok.status();
  std::fprintf(stderr, "dsv4-serve: no %s/tokenizer.json: token-id prompts only\n",
               args.engine.model.c_str());
  return std::optional<Tokenizer>();
}

int serve(const ServeArgs& args) {
  Result<std::optional<Tokenizer>> tokenizer = open_tokenizer(args);
  if (!tokenizer.ok()) return fail(tokenizer.status());
  dsv4::EngineOptions options = dsv4::tools::engine_options(args.engine, "serve");
  if (*tokenizer) {
    // Ids the tokenizer lacks are never drawn: every answer decodes.
    options.decodable = [&tok = **tokenizer](int64_t id) { return tok.decode({id}).ok(); };
  }
  options.max_context = args.max_context;
  options.max_batch = args.max_batch;
  options.prefix_cache_mb = args.prefix_cache_mb;
  Result<dsv4::Engine> engine = dsv4::tools::open_engine(options, "serve");
  if (!engine.ok()) return fail(engine.status());
  dsv4::server::ServerOptions server_options;
  server_options.max_context = args.max_context;
  // A worker for every request the engine can step, and a few for those that wait (their
  // prompts are tokenized meanwhile) and for tokenize routes.
  server_options.http.n_workers = static_cast<size_t>(args.max_batch) + 8;
  server_options.http.max_connections = static_cast<size_t>(args.max_connections);
  server_options.http.shutdown_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(args.shutdown_timeout_s * 1000.0));
  server_options.access_log = true;
  server_options.model_name = args.served_model_name;
  server_options.api_key = args.api_key;
  if (const char* key = std::getenv("DSV4_API_KEY"); key != nullptr && args.api_key.empty()) {
    server_options.api_key = key;
  }
  dsv4::server::CompletionServer server(*engine, *tokenizer ? &**tokenizer : nullptr,
                                        server_options);
  Result<int> port = server.bind(args.host, args.port);
  if (!port.ok()) return fail(port.status());
  // A client that leaves must fail the next write, not kill the process.
  std::signal(SIGPIPE, SIG_IGN);
  std::thread(wait_for_signals, std::ref(server)).detach();
  std::fprintf(stderr, "dsv4-serve: listening on http://%s:%d/v1/completions (%s, numerics %s)\n",
               args.host.c_str(), *port, args.engine.device.c_str(),
               dsv4::tools::numerics_name(options.numerics));
  const Status served = server.serve();
  return served.ok() ? 0 : fail(served);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dsv4-serve: an OpenAI-compatible completions server for DeepSeek-V4"};
  ServeArgs args;
  dsv4::tools::add_engine_flags(&app, args.engine, /*model_required=*/true);
  app.add_option("--tokenizer", args.tokenizer, "tokenizer.json (default: MODEL/tokenizer.json)");
  app.add_option("--host", args.host, "address to listen on")->capture_default_str();
  app.add_option("--port", args.port, "port (0: any free port)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  app.add_option("--max-context", args.max_context, "most tokens (prompt + generated) a request")
      ->capture_default_str()
      ->check(dsv4::tools::positive());
  app.add_option("--max-batch", args.max_batch,
                 "most requests generated together (one forward a step for all); more wait")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{4096}));
  dsv4::tools::add_prefix_cache_flag(&app, args.prefix_cache_mb);
  app.add_option("--served-model-name", args.served_model_name,
                 "the model's name in /v1/models and in every response")
      ->capture_default_str();
  app.add_option("--api-key", args.api_key,
                 "every route but /health and /metrics needs \"Authorization: Bearer KEY\" or "
                 "\"x-api-key: KEY\" (default: $DSV4_API_KEY; none: open)");
  app.add_option("--max-connections", args.max_connections,
                 "most client connections open at once (more are answered 503)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{65536}));
  app.add_option("--shutdown-timeout", args.shutdown_timeout_s,
                 "seconds requests in flight may finish after SIGINT/SIGTERM before they are "
                 "cancelled (a second signal exits at once)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
  CLI11_PARSE(app, argc, argv);
  // Before any thread starts (the engine's worker, the server's), so all inherit the mask.
  const sigset_t signals = stop_signals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return serve(args);
}
