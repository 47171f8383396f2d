// kOpenAiSharedFields: every field of the list is known to both OpenAI endpoints (a null value,
// which the readers take as absent, passes each parser), and each endpoint's own fields stay its
// own: the other refuses them by name as unknown.
#include "server/openai_fields.h"

#include <gtest/gtest.h>

#include <string>
#include <variant>

#include "server/chat_request.h"
#include "server/completion_request.h"

namespace dsv4::server {
namespace {

constexpr RequestLimits kLimits{4096, 640};
const std::string kChat = R"({"messages": [{"role": "user", "content": "hi"}])";
const std::string kCompletion = R"({"prompt": "hi")";

// The parser's refusal of `body`, or none.
template <typename Parse>
std::optional<RequestError> refusal(Parse parse, const std::string& body) {
  auto parsed = parse(body, kLimits);
  if (const auto* bad = std::get_if<RequestError>(&parsed)) return *bad;
  return std::nullopt;
}

std::optional<RequestError> chat(const std::string& body) {
  return refusal(parse_chat_request, body);
}
std::optional<RequestError> completion(const std::string& body) {
  return refusal(parse_completion_request, body);
}

TEST(OpenAiFieldsTest, BothEndpointsTakeEverySharedField) {
  ASSERT_FALSE(chat(kChat + "}"));
  ASSERT_FALSE(completion(kCompletion + "}"));
  for (const std::string_view field : kOpenAiSharedFields) {
    const std::string extra = ", \"" + std::string(field) + "\": null}";
    const auto by_chat = chat(kChat + extra), by_completion = completion(kCompletion + extra);
    EXPECT_FALSE(by_chat) << field << ": " << by_chat->message;
    EXPECT_FALSE(by_completion) << field << ": " << by_completion->message;
  }
}

TEST(OpenAiFieldsTest, EachEndpointsOwnFieldsAreUnknownToTheOther) {
  for (const char* chat_only : {"messages", "max_completion_tokens", "top_logprobs", "tools",
                                "tool_choice", "parallel_tool_calls", "chat_template_kwargs",
                                "thinking", "reasoning_effort", "continue_final_message",
                                "add_generation_prompt"}) {
    const auto bad = completion(kCompletion + ", \"" + chat_only + "\": null}");
    ASSERT_TRUE(bad) << chat_only;
    EXPECT_EQ(bad->param, chat_only);
    EXPECT_EQ(bad->message, "unknown field \"" + std::string(chat_only) + "\"");
  }
  for (const char* completion_only : {"prompt", "echo", "suffix", "best_of"}) {
    const auto bad = chat(kChat + ", \"" + completion_only + "\": null}");
    ASSERT_TRUE(bad) << completion_only;
    EXPECT_EQ(bad->param, completion_only);
    EXPECT_EQ(bad->message, "unknown field \"" + std::string(completion_only) + "\"");
  }
}

}  // namespace
}  // namespace dsv4::server
