// Structured outputs in a request body (docs/structured_outputs.md):
//   response_format     OpenAI's: {"type": "text"} (nothing), {"type": "json_object"},
//                       {"type": "json_schema", "json_schema": {"name", "schema", "strict",
//                       "description"}} (strict or not, the reply is held to the schema, as
//                       vLLM does);
//   structured_outputs  vLLM's extension: {"json": schema}, {"regex": pattern} or
//                       {"choice": [strings]} (one of them); its grammar, structural_tag and
//                       whitespace_pattern are refused by name.
// At most one of the two. The schema itself is checked when it is compiled (server side), where
// a keyword the compiler does not support is refused by name.
// Strict tools (OpenAI's function "strict": true, Anthropic's tool "strict": true) hold a chat
// reply's tool calls to their schemas the same way.
#pragma once

#include <optional>

#include "dsv4/chat.h"
#include "dsv4/structured_output.h"
#include "format/json.h"
#include "server/request_fields.h"

namespace dsv4::server {

// The format `body` asks for into `out` (nullopt: free text).
std::optional<RequestError> read_output_format(const format::OrderedJson& body,
                                               std::optional<OutputFormat>& out);

// The format strict tools put on a chat reply (chat/tool_call_grammar.h) into `out`: set when a
// tool's function object has "strict": true and the reply may call a tool. Refused (param
// "tools") in thinking mode and with a prefill, where the reply does not start as the grammar
// does.
std::optional<RequestError> read_tool_call_format(const Conversation& conversation,
                                                  std::optional<OutputFormat>& out);

// The tool_choice modes both APIs have, into `c`: "auto" (the model chooses), "none" (no call)
// and `any_call` (a call to any tool: OpenAI's "required", Anthropic's "any"). False, with `c`
// unchanged, when `mode` is none of them.
bool read_tool_mode(const format::OrderedJson& mode, const char* any_call, Conversation& c);

}  // namespace dsv4::server
