#include "server/stream_choices.h"

#include <optional>
#include <utility>

#include "server/generated_text.h"
#include "server/openai_json.h"

namespace dsv4::server {
namespace {

using format::Json;

// The logprobs a stream has yet to send, and how they are written.
class PendingLogprobs {
 public:
  explicit PendingLogprobs(TokenText text_of) : text_of_(std::move(text_of)) {}

  void add(const TokenLogprob* logprob) {
    if (text_of_ && logprob != nullptr) pending_.push_back(*logprob);
  }
  // The completion API's object for the pending ones (text_offset going on from the last), or
  // null when logprobs were not asked.
  Json take_completion() {
    if (!text_of_) return nullptr;
    std::vector<int64_t> tokens;
    std::vector<const TokenLogprob*> logprobs;
    for (const TokenLogprob& lp : pending_) tokens.push_back(lp.token), logprobs.push_back(&lp);
    Json out = completion_logprobs_json(tokens, logprobs, text_of_, offset_);
    for (const Json& text : out["tokens"]) offset_ += text.get_ref<const std::string&>().size();
    pending_.clear();
    return out;
  }
  // The chat API's {"content": [...]} for the pending ones, or null when not asked or none are.
  Json take_chat() {
    if (!text_of_ || pending_.empty()) return nullptr;
    Json out = chat_logprobs_json(pending_, text_of_);
    pending_.clear();
    return out;
  }

 private:
  TokenText text_of_;  // null: logprobs were not asked
  std::vector<TokenLogprob> pending_;
  size_t offset_ = 0;
};

class CompletionChoices final : public StreamChoices {
 public:
  CompletionChoices(const Tokenizer* tokenizer, std::vector<std::string> stop, size_t index,
                    TokenText logprob_text, std::string echo, int64_t hidden_token)
      : index_(index), logprobs_(std::move(logprob_text)), text_(std::move(echo)) {
    if (tokenizer != nullptr) text_of_.emplace(*tokenizer, std::move(stop), hidden_token);
  }

  std::vector<Json> start() override {
    if (text_.empty()) return {};
    return {take(nullptr)};  // the echoed prompt
  }

  Result<std::vector<Json>> add(int64_t token, const TokenLogprob* logprob) override {
    ids_.push_back(token);
    logprobs_.add(logprob);
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
                   {"logprobs", logprobs_.take_completion()},
                   {"finish_reason", reason == nullptr ? Json() : Json(reason)}};
    return choice;
  }

  size_t index_;
  PendingLogprobs logprobs_;
  std::optional<GeneratedText> text_of_;  // none without a tokenizer
  std::string text_;
  std::vector<int64_t> ids_;
};

class ChatChoices final : public StreamChoices {
 public:
  ChatChoices(const Tokenizer& tokenizer, const Conversation& conversation, std::string id,
              int64_t eos_token_id, std::vector<std::string> stop, size_t index,
              TokenText logprob_text)
      : index_(index),
        id_(std::move(id)),
        text_of_(tokenizer, std::move(stop), eos_token_id),
        reply_(conversation),
        logprobs_(std::move(logprob_text)) {}

  std::vector<Json> start() override {
    // As OpenAI's first delta, refusal included.
    return {choice({{"role", "assistant"}, {"content", ""}, {"refusal", nullptr}}, nullptr)};
  }

  Result<std::vector<Json>> add(int64_t token, const TokenLogprob* logprob) override {
    logprobs_.add(logprob);  // sent with the next delta
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

  Json choice(Json delta, const char* reason) {
    return {{"index", index_},
            {"delta", std::move(delta)},
            {"logprobs", logprobs_.take_chat()},
            {"finish_reason", reason == nullptr ? Json() : Json(reason)}};
  }

  // The reply reached its end of sentence: generation stopped at eos, and no stop string cut
  // the text before.
  bool finished(const Generation& out) const { return out.stopped_at_eos && !stopped(); }

  size_t index_;
  std::string id_;
  GeneratedText text_of_;
  ChatStream reply_;
  PendingLogprobs logprobs_;
};

}  // namespace

std::unique_ptr<StreamChoices> completion_choices(const Tokenizer* tokenizer,
                                                  std::vector<std::string> stop, size_t index,
                                                  TokenText logprob_text, std::string echo,
                                                  int64_t hidden_token) {
  return std::make_unique<CompletionChoices>(
      tokenizer, std::move(stop), index, std::move(logprob_text), std::move(echo), hidden_token);
}

std::unique_ptr<StreamChoices> chat_choices(const Tokenizer& tokenizer,
                                            const Conversation& conversation, std::string id,
                                            int64_t eos_token_id, std::vector<std::string> stop,
                                            size_t index, TokenText logprob_text) {
  return std::make_unique<ChatChoices>(tokenizer, conversation, std::move(id), eos_token_id,
                                       std::move(stop), index, std::move(logprob_text));
}

}  // namespace dsv4::server
