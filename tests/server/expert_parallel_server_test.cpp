// The server on an engine with expert parallelism (2 ranks sharing the CPU) answers greedy
// requests, sent concurrently so that they are stepped together, with the tokens the same
// server gives on one rank. The model is the golden one with NVFP4 experts (brown_small).
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "server/server_fixture.h"
#include "testing/random.h"

namespace dsv4::server {
namespace {

using format::Json;
using testing_fixture::post_json;
using testing_fixture::RunningServer;

Engine open_with_ranks(int64_t ranks) {
  EngineOptions options;
  options.model_dir = testing::source_path("tests/golden/brown_small/model");
  options.max_context = 64;
  options.experts = ExpertPrecision::kW4A4;
  options.expert_parallel = ranks;
  Result<Engine> engine = Engine::open(options);
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  return std::move(engine).value();
}

// Each request's greedy token ids, all requests sent at once.
std::vector<std::vector<int64_t>> answers(const RunningServer& server,
                                          const std::vector<Json>& requests) {
  std::vector<std::vector<int64_t>> ids(requests.size());
  std::vector<std::thread> clients;
  for (size_t c = 0; c < requests.size(); ++c) {
    clients.emplace_back([&, c] {
      const auto [status, json] = post_json(server, "/v1/completions", requests[c]);
      EXPECT_EQ(status, 200) << json.dump();
      if (status == 200) ids[c] = json["choices"][0]["token_ids"].get<std::vector<int64_t>>();
    });
  }
  for (std::thread& client : clients) client.join();
  return ids;
}

TEST(ExpertParallelServer, GreedyAnswersOnTwoRanksAreOneRanks) {
  Engine one = open_with_ranks(1);
  Engine two = open_with_ranks(2);
  testing::SeededRng rng;
  std::vector<Json> requests(6);
  for (Json& request : requests) {
    std::vector<int64_t> prompt(rng.uniform_int(1, 24));
    for (int64_t& id : prompt) id = rng.uniform_int(0, one.vocab_size() - 1);
    request = Json{{"prompt", prompt}, {"max_tokens", rng.uniform_int(1, 16)}, {"temperature", 0}};
  }
  std::vector<std::vector<int64_t>> expected, got;
  {
    const RunningServer server(one, nullptr);
    expected = answers(server, requests);
  }
  {
    const RunningServer server(two, nullptr);
    got = answers(server, requests);
  }
  for (size_t c = 0; c < requests.size(); ++c) {
    EXPECT_FALSE(expected[c].empty());
    EXPECT_EQ(got[c], expected[c]) << "request " << c << ": " << requests[c].dump();
  }
}

}  // namespace
}  // namespace dsv4::server
