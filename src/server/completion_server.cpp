#include "server/completion_server.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>

#include "dsv4/chat.h"
#include "format/json.h"
#include "server/chat_request.h"
#include "server/completion_request.h"
#include "server/generated_text.h"
#include "server/openai_json.h"
#include "server/server_metrics.h"
#include "server/server_state.h"
#include "server/stream_choices.h"
#include "server/tokenize_request.h"

namespace dsv4::server {
namespace {

using format::Json;

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The OpenAI assistant message for a reply; `id` is the response's.
Json assistant_message(const ChatReply& reply, ThinkingMode thinking, const std::string& id) {
  // refusal: null, as OpenAI's messages have it (the SDK's type lists it).
  Json message = {{"role", "assistant"}, {"content", reply.content}, {"refusal", nullptr}};
  if (thinking == ThinkingMode::kThinking) message["reasoning_content"] = reply.reasoning_content;
  if (!reply.tool_calls.empty()) message["tool_calls"] = tool_calls_json(reply.tool_calls, id);
  return message;
}

// What names choice i's tool calls: the response's id and, past the first choice, the index.
std::string choice_id(const std::string& id, size_t i) {
  return i == 0 ? id : id + "." + std::to_string(i);
}

// A prompt's token ids, or nullopt after a 400 naming `param` with why they could not be made.
std::optional<std::vector<int64_t>> ids_or_refusal(Result<std::vector<int64_t>> ids,
                                                   HttpResponse& res, const char* param, Api api) {
  if (ids.ok()) return *std::move(ids);
  send_error(res, 400, ids.status().message(), param, api);
  return std::nullopt;
}

// {"prompt_tokens", "completion_tokens", "total_tokens"}: the prompt once, every choice's tokens.
Json answers_usage(int64_t n_prompt, const std::vector<Answer>& answers) {
  int64_t n_completion = 0;
  for (const Answer& a : answers) n_completion += static_cast<int64_t>(a.out.tokens.size());
  return usage_json(n_prompt, n_completion);
}

}  // namespace

std::optional<std::vector<int64_t>> CompletionServer::State::prompt_ids(const Prompt& prompt,
                                                                        HttpResponse& res) const {
  if (const auto* ids = std::get_if<std::vector<int64_t>>(&prompt)) return *ids;
  if (tokenizer == nullptr) {
    send_error(res, 400, "this server has no tokenizer.json: send the prompt as token ids",
               "prompt");
    return std::nullopt;
  }
  return ids_or_refusal(tokenizer->encode(std::get<std::string>(prompt)), res, "prompt",
                        Api::kOpenAi);
}

void CompletionServer::State::complete(const HttpRequest& req, HttpResponse& res) {
  auto parsed = parse_completion_request(req.body, limits());
  if (const auto* bad = std::get_if<RequestError>(&parsed)) {
    return send_error(res, 400, bad->message, bad->param);
  }
  CompletionRequest& request = std::get<CompletionRequest>(parsed);
  if (!constrain_output(vocabulary, request.format, request.sampling, "response_format", res,
                        Api::kOpenAi)) {
    return;
  }
  if (tokenizer == nullptr && !request.stop.empty()) {
    return send_error(res, 400, "this server has no tokenizer.json, which stop strings need",
                      "stop");
  }
  std::vector<std::vector<int64_t>> prompts;
  std::vector<std::string> prompt_texts;  // echoed
  for (const Prompt& given : request.prompts) {
    std::optional<std::vector<int64_t>> ids = prompt_ids(given, res);
    if (!ids) return;
    const Result<std::string> text = echoed_text(request.echo, given, *ids);
    if (!text.ok()) return send_error(res, 500, text.status().message());
    prompts.push_back(*std::move(ids));
    prompt_texts.push_back(*text);
  }
  if (request.stream.enabled) {  // one prompt (the parser refuses a list)
    if (refused({prompts.front(), request.sampling}, "prompt", res)) return;
    const std::string id = "cmpl-" + std::to_string(next_id++);
    std::vector<std::unique_ptr<StreamChoices>> choices;
    for (int64_t i = 0; i < request.n; ++i) {
      choices.push_back(completion_choices(tokenizer, request.stop, static_cast<size_t>(i),
                                           logprob_text(request.logprobs), prompt_texts.front(),
                                           hidden_text_token(request)));
    }
    return stream(
        res, std::make_shared<Stream>(Stream{std::move(prompts.front()), request.sampling,
                                             request.stream, chunk_envelope(id, "text_completion"),
                                             std::move(choices), Api::kOpenAi, request.logprobs}));
  }
  // Every prompt's n choices in one batch: prompt p's choice i at index p * n + i.
  std::vector<GenerateRequest> requests;
  std::vector<GeneratedText> texts;
  int64_t n_prompt = 0;
  for (const std::vector<int64_t>& prompt : prompts) {
    GenerateRequest base{prompt, request.sampling};
    base.logprobs = request.logprobs;
    base.prompt_logprobs = request.echo && request.logprobs >= 0;
    for (GenerateRequest& r : choices_of(base, static_cast<size_t>(request.n)))
      requests.push_back(std::move(r));
    for (int64_t i = 0; tokenizer != nullptr && i < request.n; ++i)
      texts.emplace_back(*tokenizer, request.stop, hidden_text_token(request));
    n_prompt += static_cast<int64_t>(prompt.size());
  }
  const auto answers = generate(std::move(requests), texts, "prompt", res);
  if (!answers) return;
  Json choices = Json::array();
  for (size_t k = 0; k < answers->size(); ++k) {
    const size_t p = k / static_cast<size_t>(request.n);
    choices.push_back(completion_choice(request, prompts[p], prompt_texts[p], (*answers)[k], k));
  }
  send_json(res, 200,
            {{"id", "cmpl-" + std::to_string(next_id++)},
             {"object", "text_completion"},
             {"created", unix_seconds()},
             {"model", options.model_name},
             {"choices", std::move(choices)},
             {"usage", answers_usage(n_prompt, *answers)}});
}

int64_t CompletionServer::State::hidden_text_token(const CompletionRequest& request) const {
  return request.format ? engine.eos_token_id() : -1;
}

Result<std::string> CompletionServer::State::echoed_text(bool echo, const Prompt& given,
                                                         const std::vector<int64_t>& ids) const {
  if (!echo) return std::string();
  if (const auto* text = std::get_if<std::string>(&given)) return *text;
  if (tokenizer == nullptr) return std::string();
  return tokenizer->decode(ids);
}

Json CompletionServer::State::completion_choice(const CompletionRequest& request,
                                                const std::vector<int64_t>& prompt,
                                                const std::string& prompt_text,
                                                const Answer& answer, size_t index) const {
  const Generation& out = answer.out;
  Json choice = {{"index", index},
                 {"text", prompt_text + answer.text},
                 {"token_ids", out.tokens},
                 {"logprobs", nullptr},
                 {"finish_reason", finish_reason(out, answer.stop_string)}};
  if (request.logprobs < 0) return choice;
  std::vector<int64_t> tokens;
  std::vector<const TokenLogprob*> logprobs;
  if (request.echo) {
    tokens = prompt;
    logprobs.push_back(nullptr);  // the first prompt token has no context
    for (const TokenLogprob& lp : out.prompt_logprobs) logprobs.push_back(&lp);
  }
  tokens.insert(tokens.end(), out.tokens.begin(), out.tokens.end());
  for (const TokenLogprob& lp : out.logprobs) logprobs.push_back(&lp);
  choice["logprobs"] =
      completion_logprobs_json(tokens, logprobs, [this](int64_t id) { return token_text(id); });
  return choice;
}

RequestLimits CompletionServer::State::limits() const {
  return {options.max_context, engine.vocab_size()};
}

TokenText CompletionServer::State::logprob_text(int64_t logprobs) const {
  if (logprobs < 0) return nullptr;
  return [this](int64_t id) { return token_text(id); };
}

std::string CompletionServer::State::token_text(int64_t id) const {
  if (tokenizer == nullptr) return "token_id:" + std::to_string(id);
  Result<std::string> text = tokenizer->decode({id});
  return text.ok() ? *std::move(text) : "token_id:" + std::to_string(id);
}

bool CompletionServer::State::refused(const GenerateRequest& request, const char* param,
                                      HttpResponse& res, Api api) const {
  const Status checked = engine.check(request);
  if (!checked.ok()) send_engine_error(res, checked, param, api);
  return !checked.ok();
}

std::optional<std::vector<Answer>> CompletionServer::State::generate(
    std::vector<GenerateRequest> requests, std::vector<GeneratedText>& texts, const char* param,
    HttpResponse& res, Api api) {
  std::vector<Answer> answers(requests.size());
  for (GenerateRequest& r : requests) r.cancelled = res.client_gone;
  Status unreadable = ok_status();  // an id the tokenizer does not know
  for (size_t i = 0; i < texts.size(); ++i) {
    requests[i].on_token = [&, i](int64_t token) {
      Result<std::string> piece = texts[i].add(token);
      if (!piece.ok()) unreadable = piece.status();
      if (piece.ok()) answers[i].text += *piece;
      return piece.ok() && !texts[i].stopped();
    };
  }
  Result<std::vector<Generation>> out = engine.generate_batch(requests);
  if (!out.ok()) {
    send_engine_error(res, out.status(), param, api);
    return std::nullopt;
  }
  for (size_t i = 0; i < answers.size(); ++i) {
    answers[i].out = std::move((*out)[i]);
    if (i >= texts.size() || !unreadable.ok()) continue;
    Result<std::string> rest = texts[i].finish();
    if (rest.ok()) answers[i].text += *rest;
    if (!rest.ok()) unreadable = rest.status();
    answers[i].stop_string = texts[i].stopped();
  }
  if (!unreadable.ok()) {
    send_error(res, 500, unreadable.message(), "", api);
    return std::nullopt;
  }
  return answers;
}

std::optional<std::vector<int64_t>> CompletionServer::State::chat_prompt_ids(
    const Conversation& conversation, HttpResponse& res, Api api) const {
  if (tokenizer == nullptr) {
    send_error(res, 400, "this server has no tokenizer.json, which chat needs", "messages", api);
    return std::nullopt;
  }
  Result<std::string> prompt = encode_chat(conversation);
  return ids_or_refusal(prompt.ok() ? tokenize_chat_prompt(*tokenizer, *prompt) : prompt.status(),
                        res, "messages", api);
}

void CompletionServer::State::chat(const HttpRequest& req, HttpResponse& res) {
  auto parsed = parse_chat_request(req.body, limits());
  if (const auto* bad = std::get_if<RequestError>(&parsed)) {
    return send_error(res, 400, bad->message, bad->param);
  }
  ChatRequest& request = std::get<ChatRequest>(parsed);
  if (!constrain_output(vocabulary, request.format, request.sampling, request.format_field, res,
                        Api::kOpenAi)) {
    return;
  }
  std::optional<std::vector<int64_t>> prompt = chat_prompt_ids(request.conversation, res);
  if (!prompt) return;
  if (!request.max_tokens_given) {
    // The rest of the context (the engine refuses a prompt that fills it already).
    request.sampling.max_tokens =
        std::max<int64_t>(options.max_context - static_cast<int64_t>(prompt->size()), 0);
  }
  const std::string id = std::to_string(next_id++);
  if (request.stream.enabled) {
    if (refused({*prompt, request.sampling}, "messages", res)) return;
    std::vector<std::unique_ptr<StreamChoices>> choices;
    for (int64_t i = 0; i < request.n; ++i) {
      choices.push_back(chat_choices(*tokenizer, request.conversation,
                                     choice_id(id, static_cast<size_t>(i)), engine.eos_token_id(),
                                     reply_stops(request.stop, request.conversation),
                                     static_cast<size_t>(i), logprob_text(request.logprobs)));
    }
    return stream(res, std::make_shared<Stream>(
                           Stream{*std::move(prompt), request.sampling, request.stream,
                                  chunk_envelope("chatcmpl-" + id, "chat.completion.chunk"),
                                  std::move(choices), Api::kOpenAi, request.logprobs}));
  }
  GenerateRequest base{*prompt, request.sampling};
  base.logprobs = request.logprobs;
  std::vector<GeneratedText> texts;
  for (int64_t i = 0; i < request.n; ++i)
    texts.emplace_back(*tokenizer, reply_stops(request.stop, request.conversation),
                       engine.eos_token_id());
  const auto answers =
      generate(choices_of(base, static_cast<size_t>(request.n)), texts, "messages", res);
  if (!answers) return;
  Json choices = Json::array();
  for (size_t i = 0; i < answers->size(); ++i) {
    const Answer& answer = (*answers)[i];
    // The reply reached its end of sentence unless a stop string cut it first.
    const ChatReply reply = read_reply(request.conversation, answer.text,
                                       answer.out.stopped_at_eos && !answer.stop_string);
    const std::string call_id = choice_id(id, i);
    Json choice = {{"index", i},
                   {"message", assistant_message(reply, request.conversation.thinking, call_id)},
                   {"logprobs", nullptr},
                   {"finish_reason", chat_finish_reason(reply, answer.out, answer.stop_string)}};
    if (request.logprobs >= 0) {
      choice["logprobs"] = chat_logprobs_json(answer.out.logprobs,
                                              [this](int64_t token) { return token_text(token); });
    }
    choices.push_back(std::move(choice));
  }
  send_json(res, 200,
            {{"id", "chatcmpl-" + id},
             {"object", "chat.completion"},
             {"created", unix_seconds()},
             {"model", options.model_name},
             {"choices", std::move(choices)},
             {"usage", answers_usage(static_cast<int64_t>(prompt->size()), *answers)}});
}

void CompletionServer::State::tokenize(const HttpRequest& req, HttpResponse& res) const {
  auto parsed = parse_tokenize_request(req.body);
  if (const auto* bad = std::get_if<RequestError>(&parsed)) {
    return send_error(res, 400, bad->message, bad->param);
  }
  if (tokenizer == nullptr) return send_error(res, 400, "this server has no tokenizer.json");
  const TokenizeRequest& request = std::get<TokenizeRequest>(parsed);
  Result<std::vector<int64_t>> ids = tokenizer->encode(request.prompt, request.add_special_tokens);
  if (!ids.ok()) return send_error(res, 400, ids.status().message(), "prompt");
  send_json(res, 200,
            {{"tokens", *ids}, {"count", ids->size()}, {"max_model_len", options.max_context}});
}

void CompletionServer::State::detokenize(const HttpRequest& req, HttpResponse& res) const {
  auto parsed = parse_detokenize_request(req.body);
  if (const auto* bad = std::get_if<RequestError>(&parsed)) {
    return send_error(res, 400, bad->message, bad->param);
  }
  if (tokenizer == nullptr) return send_error(res, 400, "this server has no tokenizer.json");
  Result<std::string> text = tokenizer->decode(std::get<DetokenizeRequest>(parsed).tokens);
  if (!text.ok()) return send_error(res, 400, text.status().message(), "tokens");
  send_json(res, 200, {{"prompt", *text}});
}

Json CompletionServer::State::chunk_envelope(const std::string& id, const char* object) const {
  return {
      {"id", id}, {"object", object}, {"created", unix_seconds()}, {"model", options.model_name}};
}

void CompletionServer::State::stream(HttpResponse& res, std::shared_ptr<Stream> s) {
  // The HTTP layer sends the status and runs this after the handler returns, on its thread.
  res.content_type = "text/event-stream";
  res.stream = [this, s, gone = res.client_gone](ResponseStream& sink) {
    run_stream(*s, sink, gone);
  };
}

bool CompletionServer::State::run_stream(
    Stream& s, ResponseStream& sink, const std::shared_ptr<const std::atomic<bool>>& client_gone) {
  for (const auto& choices : s.choices) {
    if (!s.send(sink, choices->start())) return false;
  }
  bool connected = true;
  Status failed = ok_status();  // a chunk that could not be made (an id the tokenizer lacks)
  GenerateRequest base{s.prompt, s.sampling};
  base.logprobs = s.logprobs;
  base.cancelled = client_gone;
  std::vector<GenerateRequest> requests = choices_of(base, s.choices.size());
  std::vector<std::optional<TokenLogprob>> logprob(requests.size());  // of the token drawn next
  for (size_t i = 0; i < requests.size(); ++i) {
    StreamChoices& choices = *s.choices[i];
    if (s.logprobs >= 0) {
      requests[i].on_logprob = [&, i](const TokenLogprob& lp) { logprob[i] = lp; };
    }
    requests[i].on_token = [&, i](int64_t token) {
      if (!connected || !failed.ok()) return false;
      const std::optional<TokenLogprob> lp = std::exchange(logprob[i], std::nullopt);
      Result<std::vector<Json>> chunk = choices.add(token, lp ? &*lp : nullptr);
      if (!chunk.ok()) failed = chunk.status();
      connected = chunk.ok() && s.send(sink, *chunk);
      return connected && !choices.stopped();  // a stop string ends generation too
    };
  }
  Result<std::vector<Generation>> out = engine.generate_batch(requests);
  if (failed.ok() && !out.ok()) failed = out.status();
  if (!connected && failed.ok()) return false;  // the client left: generation stopped
  int64_t n_generated = 0;
  for (size_t i = 0; i < s.choices.size() && failed.ok(); ++i) {
    Result<std::vector<Json>> last = s.choices[i]->finish((*out)[i]);
    if (!last.ok()) {
      failed = last.status();
      break;
    }
    if (!s.send(sink, *last)) return false;
    n_generated += static_cast<int64_t>((*out)[i].tokens.size());
  }
  // The status went out with the first event: an error is an event of its own.
  if (!failed.ok() && !s.send_error(sink, failed.message())) return false;
  return s.end(sink, failed.ok(), n_generated);
}

}  // namespace dsv4::server
