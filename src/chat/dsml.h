// DSML, the markup DeepSeek-V4 writes tool calls in, both ways. A block of calls follows the
// reply's content:
//
//   \n\n<｜DSML｜tool_calls>
//   <｜DSML｜invoke name="get_weather">
//   <｜DSML｜parameter name="location" string="true">Beijing</｜DSML｜parameter>
//   <｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>
//   </｜DSML｜invoke>
//   </｜DSML｜tool_calls>
//
// String arguments are written as they are (string="true"), all others as JSON.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "dsv4/chat.h"

namespace dsv4::chat {

// What starts a block of calls in a reply: the text before it is the content.
inline constexpr std::string_view kToolCallsStart = "\n\n<｜DSML｜tool_calls";
// The block's other tags.
inline constexpr std::string_view kBlockClose = "</｜DSML｜tool_calls>";
inline constexpr std::string_view kInvokeOpen = "<｜DSML｜invoke";
inline constexpr std::string_view kInvokeClose = "</｜DSML｜invoke";
inline constexpr std::string_view kParameterOpen = "<｜DSML｜parameter";
// A parameter's value ends at this, after its "<" (the value may hold any other text).
inline constexpr std::string_view kParameterCloseTail = "/｜DSML｜parameter";
// Between one tag and the next: the first tag's ">" and a newline.
inline constexpr std::string_view kTagEnd = ">\n";

// The start of a block whose first call is to `name` (any tool when empty): what a reply that
// must call a tool begins with.
std::string tool_calls_opening(std::string_view name);

// The block for an assistant message's calls, starting with kToolCallsStart. Arguments that are
// not JSON are passed as one string parameter named "arguments", as DeepSeek's encoder does;
// JSON that is not an object is an error naming the call.
Result<std::string> render_tool_calls(const std::vector<ToolCall>& calls);

struct ParsedToolCalls {
  std::vector<ToolCall> calls;  // arguments rebuilt as a JSON object's text, ids empty
  size_t end = 0;               // offset in the text just past </｜DSML｜tool_calls>
};

// Reads the block starting at `start` (just past kToolCallsStart) of `text`. Errors say what
// was expected and at which byte offset.
Result<ParsedToolCalls> parse_tool_calls(std::string_view text, size_t start);

}  // namespace dsv4::chat
