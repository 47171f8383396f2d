#include "server/server_state.h"

#include <utility>

#include "server/messages_json.h"
#include "server/openai_json.h"

namespace dsv4::server {
namespace {

using format::Json;

// One server-sent event: "data: " and the payload on one line, ended by a blank line.
bool send_event(ResponseStream& sink, const std::string& payload) {
  const std::string event = "data: " + payload + "\n\n";
  return sink.write(event);
}

// An Anthropic event: named by its "type" on an event: line before the data.
bool send_named_event(ResponseStream& sink, const Json& event) {
  const std::string text =
      "event: " + event["type"].get<std::string>() + "\ndata: " + event.dump() + "\n\n";
  return sink.write(text);
}

}  // namespace

void send_json(HttpResponse& res, int status, const Json& body) {
  res.status = status;
  // Bytes that are not UTF-8 (quoted from a body that was not, in a parse error) become U+FFFD
  // instead of an exception and a 500.
  res.set_content(body.dump(-1, ' ', false, Json::error_handler_t::replace), "application/json");
}

void send_error(HttpResponse& res, int status, const std::string& message, const std::string& param,
                Api api) {
  send_json(res, status,
            api == Api::kOpenAi ? error_json(status, message, param)
                                : messages_error_json(status, message));
}

void send_engine_error(HttpResponse& res, const Status& status, const char* param, Api api) {
  const bool callers = status.code() == StatusCode::kInvalidArgument;
  const bool busy = status.code() == StatusCode::kResourceExhausted;
  send_error(res, callers ? 400 : busy ? 503 : 500, status.message(), callers ? param : "", api);
}

bool Stream::send(ResponseStream& sink, const std::vector<Json>& list) const {
  for (const Json& choice : list) {
    if (api == Api::kAnthropic) {
      if (!send_named_event(sink, choice)) return false;
      continue;
    }
    Json chunk = envelope;
    chunk["choices"] = Json::array({choice});
    // With include_usage every chunk has the field, null until the last (as OpenAI's do).
    if (options.include_usage) chunk["usage"] = nullptr;
    if (!send_event(sink, chunk.dump())) return false;
  }
  return true;
}

bool Stream::send_error(ResponseStream& sink, const std::string& message) const {
  return api == Api::kAnthropic ? send_named_event(sink, messages_error_json(500, message))
                                : send_event(sink, error_json(500, message).dump());
}

bool Stream::end(ResponseStream& sink, bool succeeded, int64_t n_generated) const {
  if (api == Api::kAnthropic) return true;
  if (succeeded && options.include_usage) {
    Json chunk = envelope;
    chunk["choices"] = Json::array();
    chunk["usage"] = usage_json(static_cast<int64_t>(prompt.size()), n_generated);
    if (!send_event(sink, chunk.dump())) return false;
  }
  return send_event(sink, "[DONE]");
}

std::vector<GenerateRequest> choices_of(const GenerateRequest& request, size_t n) {
  std::vector<GenerateRequest> choices(n, request);
  for (size_t i = 0; i < choices.size(); ++i) choices[i].sampling.seed += i;
  return choices;
}

std::vector<std::string> reply_stops(std::vector<std::string> stop, const Conversation& c) {
  if (c.no_tool_calls) stop.emplace_back(tool_calls_marker());
  return stop;
}

}  // namespace dsv4::server
