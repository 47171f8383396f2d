// Anthropic's streamed message (messages_events in stream_choices.h): the events of
// https://docs.anthropic.com/en/api/messages-streaming, each one server-sent event named by its
// "type". The blocks open in the order the non-streamed answer lists them (messages_json.h): in
// thinking mode a thinking block from the start; a text block at the reply's first content, or
// empty at the end when the reply has neither content nor tool calls; then each tool call as a
// tool_use block whose input comes whole in one input_json_delta.
#include <utility>

#include "server/generated_text.h"
#include "server/messages_json.h"
#include "server/stream_choices.h"

namespace dsv4::server {
namespace {

using format::Json;

class MessageEvents final : public StreamChoices {
 public:
  MessageEvents(const Tokenizer& tokenizer, const MessageStart& message,
                const Conversation& conversation, int64_t eos_token_id,
                std::vector<std::string> stop)
      : message_(message),
        thinking_(conversation.thinking),
        text_of_(tokenizer, std::move(stop), eos_token_id),
        reply_(conversation) {}

  std::vector<Json> start() override {
    std::vector<Json> events = {{{"type", "message_start"},
                                 {"message",
                                  {{"id", "msg_" + message_.id},
                                   {"type", "message"},
                                   {"role", "assistant"},
                                   {"model", message_.model},
                                   {"content", Json::array()},
                                   {"stop_reason", nullptr},
                                   {"stop_sequence", nullptr},
                                   {"usage", message_usage_json(message_.input_tokens, 0)}}}}};
    if (thinking_ == ThinkingMode::kThinking) open(Block::kThinking, events);
    return events;
  }

  Result<std::vector<Json>> add(int64_t token, const TokenLogprob*) override {
    DSV4_ASSIGN_OR_RETURN(const std::string text, text_of_.add(token));
    std::vector<Json> events;
    send(reply_.add(text), events);
    return events;
  }

  Result<std::vector<Json>> finish(const Generation& out) override {
    DSV4_ASSIGN_OR_RETURN(const std::string held, text_of_.finish());
    std::vector<Json> events;
    send(reply_.add(held), events);
    const auto [reply, rest] = reply_.finish(out.stopped_at_eos && !stopped());
    send(rest, events);
    if (!text_opened_ && reply.tool_calls.empty()) open(Block::kText, events);
    close(events);
    for (size_t i = 0; i < reply.tool_calls.size(); ++i) {
      DSV4_ASSIGN_OR_RETURN(Json call,
                            tool_use_json(reply.tool_calls[i], tool_use_id(message_.id, i)));
      const std::string input = call["input"].dump();
      call["input"] = Json::object();
      events.push_back(
          {{"type", "content_block_start"}, {"index", ++index_}, {"content_block", call}});
      events.push_back({{"type", "content_block_delta"},
                        {"index", index_},
                        {"delta", {{"type", "input_json_delta"}, {"partial_json", input}}}});
      events.push_back({{"type", "content_block_stop"}, {"index", index_}});
    }
    const std::string& found = text_of_.stop_found();
    events.push_back({{"type", "message_delta"},
                      {"delta",
                       {{"stop_reason", stop_reason(reply, out, found)},
                        {"stop_sequence", stop_sequence_json(found)}}},
                      {"usage", {{"output_tokens", out.tokens.size()}}}});
    events.push_back({{"type", "message_stop"}});
    return events;
  }

  bool stopped() const override { return text_of_.stopped(); }

 private:
  enum class Block { kNone, kThinking, kText };

  void open(Block block, std::vector<Json>& events) {
    close(events);
    const Json content = block == Block::kThinking
                             ? Json{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}
                             : Json{{"type", "text"}, {"text", ""}};
    events.push_back(
        {{"type", "content_block_start"}, {"index", ++index_}, {"content_block", content}});
    open_ = block;
    text_opened_ = text_opened_ || block == Block::kText;
  }

  void close(std::vector<Json>& events) {
    if (open_ != Block::kNone)
      events.push_back({{"type", "content_block_stop"}, {"index", index_}});
    open_ = Block::kNone;
  }

  // Reasoning into the thinking block, content into the text block (opened at its first piece).
  void send(const ChatDelta& delta, std::vector<Json>& events) {
    if (!delta.reasoning_content.empty()) {
      if (open_ != Block::kThinking) open(Block::kThinking, events);
      events.push_back(
          {{"type", "content_block_delta"},
           {"index", index_},
           {"delta", {{"type", "thinking_delta"}, {"thinking", delta.reasoning_content}}}});
    }
    if (!delta.content.empty()) {
      if (open_ != Block::kText) open(Block::kText, events);
      events.push_back({{"type", "content_block_delta"},
                        {"index", index_},
                        {"delta", {{"type", "text_delta"}, {"text", delta.content}}}});
    }
  }

  MessageStart message_;
  ThinkingMode thinking_;
  GeneratedText text_of_;
  ChatStream reply_;
  Block open_ = Block::kNone;
  int64_t index_ = -1;  // the last block started
  bool text_opened_ = false;
};

}  // namespace

std::unique_ptr<StreamChoices> message_events(const Tokenizer& tokenizer,
                                              const MessageStart& message,
                                              const Conversation& conversation,
                                              int64_t eos_token_id, std::vector<std::string> stop) {
  return std::make_unique<MessageEvents>(tokenizer, message, conversation, eos_token_id,
                                         std::move(stop));
}

}  // namespace dsv4::server
