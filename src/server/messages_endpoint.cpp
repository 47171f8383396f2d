// Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens; messages_request.h):
// the conversation through the same chat encoder and engine as /v1/chat/completions, answered
// as a message (messages_json.h) or its stream of events (message_events.cpp), errors in
// Anthropic's shape.
#include <algorithm>

#include "server/messages_json.h"
#include "server/messages_request.h"
#include "server/output_constraint.h"
#include "server/server_state.h"

namespace dsv4::server {

using format::Json;

void CompletionServer::State::messages(const HttpRequest& req, HttpResponse& res) {
  auto parsed = parse_messages_request(req.body, limits());
  if (const auto* bad = std::get_if<RequestError>(&parsed)) {
    return send_error(res, 400, bad->message, bad->param, Api::kAnthropic);
  }
  MessagesRequest& request = std::get<MessagesRequest>(parsed);
  if (!constrain_output(vocabulary, request.format, request.sampling, "tools", res,
                        Api::kAnthropic)) {
    return;
  }
  const ThinkingMode thinking = request.conversation.thinking;
  std::optional<std::vector<int64_t>> prompt =
      chat_prompt_ids(request.conversation, res, Api::kAnthropic);
  if (!prompt) return;
  // Within what the context leaves (the engine refuses a prompt that fills it already).
  request.sampling.max_tokens =
      std::min(request.sampling.max_tokens,
               std::max<int64_t>(options.max_context - static_cast<int64_t>(prompt->size()), 1));
  const std::string id = std::to_string(next_id++);
  const auto n_prompt = static_cast<int64_t>(prompt->size());
  if (request.stream) {
    if (refused({*prompt, request.sampling}, "messages", res, Api::kAnthropic)) return;
    std::vector<std::unique_ptr<StreamChoices>> events;
    events.push_back(message_events(*tokenizer, {id, options.model_name, n_prompt},
                                    request.conversation, engine.eos_token_id(),
                                    reply_stops(request.stop, request.conversation)));
    Stream s{*std::move(prompt), request.sampling, {}, {}, std::move(events), Api::kAnthropic};
    return stream(res, std::make_shared<Stream>(std::move(s)));
  }
  std::vector<GeneratedText> texts;
  texts.emplace_back(*tokenizer, reply_stops(request.stop, request.conversation),
                     engine.eos_token_id());
  const auto answers =
      generate({{*prompt, request.sampling}}, texts, "messages", res, Api::kAnthropic);
  if (!answers) return;
  const Answer& answer = answers->front();
  const ChatReply reply = read_reply(request.conversation, answer.text,
                                     answer.out.stopped_at_eos && !answer.stop_string);
  Result<Json> content = message_content_json(reply, thinking, id);
  if (!content.ok()) return send_error(res, 500, content.status().message(), "", Api::kAnthropic);
  const std::string& found = texts.front().stop_found();
  send_json(
      res, 200,
      {{"id", "msg_" + id},
       {"type", "message"},
       {"role", "assistant"},
       {"model", options.model_name},
       {"content", *std::move(content)},
       {"stop_reason", stop_reason(reply, answer.out, found)},
       {"stop_sequence", stop_sequence_json(found)},
       {"usage", message_usage_json(n_prompt, static_cast<int64_t>(answer.out.tokens.size()))}});
}

void CompletionServer::State::count_tokens(const HttpRequest& req, HttpResponse& res) {
  auto parsed = parse_count_tokens_request(req.body);
  if (const auto* bad = std::get_if<RequestError>(&parsed)) {
    return send_error(res, 400, bad->message, bad->param, Api::kAnthropic);
  }
  std::optional<std::vector<int64_t>> prompt =
      chat_prompt_ids(std::get<Conversation>(parsed), res, Api::kAnthropic);
  if (prompt) send_json(res, 200, {{"input_tokens", prompt->size()}});
}

}  // namespace dsv4::server
