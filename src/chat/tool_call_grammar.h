// The grammar of a chat reply whose tool calls keep to their tools' schemas (structured outputs
// for strict tools, docs/structured_outputs.md): free content, then, where the model opens one,
// a DSML block of calls (chat/dsml.h) that parse_tool_calls reads back whole. A strict tool's
// call has exactly its `parameters`: one DSML parameter per property, in the schema's order,
// every required one, a plain string (type "string" alone, or an enum of strings) written raw
// (string="true") and any other value as JSON valid against its subschema (string="false"). A
// tool that is not strict takes any parameters. The content and the raw strings never hold a
// DSML tag, so the block is read where the grammar put it.
//
// The reply starts where the prompt left it: after the assistant's turn opened (the content
// first), or, for a forced tool (Conversation::forced_tool), inside the block it opened: after
// the block's opening for any tool, after the invoke's head for a named one.
#pragma once

#include <string_view>

#include "dsv4/status.h"
#include "grammar/grammar.h"

namespace dsv4::chat {

// `spec` is the JSON text {"tools": [OpenAI function objects: name, parameters, strict],
// "forced_tool": null | "" (any) | name}. Errors: a strict tool's schema keyword the compiler
// does not support, named with the tool (unimplemented), a malformed spec or schema (invalid
// argument).
Result<grammar::Grammar> tool_call_grammar(std::string_view spec);

}  // namespace dsv4::chat
