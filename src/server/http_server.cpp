#include "server/http_server.h"

#include <strings.h>

#include <boost/asio.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <map>
#include <mutex>
#include <optional>

namespace dsv4::server {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using boost::system::error_code;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

// Bytes one read asks the socket for.
constexpr size_t kReadBytes = size_t{16} << 10;
// While a request is worked on, the bytes of the next (pipelined) ones read ahead at most; past
// them the server reads no more until its answer is out.
constexpr size_t kReadAheadBytes = size_t{64} << 10;
// A streamed response's bytes that may wait for a slow reader before the handler's writes block.
constexpr size_t kStreamBufferBytes = size_t{256} << 10;
// How long a closing connection reads (and drops) what its client still sends, so that the
// close does not reset the connection before the client has read the answer (a 413 sent while
// the rest of a large body is on its way).
constexpr auto kLingerTime = 1s;
// After an accept fails (out of file descriptors), the wait before the next: no busy loop.
constexpr auto kAcceptRetry = 100ms;

std::string seconds(std::chrono::milliseconds t) {
  return std::to_string(static_cast<double>(t.count()) / 1000.0).erase(4) + " s";
}

bool client_left(const error_code& ec) {
  return ec == http::error::end_of_stream || ec == http::error::partial_message ||
         ec == asio::error::eof || ec == asio::error::connection_reset ||
         ec == asio::error::broken_pipe;
}

}  // namespace

std::string HttpRequest::header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (key.size() == name.size() && strncasecmp(key.data(), name.data(), name.size()) == 0) {
      return value;
    }
  }
  return "";
}

// What the handler's thread and the event loop share about one response.
struct ResponseStream::Channel {
  std::shared_ptr<std::atomic<bool>> gone = std::make_shared<std::atomic<bool>>(false);
  std::mutex mutex;
  std::condition_variable drained;
  size_t pending_bytes = 0;                        // under mutex: handed over, not yet sent
  std::function<void(std::string data)> handover;  // to the loop, which sends it

  void mark_gone() {
    const std::lock_guard<std::mutex> lock(mutex);
    gone->store(true);
    drained.notify_all();
  }
  void sent(size_t n) {
    const std::lock_guard<std::mutex> lock(mutex);
    pending_bytes -= n;
    drained.notify_all();
  }
};

bool ResponseStream::write(std::string_view data) {
  Channel& c = *channel_;
  std::unique_lock<std::mutex> lock(c.mutex);
  c.drained.wait(lock, [&] { return c.gone->load() || c.pending_bytes < kStreamBufferBytes; });
  if (c.gone->load()) return false;
  c.pending_bytes += data.size();
  lock.unlock();
  c.handover(std::string(data));
  return true;
}

namespace {

class Connection;

// The event loop's state: everything here but the worker pool is touched on the loop's thread
// alone.
struct Server {
  Server(HttpOptions o, HttpHandlers h)
      : options(o), handlers(std::move(h)), workers(std::max<size_t>(o.n_workers, 1)) {}
  void accept();
  void begin_drain();
  void forget(const Connection* c);

  HttpOptions options;
  HttpHandlers handlers;
  asio::io_context loop{1};
  tcp::acceptor acceptor{loop};
  asio::steady_timer accept_retry{loop};
  asio::steady_timer drain_deadline{loop};
  std::map<const Connection*, std::shared_ptr<Connection>> connections;
  bool stopping = false;
  asio::thread_pool workers;  // last: joined first
};

// One client connection: requests read one at a time (so answered in order), each answered
// before the next is read.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(Server& server, tcp::socket socket)
      : server_(server),
        socket_(std::move(socket)),
        deadline_(server.loop),
        write_deadline_(server.loop),
        buffer_(server.options.max_header_bytes + kReadAheadBytes + kReadBytes) {}

  void start() {
    error_code ignored;
    socket_.set_option(tcp::no_delay(true), ignored);
    wait_for_request();
  }
  // The server stops: an idle connection closes now, the others after their answer.
  void drain() {
    if (phase_ == Phase::kIdle) close();
  }
  // The drain's time is up: the request in flight is cancelled.
  void abort() { close(); }
  // A connection the server does not serve: `status` and closed.
  void refuse(int status, const std::string& message) {
    error_code ignored;
    socket_.set_option(tcp::no_delay(true), ignored);
    request_ = std::make_shared<HttpRequest>();
    started_ = Clock::now();
    refuse_and_close(status, message);
  }

 private:
  enum class Phase { kIdle, kReading, kWorking, kClosed };
  struct Part {
    std::string bytes;
    size_t credit;  // the stream's bytes in it, handed back to the channel once sent
  };
  using Expiry = void (Connection::*)();

  void wait_for_request();
  void read_header();
  void read_body();
  void unreadable(const error_code& ec, const char* part, std::chrono::milliseconds limit);
  void dispatch();
  void handle(HttpResponse& response);
  void work(std::shared_ptr<HttpResponse> response,
            std::shared_ptr<ResponseStream::Channel> channel);
  void watch();
  void respond(const std::shared_ptr<HttpResponse>& response);
  void send_part(std::string data);
  void end_stream();
  void queue(std::string bytes, size_t credit);
  void flush();
  void finish_response();
  void refuse_and_close(int status, const std::string& message);
  void report(int status);
  void linger();
  void discard();
  void close();
  void read_some(std::function<void(const error_code&)> done);
  void arm(asio::steady_timer& timer, uint64_t& id, Clock::duration after, Expiry expiry);
  void disarm(asio::steady_timer& timer, uint64_t& id);
  void timed_out();

  Server& server_;
  tcp::socket socket_;
  asio::steady_timer deadline_;        // of the read in progress
  asio::steady_timer write_deadline_;  // of the write in progress
  uint64_t deadline_id_ = 0;           // a fired timer whose id moved on is stale
  uint64_t write_deadline_id_ = 0;
  bool timed_out_ = false;  // the read's deadline passed
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  Phase phase_ = Phase::kIdle;
  bool reading_ = false;       // a read is outstanding
  bool want_request_ = false;  // the outstanding read was cancelled to read the next request
  std::shared_ptr<HttpRequest> request_;
  Clock::time_point started_;
  bool keep_alive_ = false;
  bool chunked_ = true;  // HTTP/1.1: a stream's parts as chunks; 1.0: raw, then the close
  std::shared_ptr<ResponseStream::Channel> channel_;  // of the request being worked on
  int status_ = 0;
  size_t body_bytes_ = 0;
  bool response_complete_ = false;  // all of the answer is queued
  bool reported_ = false;
  std::vector<Part> out_;      // queued, not yet writing
  std::vector<Part> sending_;  // being written
  bool writing_ = false;
};

void Connection::arm(asio::steady_timer& timer, uint64_t& id, Clock::duration after,
                     Expiry expiry) {
  const uint64_t armed = ++id;
  timer.expires_after(after);
  timer.async_wait([self = shared_from_this(), &id, armed, expiry](const error_code& ec) {
    if (!ec && id == armed) ((*self).*expiry)();
  });
}

void Connection::disarm(asio::steady_timer& timer, uint64_t& id) {
  ++id;
  timer.cancel();
}

void Connection::timed_out() {
  timed_out_ = true;
  error_code ignored;
  socket_.cancel(ignored);  // the read fails, and unreadable() answers 408
}

void Connection::read_some(std::function<void(const error_code&)> done) {
  reading_ = true;
  const size_t room = std::min(kReadBytes, buffer_.max_size() - buffer_.size());
  socket_.async_read_some(
      buffer_.prepare(room),
      [self = shared_from_this(), done = std::move(done)](const error_code& ec, size_t n) {
        self->reading_ = false;
        self->buffer_.commit(n);
        done(ec);
      });
}

void Connection::wait_for_request() {
  phase_ = Phase::kIdle;
  if (server_.stopping) return close();
  if (buffer_.size() > 0) return read_header();  // pipelined
  arm(deadline_, deadline_id_, server_.options.idle_timeout, &Connection::close);
  read_some([self = shared_from_this()](const error_code& ec) {
    if (ec) return self->close();
    self->read_header();
  });
}

void Connection::read_header() {
  phase_ = Phase::kReading;
  request_ = std::make_shared<HttpRequest>();
  reported_ = false;
  started_ = Clock::now();
  parser_.emplace();
  parser_->header_limit(static_cast<uint32_t>(server_.options.max_header_bytes));
  parser_->body_limit(server_.options.max_body_bytes);
  timed_out_ = false;
  arm(deadline_, deadline_id_, server_.options.header_timeout, &Connection::timed_out);
  reading_ = true;
  http::async_read_header(
      socket_, buffer_, *parser_, [self = shared_from_this()](const error_code& ec, size_t) {
        self->reading_ = false;
        if (ec) return self->unreadable(ec, "headers", self->server_.options.header_timeout);
        self->read_body();
      });
}

void Connection::read_body() {
  const auto& header = parser_->get();
  request_->method = std::string(header.method_string());
  const std::string_view target(header.target().data(), header.target().size());
  request_->path = std::string(target.substr(0, target.find('?')));
  for (const auto& field : header) {
    request_->headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  }
  if (parser_->is_done()) return dispatch();
  // curl asks before it sends a body over 1 MiB; a body over the limit was refused already.
  if (strcasecmp(request_->header("Expect").c_str(), "100-continue") == 0) {
    queue("HTTP/1.1 100 Continue\r\n\r\n", 0);
    flush();
  }
  arm(deadline_, deadline_id_, server_.options.body_timeout, &Connection::timed_out);
  reading_ = true;
  http::async_read(socket_, buffer_, *parser_,
                   [self = shared_from_this()](const error_code& ec, size_t) {
                     self->reading_ = false;
                     if (ec)
                       return self->unreadable(ec, "body", self->server_.options.body_timeout);
                     self->dispatch();
                   });
}

void Connection::unreadable(const error_code& ec, const char* part,
                            std::chrono::milliseconds limit) {
  disarm(deadline_, deadline_id_);
  if (phase_ == Phase::kClosed) return;
  const HttpOptions& o = server_.options;
  if (timed_out_) {
    return refuse_and_close(
        408, std::string("the request's ") + part + " did not arrive within " + seconds(limit));
  }
  if (ec == http::error::body_limit) {
    return refuse_and_close(413, "the request body is over the limit of " +
                                     std::to_string(o.max_body_bytes) + " bytes");
  }
  if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
    return refuse_and_close(431, "the request's headers are over the limit of " +
                                     std::to_string(o.max_header_bytes) + " bytes");
  }
  if (client_left(ec)) return close();
  refuse_and_close(400, "the request could not be read as HTTP/1.1: " + ec.message());
}

void Connection::dispatch() {
  disarm(deadline_, deadline_id_);
  auto& message = parser_->get();
  request_->body = std::move(message.body());
  keep_alive_ = message.keep_alive();
  chunked_ = message.version() >= 11;
  parser_.reset();
  phase_ = Phase::kWorking;
  channel_ = std::make_shared<ResponseStream::Channel>();
  channel_->handover = [weak = weak_from_this(), &loop = server_.loop](std::string data) {
    asio::post(loop, [weak, data = std::move(data)]() mutable {
      if (const auto self = weak.lock()) self->send_part(std::move(data));
    });
  };
  auto response = std::make_shared<HttpResponse>();
  response->client_gone = channel_->gone;
  if (server_.handlers.answers_at_once(*request_)) {
    handle(*response);
    return respond(response);
  }
  watch();
  asio::post(server_.workers, [self = shared_from_this(), response, channel = channel_,
                               guard = asio::make_work_guard(server_.loop)]() mutable {
    self->work(std::move(response), std::move(channel));
  });
}

void Connection::handle(HttpResponse& response) {
  try {
    server_.handlers.handle(*request_, response);
  } catch (const std::exception& e) {
    const std::shared_ptr<const std::atomic<bool>> gone = response.client_gone;
    response = HttpResponse{};
    response.client_gone = gone;
    server_.handlers.refuse(500, std::string("internal error: ") + e.what(), response);
  }
}

// On a worker thread: the answer, then its stream when it has one. Touches only what the loop
// leaves alone meanwhile: the request (read-only while worked on), the response, the channel.
void Connection::work(std::shared_ptr<HttpResponse> response,
                      std::shared_ptr<ResponseStream::Channel> channel) {
  if (!channel->gone->load()) handle(*response);
  asio::post(server_.loop, [self = shared_from_this(), response] { self->respond(response); });
  if (!response->stream) return;
  if (!channel->gone->load()) {
    ResponseStream out(channel);
    try {
      response->stream(out);
    } catch (const std::exception&) {
      // The status went out already: the connection closes, which the client sees as a
      // stream cut short.
      channel->mark_gone();
      asio::post(server_.loop, [self = shared_from_this()] { self->close(); });
    }
  }
  asio::post(server_.loop, [self = shared_from_this()] { self->end_stream(); });
}

// While a request is worked on, a read notices the client leaving (and takes in what it
// pipelined, up to kReadAheadBytes).
void Connection::watch() {
  if (reading_ || phase_ != Phase::kWorking || buffer_.size() >= kReadAheadBytes) return;
  read_some([self = shared_from_this()](const error_code& ec) {
    if (self->want_request_) {
      self->want_request_ = false;
      if (ec && ec != asio::error::operation_aborted) return self->close();
      return self->wait_for_request();
    }
    if (ec) return self->close();  // the client left: its work is cancelled
    self->watch();
  });
}

void Connection::respond(const std::shared_ptr<HttpResponse>& response) {
  status_ = response->status;
  if (phase_ == Phase::kClosed) return;
  const HttpResponse& r = *response;
  if (r.stream && !chunked_) keep_alive_ = false;  // HTTP/1.0: the close ends the stream
  if (server_.stopping) keep_alive_ = false;
  std::string head =
      "HTTP/1.1 " + std::to_string(r.status) + " " +
      std::string(http::obsolete_reason(http::int_to_status(static_cast<unsigned>(r.status)))) +
      "\r\nContent-Type: " + r.content_type + "\r\n";
  if (!r.stream) {
    head += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
  } else {
    head += chunked_ ? "Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n"
                     : "Cache-Control: no-cache\r\n";
  }
  if (!keep_alive_) head += "Connection: close\r\n";
  head += "\r\n";
  body_bytes_ = r.body.size();
  response_complete_ = !r.stream;
  queue(head + r.body, 0);
  flush();
}

void Connection::send_part(std::string data) {
  if (phase_ == Phase::kClosed) return;
  body_bytes_ += data.size();
  const size_t credit = data.size();
  if (chunked_) {
    char size[20];
    std::snprintf(size, sizeof size, "%zx\r\n", data.size());
    data = size + std::move(data) + "\r\n";
  }
  queue(std::move(data), credit);
  flush();
}

void Connection::end_stream() {
  if (phase_ == Phase::kClosed) return;
  if (chunked_) queue("0\r\n\r\n", 0);
  response_complete_ = true;
  flush();
}

void Connection::queue(std::string bytes, size_t credit) {
  out_.push_back({std::move(bytes), credit});
}

void Connection::flush() {
  if (writing_ || phase_ == Phase::kClosed) return;
  if (out_.empty()) {
    if (response_complete_) finish_response();
    return;
  }
  writing_ = true;
  sending_ = std::move(out_);
  out_.clear();
  std::vector<asio::const_buffer> buffers;
  for (const Part& p : sending_) buffers.push_back(asio::buffer(p.bytes));
  arm(write_deadline_, write_deadline_id_, server_.options.write_timeout, &Connection::close);
  asio::async_write(socket_, buffers, [self = shared_from_this()](const error_code& ec, size_t) {
    self->writing_ = false;
    self->disarm(self->write_deadline_, self->write_deadline_id_);
    size_t credit = 0;
    for (const Part& p : self->sending_) credit += p.credit;
    self->sending_.clear();
    if (self->channel_ && credit > 0) self->channel_->sent(credit);
    if (ec) return self->close();  // the client left
    self->flush();
  });
}

void Connection::finish_response() {
  response_complete_ = false;
  report(status_);
  channel_.reset();
  if (!keep_alive_ || server_.stopping) return linger();
  if (reading_) {  // the watch's read hands over to the next request once cancelled
    want_request_ = true;
    error_code ignored;
    socket_.cancel(ignored);
    return;
  }
  wait_for_request();
}

void Connection::refuse_and_close(int status, const std::string& message) {
  keep_alive_ = false;
  phase_ = Phase::kWorking;
  auto response = std::make_shared<HttpResponse>();
  server_.handlers.refuse(status, message, *response);
  respond(response);
}

void Connection::report(int status) {
  if (reported_ || request_ == nullptr) return;
  reported_ = true;
  if (server_.handlers.answered) {
    server_.handlers.answered(*request_, status, body_bytes_, Clock::now() - started_);
  }
}

void Connection::linger() {
  error_code ignored;
  socket_.shutdown(tcp::socket::shutdown_send, ignored);
  phase_ = Phase::kIdle;  // a drain closes it at once
  arm(deadline_, deadline_id_, kLingerTime, &Connection::close);
  discard();
}

void Connection::discard() {
  buffer_.clear();
  read_some([self = shared_from_this()](const error_code& ec) {
    if (ec) return self->close();
    self->discard();
  });
}

void Connection::close() {
  if (phase_ == Phase::kClosed) return;
  if (phase_ == Phase::kWorking) report(499);  // its client left before the answer was out
  phase_ = Phase::kClosed;
  if (channel_) channel_->mark_gone();
  error_code ignored;
  socket_.shutdown(tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  disarm(deadline_, deadline_id_);
  disarm(write_deadline_, write_deadline_id_);
  server_.forget(this);
}

void Server::accept() {
  acceptor.async_accept([this](const error_code& ec, tcp::socket socket) {
    if (!acceptor.is_open()) return;
    if (ec) {
      accept_retry.expires_after(kAcceptRetry);
      accept_retry.async_wait([this](const error_code& e) {
        if (!e && !stopping) accept();
      });
      return;
    }
    const bool full = connections.size() >= options.max_connections;
    auto c = std::make_shared<Connection>(*this, std::move(socket));
    connections[c.get()] = c;
    if (full) {
      c->refuse(503, "the server has its most connections open (" +
                         std::to_string(options.max_connections) + "): retry later");
    } else {
      c->start();
    }
    accept();
  });
}

void Server::begin_drain() {
  if (stopping) return;
  stopping = true;
  error_code ignored;
  acceptor.close(ignored);
  accept_retry.cancel();
  for (const auto& [key, c] : std::map(connections)) c->drain();
  if (connections.empty()) return;
  drain_deadline.expires_after(options.shutdown_timeout);
  drain_deadline.async_wait([this](const error_code& ec) {
    if (ec) return;
    for (const auto& [key, c] : std::map(connections)) c->abort();
  });
}

void Server::forget(const Connection* c) {
  connections.erase(c);
  if (stopping && connections.empty()) drain_deadline.cancel();
}

}  // namespace

struct HttpServer::State {
  Server server;
  bool bound = false;
  State(HttpOptions o, HttpHandlers h) : server(o, std::move(h)) {}
};

HttpServer::HttpServer(HttpOptions options, HttpHandlers handlers)
    : state_(std::make_unique<State>(options, std::move(handlers))) {}

HttpServer::~HttpServer() = default;

Result<int> HttpServer::bind(const std::string& host, int port) {
  Server& s = state_->server;
  error_code ec;
  tcp::resolver resolver(s.loop);
  const auto found = resolver.resolve(host, std::to_string(port), ec);
  const auto refused = [&](const error_code& why) {
    return invalid_argument("cannot listen on " + host + ":" + std::to_string(port) + ": " +
                            why.message());
  };
  if (ec) return refused(ec);
  if (found.empty()) return refused(asio::error::host_not_found);
  const tcp::endpoint endpoint = found.begin()->endpoint();
  // SO_REUSEADDR, so a restarted server rebinds its port at once; not SO_REUSEPORT, with which
  // a second server would bind a port in use and take part of its connections.
  if (s.acceptor.open(endpoint.protocol(), ec) ||
      s.acceptor.set_option(tcp::acceptor::reuse_address(true), ec) ||
      s.acceptor.bind(endpoint, ec) ||
      s.acceptor.listen(asio::socket_base::max_listen_connections, ec)) {
    error_code ignored;
    s.acceptor.close(ignored);
    return refused(ec);
  }
  state_->bound = true;
  return static_cast<int>(s.acceptor.local_endpoint().port());
}

Status HttpServer::serve() {
  if (!state_->bound) return internal_error("serve() before bind()");
  Server& s = state_->server;
  s.accept();
  s.loop.run();
  s.workers.join();
  return ok_status();
}

void HttpServer::stop() {
  Server& s = state_->server;
  asio::post(s.loop, [&s] { s.begin_drain(); });
}

}  // namespace dsv4::server
