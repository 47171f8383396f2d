// An HTTP/1.1 server that a slow, hostile or careless client cannot take down or waste
// (Boost.Beast's request parser over Boost.Asio; docs/server.md says why this library). It knows
// nothing of the OpenAI API: the application answers HttpRequests through HttpHandlers.
//
// One event-loop thread owns every connection, so an idle or slow connection costs a socket and
// a timer, never a thread: /health answers at once while hundreds of connections trickle.
// A request's work runs on a pool of worker threads (generation blocks on the engine), and
// routes cheap enough for the loop (answers_at_once) are answered there directly.
//
// What a client cannot do:
//   - hold a connection by sending slowly: a request's headers must be complete header_timeout
//     after its first byte, and its body body_timeout after the headers; both are deadlines, not
//     idle timers, so a byte now and then does not extend them (408, then the connection closes);
//   - make the server buffer more than max_body_bytes: the limit holds for every framing, a
//     chunked body counted as it arrives (413 before the rest is read), headers max_header_bytes;
//   - open more than max_connections at once (beyond: 503 and closed);
//   - keep a generation running after it left: a closed connection sets the response's
//     client_gone, which cancels the engine's sequences within a step;
//   - stall the server by not reading its answer: what is queued for a connection must be
//     written within write_timeout, or the connection closes (and so its request is cancelled).
// Keep-alive connections are served in order, pipelined requests included (each answered after
// the one before it); every response goes out with TCP_NODELAY, so neither Nagle's algorithm nor
// the client's delayed ACK holds its last segment back.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dsv4/status.h"

namespace dsv4::server {

struct HttpRequest {
  std::string method;
  std::string path;  // the target without its query string
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;

  // The value of header `name` (any case), or "" when absent.
  std::string header(std::string_view name) const;
};

// A streamed response's body as the handler's thread produces it.
class ResponseStream {
 public:
  struct Channel;
  explicit ResponseStream(std::shared_ptr<Channel> channel) : channel_(std::move(channel)) {}
  // Sends `data` as the body's next part; false once the client is gone. Blocks while a slow
  // reader leaves more than a buffer's worth unsent (the write deadline bounds how long).
  bool write(std::string_view data);

 private:
  std::shared_ptr<Channel> channel_;
};

struct HttpResponse {
  int status = 200;
  std::string content_type;
  std::string body;
  // When set, the body is streamed instead (chunked): the status and content type go out, then
  // this runs on the handler's thread until it returns.
  std::function<void(ResponseStream&)> stream;
  // Set by the server before the handler runs: true once the client awaiting this response has
  // gone (its connection closed, or a shutdown's drain ran out of time). Work for it can stop.
  std::shared_ptr<const std::atomic<bool>> client_gone;

  void set_content(std::string text, std::string type) {
    body = std::move(text);
    content_type = std::move(type);
  }
};

struct HttpOptions {
  size_t max_body_bytes = size_t{8} << 20;
  size_t max_header_bytes = size_t{64} << 10;
  size_t max_connections = 512;
  size_t n_workers = 40;  // requests worked on at once; more wait for a worker, in order
  // A kept-alive connection may wait this long for its next request's first byte.
  std::chrono::milliseconds idle_timeout{60'000};
  std::chrono::milliseconds header_timeout{10'000};  // first byte to the headers' end
  std::chrono::milliseconds body_timeout{60'000};    // the headers' end to the body's
  std::chrono::milliseconds write_timeout{60'000};   // to write what is queued for a client
  // After stop(): requests in flight may finish for this long, then they are cancelled.
  std::chrono::milliseconds shutdown_timeout{5'000};
};

using Clock = std::chrono::steady_clock;

struct HttpHandlers {
  // Whether `request` is answered on the event loop (it must be quick: /health, /metrics, a
  // 404); every other request goes to a worker.
  std::function<bool(const HttpRequest& request)> answers_at_once;
  std::function<void(const HttpRequest& request, HttpResponse& response)> handle;
  // The body of a refusal the server makes itself (400 unreadable, 408 too slow, 413 too large,
  // 431 headers too large, 503 too many connections), in the application's error shape.
  std::function<void(int status, const std::string& message, HttpResponse& response)> refuse;
  // After each response's last byte, or when its client left first (status 499, as nginx logs
  // it): for the access log and metrics. `request` may lack what never arrived.
  std::function<void(const HttpRequest& request, int status, size_t body_bytes,
                     Clock::duration took)>
      answered;
};

class HttpServer {
 public:
  HttpServer(HttpOptions options, HttpHandlers handlers);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds `host`:`port`, or any free port when `port` is 0; returns the port.
  Result<int> bind(const std::string& host, int port);
  // Serves on the bound port until stop() and the drain after it are over.
  Status serve();
  // From any thread: stops accepting, closes idle connections, lets requests in flight finish
  // for shutdown_timeout and then cancels them. Not async-signal-safe: call it from a thread.
  void stop();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace dsv4::server
