// Strict tools through the server, on the shipped Brown model (tests/golden/brown_small) with
// its own tokenizer, speculating with its MTP block: every tool call of a constrained reply
// parses (the server read it back from DSML) and its arguments validate against the tool's
// schema (checked here by hand, not by the grammar), over many sampled replies of the OpenAI and
// Anthropic APIs; free content never holds DSML; a schema the compiler does not support, and
// strict tools in thinking mode, are 400s naming what.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "format/json.h"
#include "server/server_fixture.h"

namespace dsv4::server {
namespace {

using format::Json;
using testing_fixture::post_json;
using testing_fixture::RunningServer;

constexpr int64_t kContext = 2048;

// Bounded schemas (enums, booleans, integers of at most 16 digits, strings of at most 8
// characters), so that every constrained call ends within max_tokens whatever the model writes
// (a call is ~300 bytes, and the Brown tokenizer's 4096 tokens spend ~1 token a byte on DSML).
// Json sorts keys: the properties' order is alphabetical.
const Json kWeather = Json::parse(R"({"name": "get_weather", "strict": true,
  "description": "The weather in a city",
  "parameters": {"type": "object", "additionalProperties": false,
    "properties": {"city": {"type": "string", "enum": ["Paris", "Boston", "Lagos"]},
                   "unit": {"enum": ["celsius", "fahrenheit"]},
                   "days": {"type": "integer"}},
    "required": ["city", "unit", "days"]}})");
const Json kAlarm = Json::parse(R"({"name": "set_alarm", "strict": true,
  "parameters": {"type": "object", "additionalProperties": false,
    "properties": {"hour": {"type": "integer"}, "am": {"type": "boolean"},
                   "label": {"type": "string", "maxLength": 8},
                   "repeat": {"type": "array", "items": {"enum": ["mon", "tue"]},
                              "maxItems": 2}},
    "required": ["hour", "am"]}})");

// The arguments of a call, validated by hand against the tool's schema above.
bool valid_arguments(const std::string& name, const Json& args) {
  if (!args.is_object()) return false;
  auto only = [&](std::initializer_list<const char*> keys) {
    for (const auto& [key, value] : args.items()) {
      bool known = false;
      for (const char* k : keys) known = known || key == k;
      if (!known) return false;
    }
    return true;
  };
  if (name == "get_weather") {
    return only({"city", "unit", "days"}) && args.contains("city") && args.contains("unit") &&
           args.contains("days") &&
           (args["city"] == "Paris" || args["city"] == "Boston" || args["city"] == "Lagos") &&
           (args["unit"] == "celsius" || args["unit"] == "fahrenheit") &&
           args["days"].is_number_integer();
  }
  if (name == "set_alarm") {
    if (!only({"hour", "am", "label", "repeat"}) || !args.contains("hour") ||
        !args.contains("am") || !args["hour"].is_number_integer() || !args["am"].is_boolean()) {
      return false;
    }
    if (args.contains("label") &&
        !(args["label"].is_string() && args["label"].get<std::string>().size() <= 8 * 4)) {
      return false;
    }
    if (args.contains("repeat")) {
      const Json& r = args["repeat"];
      if (!r.is_array() || r.size() > 2) return false;
      for (const Json& d : r) {
        if (d != "mon" && d != "tue") return false;
      }
    }
    return true;
  }
  return false;
}

class StrictToolsServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Constrained sequences speculate too.
    model_ = new testing_fixture::DefaultModel(testing_fixture::open_default_model(kContext, 2));
  }
  static void TearDownTestSuite() { delete model_; }
  static Json chat_body(const Json& tool_choice, uint64_t seed) {
    return {{"messages", {{{"role", "user"}, {"content", "What is the weather in Paris?"}}}},
            {"tools",
             {{{"type", "function"}, {"function", kWeather}},
              {{"type", "function"}, {"function", kAlarm}}}},
            {"tool_choice", tool_choice},
            {"max_tokens", 400},
            {"temperature", 1.0},
            {"seed", seed},
            {"n", 2}};
  }
  static testing_fixture::DefaultModel* model_;
};
testing_fixture::DefaultModel* StrictToolsServerTest::model_ = nullptr;

TEST_F(StrictToolsServerTest, EveryForcedCallParsesAndValidates) {
  RunningServer server(*model_->engine, model_->tokenizer.get(), {}, kContext);
  int n_calls = 0;
  const Json choices[] = {"required",
                          {{"type", "function"}, {"function", {{"name", "set_alarm"}}}}};
  for (const Json& tool_choice : choices) {
    for (const uint64_t seed : {1u}) {
      const auto [status, answer] =
          post_json(server, "/v1/chat/completions", chat_body(tool_choice, seed), 900);
      ASSERT_EQ(status, 200) << answer.dump();
      for (const Json& choice : answer["choices"]) {
        EXPECT_EQ(choice["finish_reason"], "tool_calls") << choice.dump();
        const Json& calls = choice["message"]["tool_calls"];
        ASSERT_TRUE(calls.is_array() && !calls.empty()) << choice.dump();
        for (const Json& call : calls) {
          ++n_calls;
          const std::string name = call["function"]["name"];
          if (tool_choice.is_object() && &call == &calls[0]) {
            EXPECT_EQ(name, "set_alarm");
          }
          const std::string text = call["function"]["arguments"];
          ASSERT_TRUE(Json::accept(text)) << text;
          EXPECT_TRUE(valid_arguments(name, Json::parse(text))) << name << " " << text;
        }
      }
    }
  }
  EXPECT_GE(n_calls, 4);
}

// The model chooses: its content is free, but never DSML; where it calls, the call validates.
TEST_F(StrictToolsServerTest, FreeRepliesHoldNoStrayDsml) {
  RunningServer server(*model_->engine, model_->tokenizer.get(), {}, kContext);
  Json body = chat_body("auto", 3);
  body["max_tokens"] = 40;
  const auto [status, answer] = post_json(server, "/v1/chat/completions", body, 600);
  ASSERT_EQ(status, 200) << answer.dump();
  for (const Json& choice : answer["choices"]) {
    const Json& message = choice["message"];
    if (message["content"].is_string()) {
      EXPECT_EQ(message["content"].get<std::string>().find("DSML"), std::string::npos);
    }
    if (!message.contains("tool_calls")) continue;
    for (const Json& call : message["tool_calls"]) {
      const std::string text = call["function"]["arguments"];
      EXPECT_TRUE(valid_arguments(call["function"]["name"], Json::parse(text))) << text;
    }
  }
}

TEST_F(StrictToolsServerTest, AnthropicStrictToolInputValidates) {
  RunningServer server(*model_->engine, model_->tokenizer.get(), {}, kContext);
  int n_calls = 0;
  for (const char* question : {"Wake me at seven."}) {
    const Json body = {
        {"model", "m"},
        {"max_tokens", 400},
        {"temperature", 1.0},
        {"messages", {{{"role", "user"}, {"content", question}}}},
        {"tools",
         {{{"name", "get_weather"}, {"input_schema", kWeather["parameters"]}, {"strict", true}},
          {{"name", "set_alarm"}, {"input_schema", kAlarm["parameters"]}, {"strict", true}}}},
        {"tool_choice", {{"type", "any"}}}};
    const auto [status, answer] = post_json(server, "/v1/messages", body, 600);
    ASSERT_EQ(status, 200) << answer.dump();
    EXPECT_EQ(answer["stop_reason"], "tool_use") << answer.dump();
    for (const Json& block : answer["content"]) {
      if (block["type"] != "tool_use") continue;
      ++n_calls;
      EXPECT_TRUE(valid_arguments(block["name"], block["input"])) << block.dump();
    }
  }
  EXPECT_GE(n_calls, 1);
}

TEST_F(StrictToolsServerTest, UnsupportedSchemasAndThinkingAreRefusedByName) {
  RunningServer server(*model_->engine, model_->tokenizer.get(), {}, kContext);
  Json tool = kWeather;
  tool["parameters"]["properties"]["days"]["minimum"] = 1;
  Json body = chat_body("auto", 1);
  body["tools"] = {{{"type", "function"}, {"function", tool}}};
  auto [status, answer] = post_json(server, "/v1/chat/completions", body);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(answer["error"]["param"], "tools");
  EXPECT_EQ(answer["error"]["message"],
            "tool \"get_weather\" parameters: JSON Schema keyword \"minimum\" at "
            "#/properties/days is not supported");
  tool = kWeather;
  tool["parameters"]["anyOf"] = Json::array({Json::object()});
  body["tools"] = {{{"type", "function"}, {"function", tool}}};
  std::tie(status, answer) = post_json(server, "/v1/chat/completions", body);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(answer["error"]["message"],
            "tool \"get_weather\" parameters: JSON Schema keyword \"anyOf\" at # is not supported");
  body = chat_body("auto", 1);
  body["thinking"] = {{"type", "enabled"}};
  std::tie(status, answer) = post_json(server, "/v1/chat/completions", body);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(answer["error"]["message"], "strict tools with thinking are not supported");
  // Anthropic's strict tool: its input_schema held the same way, refused in Anthropic's shape.
  Json input_schema = kWeather["parameters"];
  input_schema["properties"]["city"] = {{"type", "string"}, {"format", "uri"}};
  const Json anthropic = {
      {"model", "m"},
      {"max_tokens", 10},
      {"messages", {{{"role", "user"}, {"content", "Weather?"}}}},
      {"tools", {{{"name", "get_weather"}, {"input_schema", input_schema}, {"strict", true}}}}};
  std::tie(status, answer) = post_json(server, "/v1/messages", anthropic);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(answer["type"], "error") << answer.dump();
  EXPECT_EQ(answer["error"]["type"], "invalid_request_error") << answer.dump();
  const std::string message = answer["error"]["message"].get<std::string>();
  EXPECT_NE(message.find("tool \"get_weather\""), std::string::npos) << message;
  EXPECT_NE(message.find("#/properties/city"), std::string::npos) << message;
}

}  // namespace
}  // namespace dsv4::server
