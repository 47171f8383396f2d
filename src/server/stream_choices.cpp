#include "server/stream_choices.h"

#include <optional>
#include <utility>

#include "server/chat_stream.h"
#include "server/incremental_decoder.h"
#include "server/openai_json.h"

namespace dsv4::server {
namespace {

using format::Json;

class CompletionChoices final : public StreamChoices {
 public:
  explicit CompletionChoices(const Tokenizer* tokenizer) {
    if (tokenizer != nullptr) decoder_.emplace(*tokenizer);
  }

  std::vector<Json> start() override { return {}; }

  Result<std::vector<Json>> add(int64_t token) override {
    ids_.push_back(token);
    if (!decoder_) return std::vector<Json>{take(nullptr)};
    DSV4_ASSIGN_OR_RETURN(const std::string text, decoder_->add(token));
    text_ += text;
    if (decoder_->holding()) return std::vector<Json>{};
    return std::vector<Json>{take(nullptr)};
  }

  Result<std::vector<Json>> finish(const Generation& out) override {
    if (decoder_) {
      DSV4_ASSIGN_OR_RETURN(const std::string text, decoder_->finish());
      text_ += text;
    }
    return std::vector<Json>{take(finish_reason(out))};
  }

 private:
  // The choice for the text and ids not yet sent.
  Json take(const char* reason) {
    Json choice = {{"index", 0},
                   {"text", std::exchange(text_, "")},
                   {"token_ids", std::exchange(ids_, {})},
                   {"logprobs", nullptr},
                   {"finish_reason", reason == nullptr ? Json() : Json(reason)}};
    return choice;
  }

  std::optional<IncrementalDecoder> decoder_;
  std::string text_;
  std::vector<int64_t> ids_;
};

class ChatChoices final : public StreamChoices {
 public:
  ChatChoices(const Tokenizer& tokenizer, ThinkingMode thinking, std::string id,
              int64_t eos_token_id)
      : tokenizer_(tokenizer),
        thinking_(thinking),
        id_(std::move(id)),
        eos_token_id_(eos_token_id),
        decoder_(tokenizer),
        reply_(thinking) {}

  std::vector<Json> start() override {
    return {choice({{"role", "assistant"}, {"content", ""}}, nullptr)};
  }

  Result<std::vector<Json>> add(int64_t token) override {
    tokens_.push_back(token);
    // The eos token ends generation; decode_chat_reply reads it as the end of sentence.
    if (token == eos_token_id_) return std::vector<Json>{};
    DSV4_ASSIGN_OR_RETURN(const std::string text, decoder_.add(token));
    const ChatDelta delta = reply_.add(text);
    if (delta.reasoning_content.empty() && delta.content.empty()) return std::vector<Json>{};
    return std::vector<Json>{choice(delta_json(delta), nullptr)};
  }

  Result<std::vector<Json>> finish(const Generation& out) override {
    DSV4_ASSIGN_OR_RETURN(const std::string held, decoder_.finish());
    ChatDelta last = reply_.add(held);
    DSV4_ASSIGN_OR_RETURN(const ChatReply reply,
                          decode_chat_reply(tokenizer_, tokens_, out.stopped_at_eos, thinking_));
    const ChatDelta rest = reply_.finish(reply);
    last.reasoning_content += rest.reasoning_content;
    last.content += rest.content;
    Json delta = delta_json(last);
    // Tool calls are not streamed piece by piece: they come whole, from the reply parsed at the
    // end, in this last delta (OpenAI's streamed calls carry their index).
    if (!reply.tool_calls.empty()) {
      Json calls = tool_calls_json(reply.tool_calls, id_);
      for (size_t i = 0; i < calls.size(); ++i) calls[i]["index"] = i;
      delta["tool_calls"] = calls;
    }
    return std::vector<Json>{choice(delta, chat_finish_reason(reply, out))};
  }

 private:
  static Json delta_json(const ChatDelta& d) {
    Json delta = Json::object();
    if (!d.reasoning_content.empty()) delta["reasoning_content"] = d.reasoning_content;
    if (!d.content.empty()) delta["content"] = d.content;
    return delta;
  }

  static Json choice(Json delta, const char* reason) {
    return {{"index", 0},
            {"delta", std::move(delta)},
            {"logprobs", nullptr},
            {"finish_reason", reason == nullptr ? Json() : Json(reason)}};
  }

  const Tokenizer& tokenizer_;
  ThinkingMode thinking_;
  std::string id_;
  int64_t eos_token_id_;
  IncrementalDecoder decoder_;
  ChatStream reply_;
  std::vector<int64_t> tokens_;  // all generated, for the reply's parse at the end
};

}  // namespace

std::unique_ptr<StreamChoices> completion_choices(const Tokenizer* tokenizer) {
  return std::make_unique<CompletionChoices>(tokenizer);
}

std::unique_ptr<StreamChoices> chat_choices(const Tokenizer& tokenizer, ThinkingMode thinking,
                                            std::string id, int64_t eos_token_id) {
  return std::make_unique<ChatChoices>(tokenizer, thinking, std::move(id), eos_token_id);
}

}  // namespace dsv4::server
