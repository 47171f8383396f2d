// libFuzzer target: any byte string as the body of POST /v1/chat/completions. The parser must
// accept it or refuse it naming a field; an accepted conversation is then encoded, and the
// prompt's own assistant turns parsed back as replies: errors are fine, crashes are not.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "dsv4/chat.h"
#include "server/chat_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const auto parsed = dsv4::server::parse_chat_request(body, {4096, 640});
  const auto* request = std::get_if<dsv4::server::ChatRequest>(&parsed);
  if (request == nullptr) {
    // The body as a reply the model wrote, in both modes.
    (void)dsv4::parse_chat_reply(body, dsv4::ThinkingMode::kChat);
    (void)dsv4::parse_chat_reply(body, dsv4::ThinkingMode::kThinking);
    return 0;
  }
  if (request->conversation.messages.empty()) std::abort();
  const dsv4::Result<std::string> prompt = dsv4::encode_chat(request->conversation);
  if (prompt.ok()) {
    const size_t turn = prompt->rfind("<｜Assistant｜>");
    if (turn != std::string::npos) {
      (void)dsv4::parse_chat_reply(std::string_view(*prompt).substr(turn),
                                   request->conversation.thinking);
    }
  }
  return 0;
}
