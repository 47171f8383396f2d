// Load and abuse on loopback, all at once against one server over the tiny model: slowloris
// connections that trickle header lines, a body trickled a byte at a time, chunked and declared
// bodies over the limit, requests abandoned before their answer, pipelined requests, and
// well-formed clients throughout. The server must stay responsive (a fresh /health answers in
// under 1 s the whole time), answer every well-formed request, refuse each abuse with its status
// (408, 413; 400 for a request that is not well-formed), and stop generating for the clients that
// left. Deadlines are cut to 2 s here so the run stays short (~15 s). Then a client that never
// reads its answers (closed at the write deadline), and the refusals past the limits
// (connections, headers, memory), each in the API's error shape while the server serves on. Raw
// sockets, so the test sends exactly the bytes it means to.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "server/server_fixture.h"

namespace dsv4::server {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using format::Json;
using testing_fixture::open_engine;
using testing_fixture::RunningServer;

constexpr auto kDeadline = 2s;  // header and body deadlines of the server under test
constexpr size_t kMaxBody = size_t{64} << 10;

// A blocking loopback connection whose reads give up after `timeout` (receive_buffer > 0: the
// socket's receive buffer, set before it connects, so that a client that does not read fills it
// soon).
class Connection {
 public:
  Connection(int port, std::chrono::milliseconds timeout = 5000ms, int receive_buffer = 0) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    if (receive_buffer > 0) {
      setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
    }
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
    timeval tv{timeout.count() / 1000, static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~Connection() { close(fd_); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  bool connected() const { return connected_; }
  // False once the server closed the connection.
  bool send(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  // Sends what fits without waiting; the bytes sent.
  size_t send_some(std::string_view bytes) {
    const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    return n > 0 ? static_cast<size_t>(n) : 0;
  }
  // Reads until the server closed the connection (true) or a read timed out (false).
  bool read_to_close() {
    char chunk[65536];
    while (true) {
      const ssize_t n = recv(fd_, chunk, sizeof chunk, 0);
      if (n > 0) continue;
      return n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
    }
  }
  // The next whole response (status line, headers, body by Content-Length or chunked), or ""
  // when the connection closed or the read timed out first.
  std::string response() {
    while (true) {
      const size_t end = buffer_.find("\r\n\r\n");
      if (end != std::string::npos) {
        const size_t length = body_length(buffer_.substr(0, end + 4), end + 4);
        if (length != std::string::npos && buffer_.size() >= length) {
          std::string one = buffer_.substr(0, length);
          buffer_.erase(0, length);
          return one;
        }
      }
      char chunk[16384];
      const ssize_t n = recv(fd_, chunk, sizeof chunk, 0);
      if (n <= 0) return "";
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }

 private:
  // The whole response's length once the buffer holds it, else npos.
  size_t body_length(const std::string& head, size_t head_bytes) const {
    std::string lower = head;
    std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
    if (lower.find("transfer-encoding: chunked") != std::string::npos) {
      const size_t last = buffer_.find("\r\n0\r\n\r\n", head_bytes - 2);
      return last == std::string::npos ? std::string::npos : last + 7;
    }
    const size_t at = lower.find("content-length: ");
    if (at == std::string::npos) return head_bytes;
    return head_bytes + std::stoul(lower.substr(at + 16));
  }

  int fd_ = -1;
  bool connected_ = false;
  std::string buffer_;
};

int status_of(const std::string& response) {
  return response.size() > 12 ? std::stoi(response.substr(9, 3)) : 0;
}

// The body of a whole response ("" for none: the read timed out or the server closed first).
std::string body_of(const std::string& response) {
  const size_t head = response.find("\r\n\r\n");
  return head == std::string::npos ? "" : response.substr(head + 4);
}

std::string post(const std::string& path, const std::string& body) {
  return "POST " + path + " HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n" +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

const std::string kHealth = "GET /health HTTP/1.1\r\nHost: test\r\n\r\n";

std::string completion(int64_t first_id, int64_t max_tokens, bool stream = false) {
  return "{\"prompt\": [" + std::to_string(first_id) +
         ", 5, 9], \"max_tokens\": " + std::to_string(max_tokens) +
         (stream ? ", \"stream\": true}" : "}");
}

// Polls a fresh connection's /health until `done`; returns the slowest answer (a failure counts
// as a minute).
Clock::duration watch_health(int port, const std::atomic<bool>& done) {
  Clock::duration slowest{};
  while (!done) {
    const auto start = Clock::now();
    Connection c(port);
    const bool answered = c.send(kHealth) && status_of(c.response()) == 200;
    slowest = std::max(slowest, answered ? Clock::now() - start : Clock::duration(60s));
    std::this_thread::sleep_for(50ms);
  }
  return slowest;
}

class HttpAbuseTest : public ::testing::Test {
 protected:
  HttpAbuseTest() : engine_(open_engine()) {
    options_.http.header_timeout = kDeadline;
    options_.http.body_timeout = kDeadline;
    options_.http.max_body_bytes = kMaxBody;
    options_.http.n_workers = 8;
  }
  Engine engine_;
  ServerOptions options_;
};

TEST_F(HttpAbuseTest, StaysResponsiveAndAnswersEveryWellFormedRequest) {
  RunningServer server(engine_, nullptr, options_);
  const int port = server.port();
  std::atomic<bool> done{false};
  Clock::duration slowest_health{};
  std::thread health([&] { slowest_health = watch_health(port, done); });
  std::vector<std::thread> abusers;

  // 48 slowloris connections: a header line every 300 ms never completes the headers; each is
  // answered 408 at the deadline, however often it sends.
  std::atomic<int> n_timed_out{0};
  abusers.emplace_back([&] {
    std::vector<std::unique_ptr<Connection>> slow;
    for (int i = 0; i < 48; ++i) {
      slow.push_back(std::make_unique<Connection>(port));
      slow.back()->send("POST /v1/completions HTTP/1.1\r\n");
    }
    for (auto t = Clock::now(); Clock::now() - t < kDeadline + 1s;) {
      for (auto& c : slow) c->send("X-Slow: 1\r\n");
      std::this_thread::sleep_for(300ms);
    }
    for (auto& c : slow) n_timed_out += status_of(c->response()) == 408;
  });
  // A body a byte at a time: 408 at the body's deadline.
  std::atomic<int> trickled_status{0};
  abusers.emplace_back([&] {
    Connection c(port);
    const std::string request = post("/v1/completions", completion(1, 2));
    c.send(request.substr(0, request.find("\r\n\r\n") + 4));
    for (size_t i = 0; i < 30 && c.send("{"); ++i) std::this_thread::sleep_for(100ms);
    trickled_status = status_of(c.response());
  });
  // Bodies over the limit, chunked (never declared) and declared: 413 before they are read.
  std::atomic<int> chunked_status{0}, declared_status{0};
  abusers.emplace_back([&] {
    Connection c(port);
    c.send("POST /v1/completions HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n");
    const std::string chunk(16384, 'x');
    for (int i = 0; i < 64; ++i) {
      if (!c.send("4000\r\n" + chunk + "\r\n")) break;
    }
    chunked_status = status_of(c.response());
    Connection d(port);
    d.send("POST /v1/completions HTTP/1.1\r\nHost: test\r\nContent-Length: 100000000\r\n\r\n");
    declared_status = status_of(d.response());
  });
  // Requests abandoned before their answer, streamed or not: their generation stops.
  const int64_t generated_before = engine_.stats().generated_tokens;
  abusers.emplace_back([&] {
    std::vector<std::unique_ptr<Connection>> left;
    for (int i = 0; i < 8; ++i) {
      left.push_back(std::make_unique<Connection>(port));
      left.back()->send(post("/v1/completions", completion(100 + i, 60, i % 2 == 1)));
    }
    std::this_thread::sleep_for(30ms);
    left.clear();
  });
  // Pipelined requests on one connection: all answered, in order.
  std::vector<std::string> pipelined;
  abusers.emplace_back([&] {
    Connection c(port);
    c.send(kHealth + post("/v1/completions", completion(7, 3)) +
           "GET /v1/models HTTP/1.1\r\nHost: test\r\n\r\n");
    for (int i = 0; i < 3; ++i) pipelined.push_back(c.response());
  });
  // Requests that are not well-formed, on one kept-alive connection: each a 400 in the error
  // shape, naming the field where there is one, and the connection stays open for the next.
  std::atomic<int> n_refused{0};
  abusers.emplace_back([&] {
    Connection c(port, 30000ms);
    const std::pair<std::string, const char*> bad[] = {
        {"{\"prompt\": [1, 2", nullptr},
        {"[1, 2, 3]", nullptr},
        {"{\"prompt\": [1], \"max_tokens\": -1}", "max_tokens"},
        {"{\"prompt\": [1], \"guided_regex\": \"a+\"}", "guided_regex"},
        {"{\"prompt\": [100000]}", "prompt"},
        {"{\"prompt\": [1], \"temperature\": \"hot\"}", "temperature"}};
    for (const auto& [body, param] : bad) {
      if (!c.send(post("/v1/completions", body))) return;
      const std::string response = c.response();
      const Json error = Json::parse(body_of(response), nullptr, false);
      n_refused += status_of(response) == 400 && error.contains("error") &&
                   (param == nullptr || error["error"]["param"] == param);
    }
  });
  // Well-formed clients on kept-alive connections: every request answered, as the engine does.
  constexpr int kClients = 6, kRequests = 4;
  std::atomic<int> n_answered{0};
  std::mutex unanswered_mutex;
  std::vector<std::string> unanswered;  // what a well-formed client got instead of a 200
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      Connection conn(port, 30000ms);
      for (int r = 0; r < kRequests; ++r) {
        conn.send(post("/v1/completions", completion(200 + c * kRequests + r, 4)));
        const std::string response = conn.response();
        // Answered: all 4 tokens, or fewer where the sampled text reached its end token (the
        // requests sample at temperature 1, so the tiny model's <EOS> may come early).
        if (status_of(response) == 200) {
          const Json choice = Json::parse(body_of(response))["choices"][0];
          const size_t n = choice["token_ids"].size();
          if (n == 4 || (n >= 1 && n < 4 && choice["finish_reason"] == "stop")) {
            ++n_answered;
            continue;
          }
        }
        const std::lock_guard<std::mutex> lock(unanswered_mutex);
        unanswered.push_back("client " + std::to_string(c) + ", request " + std::to_string(r) +
                             ": " + response.substr(0, 300));
      }
    });
  }
  for (std::thread& t : abusers) t.join();
  for (std::thread& t : clients) t.join();
  done = true;
  health.join();

  EXPECT_LT(slowest_health, 1s) << "a /health took "
                                << std::chrono::duration<double>(slowest_health).count() << " s";
  EXPECT_EQ(n_answered, kClients * kRequests) << ::testing::PrintToString(unanswered);
  EXPECT_EQ(n_refused, 6);
  EXPECT_EQ(n_timed_out, 48);
  EXPECT_EQ(trickled_status, 408);
  EXPECT_EQ(chunked_status, 413);
  EXPECT_EQ(declared_status, 413);
  ASSERT_EQ(pipelined.size(), 3u);
  EXPECT_EQ(body_of(pipelined[0]), "{\"status\":\"ok\"}");
  EXPECT_NE(body_of(pipelined[1]).find("\"text_completion\""), std::string::npos) << pipelined[1];
  EXPECT_NE(body_of(pipelined[2]).find("\"list\""), std::string::npos) << pipelined[2];
  // The 8 abandoned requests could draw 480 tokens; the well-formed ones drew 96 and the
  // pipelined one 3. Those that left stop within a step of their close, long before 60 tokens.
  EngineStats stats = engine_.stats();
  for (int wait = 0; wait < 500 && (stats.running > 0 || stats.waiting > 0); ++wait) {
    std::this_thread::sleep_for(10ms);
    stats = engine_.stats();
  }
  EXPECT_EQ(stats.running + stats.waiting, 0);
  EXPECT_LT(stats.generated_tokens - generated_before, 99 + 240);
}

// stop(): idle connections close at once, requests in flight get shutdown_timeout to finish and
// are then cancelled, so serve() returns within the timeout and a step or two, not after the
// requests' max_tokens.
TEST_F(HttpAbuseTest, StopDrainsForTheTimeoutThenCancels) {
  options_.max_context = 64;
  options_.http.shutdown_timeout = 300ms;
  CompletionServer server(engine_, nullptr, options_);
  const Result<int> port = server.bind("127.0.0.1", 0);
  ASSERT_TRUE(port.ok()) << port.status().to_string();
  Clock::time_point returned;
  std::thread serving([&] {
    EXPECT_TRUE(server.serve().ok());
    returned = Clock::now();
  });
  Connection idle(*port);
  ASSERT_TRUE(idle.send(kHealth));
  EXPECT_EQ(status_of(idle.response()), 200);
  // Streams of up to 60 tokens each, in flight when the server stops.
  std::vector<std::unique_ptr<Connection>> busy;
  for (int i = 0; i < 4; ++i) {
    busy.push_back(std::make_unique<Connection>(*port));
    busy.back()->send(post("/v1/completions", completion(300 + i, 60, true)));
  }
  std::this_thread::sleep_for(100ms);
  const auto stopped = Clock::now();
  server.stop();
  EXPECT_EQ(idle.response(), "") << "an idle connection closes at once";
  serving.join();
  EXPECT_LT(returned - stopped, 300ms + 2s);
  EXPECT_EQ(engine_.stats().running, 0);
  Connection late(*port, 1000ms);
  EXPECT_FALSE(late.connected() && late.send(kHealth) && status_of(late.response()) == 200);
}

// A client that asks and never reads: its answers fill the socket's buffers, and the server
// closes the connection write_timeout after a write stalls (its requests cancelled), while
// every other client is served meanwhile.
TEST_F(HttpAbuseTest, AClientThatDoesNotReadIsClosedAtTheWriteDeadline) {
  options_.http.write_timeout = 1s;
  RunningServer server(engine_, nullptr, options_);
  const int port = server.port();
  // Pipelined /metrics requests (answered on the server's loop, a few KB each): far more answer
  // than a 4 KB receive buffer and the server's send buffer hold.
  Connection sink(port, 10000ms, 4096);
  const std::string ask = "GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n";
  std::string asks;
  for (int i = 0; i < 8000; ++i) asks += ask;
  std::string_view unsent = asks;
  const auto start = Clock::now();
  while (!unsent.empty() && Clock::now() - start < 500ms) {
    unsent.remove_prefix(sink.send_some(unsent));
    std::this_thread::sleep_for(1ms);
  }
  // Served meanwhile.
  Clock::duration slowest{};
  while (Clock::now() - start < 2500ms) {
    const auto asked = Clock::now();
    Connection c(port);
    EXPECT_TRUE(c.send(kHealth) && status_of(c.response()) == 200);
    slowest = std::max(slowest, Clock::now() - asked);
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_LT(slowest, 1s);
  EXPECT_TRUE(sink.read_to_close()) << "the connection is still open past its write deadline";
}

// What the server refuses itself comes back in the API's error shape, and the server serves on:
// a connection past max_connections (503, closed; once one closes, a new one is served), headers
// over their limit (431), a body that is not JSON (400), an unknown path (404).
TEST_F(HttpAbuseTest, RefusalsPastTheLimitsAreWellFormedErrors) {
  constexpr size_t kMaxConnections = 4;
  options_.http.max_connections = kMaxConnections;
  options_.http.max_header_bytes = 4096;
  RunningServer server(engine_, nullptr, options_);
  const int port = server.port();
  const auto expect_error = [](const std::string& response, int status, const char* says) {
    EXPECT_EQ(status_of(response), status) << response;
    const Json body = Json::parse(body_of(response), nullptr, false);
    ASSERT_TRUE(body.contains("error")) << response;
    EXPECT_NE(body["error"]["message"].get<std::string>().find(says), std::string::npos)
        << response;
  };
  // Kept-alive connections up to the limit, each answered once so the server holds it.
  std::vector<std::unique_ptr<Connection>> held;
  for (size_t i = 0; i < kMaxConnections; ++i) {
    held.push_back(std::make_unique<Connection>(port));
    ASSERT_TRUE(held.back()->send(kHealth));
    ASSERT_EQ(status_of(held.back()->response()), 200);
  }
  {
    Connection over(port);
    over.send(kHealth);
    expect_error(over.response(), 503, "most connections open");
  }
  // Refused on a held connection, which stays within the limit.
  held[0]->send("GET /health HTTP/1.1\r\nHost: test\r\nX-Big: " + std::string(8192, 'x') +
                "\r\n\r\n");
  expect_error(held[0]->response(), 431, "headers are over the limit");
  held[1]->send(post("/v1/completions", "{\"prompt\": [1, 2"));
  expect_error(held[1]->response(), 400, "");
  held[2]->send("GET /v1/nothing HTTP/1.1\r\nHost: test\r\n\r\n");
  EXPECT_EQ(status_of(held[2]->response()), 404);
  // A closed connection makes room (the server sees the close on its next read).
  held.clear();
  int status = 0;
  for (int tries = 0; tries < 100 && status != 200; ++tries) {
    Connection again(port);
    again.send(post("/v1/completions", completion(3, 2)));
    status = status_of(again.response());
    if (status != 200) std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(status, 200);
}

// A request whose sequence's caches do not fit in memory is refused with 503 (worth a retry,
// in the error shape), and the server serves the next one.
TEST(HttpMemoryTest, ARequestThatDoesNotFitIs503AndTheServerServesOn) {
  constexpr int64_t kContext = int64_t{1} << 50;
  EngineOptions options;
  options.model_dir = testing::source_path("tests/golden/tiny_a_pretrained/model");
  options.max_context = kContext;
  Result<Engine> engine = Engine::open(options);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  RunningServer server(*engine, nullptr, {}, kContext);
  Connection c(server.port(), 30000ms);
  c.send(post("/v1/completions", completion(1, int64_t{1} << 49)));
  const std::string huge = c.response();
  EXPECT_EQ(status_of(huge), 503) << huge;
  const Json error = Json::parse(body_of(huge), nullptr, false);
  ASSERT_TRUE(error.contains("error")) << huge;
  EXPECT_EQ(error["error"]["type"], "server_error") << huge;
  c.send(post("/v1/completions", completion(1, 2)));
  EXPECT_EQ(status_of(c.response()), 200);
}

}  // namespace
}  // namespace dsv4::server
