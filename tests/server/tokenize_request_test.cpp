// The /tokenize and /detokenize bodies (server/tokenize_request.h): what each accepts, and each
// bad field refused by name.
#include "server/tokenize_request.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/expect_refused.h"

namespace dsv4::server {
namespace {

TEST(TokenizeRequestTest, ReadsThePromptAndTheSpecialTokensSwitch) {
  auto plain = parse_tokenize_request(R"({"prompt": "hi there", "model": "m"})");
  ASSERT_TRUE(std::holds_alternative<TokenizeRequest>(plain));
  EXPECT_EQ(std::get<TokenizeRequest>(plain).prompt, "hi there");
  EXPECT_TRUE(std::get<TokenizeRequest>(plain).add_special_tokens);
  auto bare = parse_tokenize_request(R"({"prompt": "", "add_special_tokens": false})");
  ASSERT_TRUE(std::holds_alternative<TokenizeRequest>(bare));
  EXPECT_FALSE(std::get<TokenizeRequest>(bare).add_special_tokens);
  auto ids = parse_detokenize_request(R"({"tokens": [3, 0, 17]})");
  ASSERT_TRUE(std::holds_alternative<DetokenizeRequest>(ids));
  EXPECT_EQ(std::get<DetokenizeRequest>(ids).tokens, (std::vector<int64_t>{3, 0, 17}));
}

TEST(TokenizeRequestTest, RefusesEachBadFieldByName) {
  struct Case {
    std::string body, param, message;
  };
  for (const Case& c : std::vector<Case>{
           {R"({})", "prompt", "prompt is required"},
           {R"({"prompt": 3})", "prompt", "prompt must be a string"},
           {R"({"prompt": "x", "add_special_tokens": 1})", "add_special_tokens", "true or false"},
           {R"({"prompt": "x", "messages": []})", "messages", "unknown field"},
           {R"({"prompt": "x", "model": 1})", "model", "model must be a string"},
           {R"(["x"])", "", "must be a JSON object"},
       }) {
    SCOPED_TRACE(c.body);
    expect_refused(parse_tokenize_request(c.body), c.param, c.message);
  }
  for (const Case& c : std::vector<Case>{
           {R"({})", "tokens", "tokens must be an array"},
           {R"({"tokens": "1 2"})", "tokens", "tokens must be an array"},
           {R"({"tokens": []})", "tokens", "the tokens is empty"},
           {R"({"tokens": [1, -1]})", "tokens", "got -1"},
           {R"({"tokens": [1.5]})", "tokens", "got 1.5"},
           {R"({"tokens": [1], "prompt": "x"})", "prompt", "unknown field"},
       }) {
    SCOPED_TRACE(c.body);
    expect_refused(parse_detokenize_request(c.body), c.param, c.message);
  }
}

}  // namespace
}  // namespace dsv4::server
