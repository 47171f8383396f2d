// What the server tests share: the tiny random-weight golden checkpoint's engine, the default
// model's (the shipped Brown one) with its own tokenizer, a server on its own thread for one
// test, and a tokenizer that knows every id of the tiny model.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>

#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "dsv4/engine.h"
#include "dsv4/tokenizer.h"
#include "format/json.h"
#include "server/completion_server.h"
#include "testing/source_dir.h"
#include "tokenizer/byte_level.h"

namespace dsv4::server::testing_fixture {

using format::Json;

inline Engine open_engine() {
  EngineOptions options;
  options.model_dir = testing::source_path("tests/golden/tiny_a_pretrained/model");
  options.max_context = 64;
  Result<Engine> engine = Engine::open(options);
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  return std::move(engine).value();
}

// The default model (the one `dsv4 generate` embeds: tests/golden/brown_small) and its own
// tokenizer, whose ids are the engine's drawable ones. Both live on the heap: the engine's
// `decodable` holds the tokenizer's address.
struct DefaultModel {
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<Engine> engine;
};

inline DefaultModel open_default_model(int64_t max_context, int64_t speculative_tokens = 0) {
  EngineOptions options;
  options.model_dir = testing::source_path("tests/golden/brown_small/model");
  options.max_context = max_context;
  options.speculative_tokens = speculative_tokens;
  Result<Tokenizer> tokenizer = Tokenizer::load(options.model_dir + "/tokenizer.json");
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status().to_string();
  DefaultModel model{std::make_unique<Tokenizer>(std::move(tokenizer).value()), nullptr};
  options.decodable = [t = model.tokenizer.get()](int64_t id) { return t->decode({id}).ok(); };
  Result<Engine> engine = Engine::open(options);
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  model.engine = std::make_unique<Engine>(std::move(engine).value());
  return model;
}

// A server on its own thread for one test, stopped and joined at the end.
class RunningServer {
 public:
  // max_context: the engine's (the tiny model's 64 unless given).
  RunningServer(Engine& engine, const Tokenizer* tokenizer, ServerOptions options = {},
                int64_t max_context = 64)
      : server_(engine, tokenizer, [&] {
          options.max_context = max_context;
          return options;
        }()) {
    Result<int> port = server_.bind("127.0.0.1", 0);
    EXPECT_TRUE(port.ok()) << port.status().to_string();
    port_ = port.ok() ? *port : 0;
    thread_ = std::thread([this] { EXPECT_TRUE(server_.serve().ok()); });
  }
  ~RunningServer() {
    server_.stop();
    thread_.join();
  }
  httplib::Client client() const { return httplib::Client("127.0.0.1", port_); }
  int port() const { return port_; }

 private:
  CompletionServer server_;
  int port_ = 0;
  std::thread thread_;
};

// The small tokenizer knows 268 of the random-weight model's 640 ids. This one knows them all:
// its vocabulary grows by byte pairs (no merges reach them; decoding is all a reply needs) up to
// 638, the two added tokens after it, where tokenizers would put them.
inline Tokenizer every_id_tokenizer() {
  std::ifstream in(testing::source_path("tests/tokenizer/fixtures/small_tokenizer.json"));
  Json json = Json::parse(std::string(std::istreambuf_iterator<char>(in), {}));
  Json& vocab = json["model"]["vocab"];
  const auto n_vocab = static_cast<int64_t>(vocab.size());
  for (int64_t k = 0, id = n_vocab; id < 638; ++k) {
    const char pair[2] = {static_cast<char>(k % 256), static_cast<char>(k / 256 + 128)};
    const std::string token = tokenizer::bytes_to_chars({pair, 2});
    if (!vocab.contains(token)) vocab[token] = id++;
  }
  json["added_tokens"][0]["id"] = 638;
  json["added_tokens"][1]["id"] = 639;
  return Tokenizer::parse(json.dump(), "every-id tokenizer").value();
}

// POSTs `body` as JSON to `path` (reading for up to `timeout_s`: a request's n choices on the
// CPU model take a while); returns (status, parsed body), status 0 when nothing came back.
inline std::pair<int, Json> post_json(const RunningServer& server, const char* path,
                                      const Json& body, int timeout_s = 120) {
  httplib::Client client = server.client();
  client.set_read_timeout(timeout_s);
  const auto res = client.Post(path, body.dump(), "application/json");
  EXPECT_TRUE(res) << "no response";
  if (!res) return {0, Json()};
  return {res->status, Json::parse(res->body)};
}

// ---- Streamed answers ("stream": true) ----

// The payloads of a server-sent-event body ("data: X\n\n" each), checking the framing.
inline std::vector<std::string> events(const std::string& body) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < body.size()) {
    const size_t end = body.find("\n\n", at);
    EXPECT_NE(end, std::string::npos) << "an event without its blank line: " << body.substr(at);
    EXPECT_EQ(body.compare(at, 6, "data: "), 0) << body.substr(at);
    if (end == std::string::npos) break;
    out.push_back(body.substr(at + 6, end - at - 6));
    at = end + 2;
  }
  return out;
}

// A streamed answer: the chunks between the first event and [DONE], parsed.
struct Streamed {
  std::vector<Json> chunks;
  std::string content_type;
};

inline Streamed post_stream(const RunningServer& server, const char* path,
                            const std::string& body) {
  httplib::Client client = server.client();
  const auto res = client.Post(path, body, "application/json");
  EXPECT_TRUE(res) << "no response";
  if (!res) return {};
  EXPECT_EQ(res->status, 200) << res->body;
  const std::vector<std::string> payloads = events(res->body);
  EXPECT_FALSE(payloads.empty());
  if (payloads.empty()) return {};
  EXPECT_EQ(payloads.back(), "[DONE]");
  Streamed out{{}, res->get_header_value("Content-Type")};
  for (size_t i = 0; i + 1 < payloads.size(); ++i) out.chunks.push_back(Json::parse(payloads[i]));
  return out;
}

}  // namespace dsv4::server::testing_fixture
