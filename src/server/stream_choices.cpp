#include "server/stream_choices.h"

#include <optional>
#include <utility>

#include "server/generated_text.h"
#include "server/openai_json.h"

namespace dsv4::server {
namespace {

using format::Json;

class CompletionChoices final : public StreamChoices {
 public:
  CompletionChoices(const Tokenizer* tokenizer, std::vector<std::string> stop, size_t index)
      : index_(index) {
    if (tokenizer != nullptr) text_of_.emplace(*tokenizer, std::move(stop));
  }

  std::vector<Json> start() override { return {}; }

  Result<std::vector<Json>> add(int64_t token) override {
    ids_.push_back(token);
    if (!text_of_) return std::vector<Json>{take(nullptr)};
    DSV4_ASSIGN_OR_RETURN(const std::string text, text_of_->add(token));
    text_ += text;
    if (text_of_->holding()) return std::vector<Json>{};
    return std::vector<Json>{take(nullptr)};
  }

  Result<std::vector<Json>> finish(const Generation& out) override {
    if (text_of_) {
      DSV4_ASSIGN_OR_RETURN(const std::string text, text_of_->finish());
      text_ += text;
    }
    return std::vector<Json>{take(finish_reason(out, stopped()))};
  }

  bool stopped() const override { return text_of_ && text_of_->stopped(); }

 private:
  // The choice for the text and ids not yet sent.
  Json take(const char* reason) {
    Json choice = {{"index", index_},
                   {"text", std::exchange(text_, "")},
                   {"token_ids", std::exchange(ids_, {})},
                   {"logprobs", nullptr},
                   {"finish_reason", reason == nullptr ? Json() : Json(reason)}};
    return choice;
  }

  size_t index_;
  std::optional<GeneratedText> text_of_;  // none without a tokenizer
  std::string text_;
  std::vector<int64_t> ids_;
};

class ChatChoices final : public StreamChoices {
 public:
  ChatChoices(const Tokenizer& tokenizer, ThinkingMode thinking, std::string id,
              int64_t eos_token_id, std::vector<std::string> stop, size_t index)
      : index_(index),
        id_(std::move(id)),
        text_of_(tokenizer, std::move(stop), eos_token_id),
        reply_(thinking) {}

  std::vector<Json> start() override {
    return {choice({{"role", "assistant"}, {"content", ""}}, nullptr)};
  }

  Result<std::vector<Json>> add(int64_t token) override {
    // The eos token adds no text: read_chat_reply reads it as the end of sentence.
    DSV4_ASSIGN_OR_RETURN(const std::string text, text_of_.add(token));
    const ChatDelta delta = reply_.add(text);
    if (delta.reasoning_content.empty() && delta.content.empty()) return std::vector<Json>{};
    return std::vector<Json>{choice(delta_json(delta), nullptr)};
  }

  Result<std::vector<Json>> finish(const Generation& out) override {
    DSV4_ASSIGN_OR_RETURN(const std::string held, text_of_.finish());
    ChatDelta last = reply_.add(held);
    const auto [reply, rest] = reply_.finish(finished(out));
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
    return std::vector<Json>{choice(delta, chat_finish_reason(reply, out, stopped()))};
  }

  bool stopped() const override { return text_of_.stopped(); }

 private:
  static Json delta_json(const ChatDelta& d) {
    Json delta = Json::object();
    if (!d.reasoning_content.empty()) delta["reasoning_content"] = d.reasoning_content;
    if (!d.content.empty()) delta["content"] = d.content;
    return delta;
  }

  Json choice(Json delta, const char* reason) const {
    return {{"index", index_},
            {"delta", std::move(delta)},
            {"logprobs", nullptr},
            {"finish_reason", reason == nullptr ? Json() : Json(reason)}};
  }

  // The reply reached its end of sentence: generation stopped at eos, and no stop string cut
  // the text before.
  bool finished(const Generation& out) const { return out.stopped_at_eos && !stopped(); }

  size_t index_;
  std::string id_;
  GeneratedText text_of_;
  ChatStream reply_;
};

}  // namespace

std::unique_ptr<StreamChoices> completion_choices(const Tokenizer* tokenizer,
                                                  std::vector<std::string> stop, size_t index) {
  return std::make_unique<CompletionChoices>(tokenizer, std::move(stop), index);
}

std::unique_ptr<StreamChoices> chat_choices(const Tokenizer& tokenizer, ThinkingMode thinking,
                                            std::string id, int64_t eos_token_id,
                                            std::vector<std::string> stop, size_t index) {
  return std::make_unique<ChatChoices>(tokenizer, thinking, std::move(id), eos_token_id,
                                       std::move(stop), index);
}

}  // namespace dsv4::server
