// libFuzzer target: any byte string as the body of POST /v1/chat/completions and of Anthropic's
// POST /v1/messages (and its count_tokens). Each parser must accept it or refuse it naming a
// field; an accepted conversation is then encoded, the prompt's own assistant turns parsed back
// as replies, and the body streamed as the reply to it (after its prefill or forced tool call):
// errors are fine, crashes are not.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string_view>

#include "dsv4/chat.h"
#include "server/chat_request.h"
#include "server/messages_request.h"

namespace {

// `text` as the reply to `conversation`, in three pieces, streamed and read whole.
void reply(const dsv4::Conversation& conversation, std::string_view text) {
  dsv4::ChatStream stream(conversation);
  for (size_t at = 0, piece = text.size() / 3 + 1; at < text.size(); at += piece) {
    (void)stream.add(text.substr(at, piece));
  }
  (void)stream.finish(true);
  (void)dsv4::read_reply(conversation, std::string(text), false);
}

// An accepted conversation: the model answers its last message (a user's or a tool's), and the
// prompt's last assistant turn parses as a reply.
void encode(const dsv4::Conversation& conversation, std::string_view body) {
  const auto& messages = conversation.messages;
  if (messages.empty() || messages.back().role == dsv4::ChatRole::kAssistant ||
      messages.back().role == dsv4::ChatRole::kSystem) {
    std::abort();
  }
  const dsv4::Result<std::string> prompt = dsv4::encode_chat(conversation);
  if (!prompt.ok()) return;
  reply(conversation, body);
  const size_t turn = prompt->rfind("<｜Assistant｜>");
  if (turn != std::string::npos) {
    (void)dsv4::parse_chat_reply(std::string_view(*prompt).substr(turn), conversation.thinking);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const auto chat = dsv4::server::parse_chat_request(body, {4096, 640});
  const auto messages = dsv4::server::parse_messages_request(body, {4096, 640});
  const auto counted = dsv4::server::parse_count_tokens_request(body);
  if (const auto* request = std::get_if<dsv4::server::ChatRequest>(&chat)) {
    encode(request->conversation, body);
  }
  if (const auto* request = std::get_if<dsv4::server::MessagesRequest>(&messages)) {
    // Anthropic's max_tokens may pass the context: the server cuts it once it knows the prompt.
    const dsv4::SamplingParams& s = request->sampling;
    if (s.max_tokens < 0 || s.max_tokens > std::numeric_limits<int32_t>::max() ||
        request->stop.size() > 4) {
      std::abort();
    }
    encode(request->conversation, body);
  }
  if (const auto* conversation = std::get_if<dsv4::Conversation>(&counted)) {
    encode(*conversation, body);
  }
  // The body as a reply the model wrote, in both modes.
  (void)dsv4::parse_chat_reply(body, dsv4::ThinkingMode::kChat);
  (void)dsv4::parse_chat_reply(body, dsv4::ThinkingMode::kThinking);
  return 0;
}
