// encode_chat: a Conversation -> DeepSeek-V4's prompt text, following encoding_dsv4.py's
// encode_messages step for step (tests/chat/golden holds its outputs):
//   1. the request's tools go on the first message when it is a system message, else on an
//      empty system message put first (encode_messages reads tools from a message);
//   2. tool results become <tool_result> blocks of a user turn, and runs of user and tool
//      messages merge into one turn, blocks joined by a blank line (V4 has no tool role);
//   3. within a turn, tool results are put in the order of the calls they answer;
//   4. each turn is rendered; after a user turn that the assistant answers next (or that ends
//      the conversation) the assistant's turn is opened.
// Reasoning of assistant turns before the last user turn is dropped in thinking mode, unless
// tools are given (then the model sees all of its earlier reasoning).
#include <algorithm>
#include <map>
#include <optional>

#include "chat/dsml.h"
#include "chat/python_json.h"
#include "chat/special_tokens.h"
#include "dsv4/chat.h"

namespace dsv4 {
namespace {

using chat::kAssistant;
using chat::kThinkEnd;
using chat::kThinkStart;

constexpr std::string_view kReasoningEffortMax =
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to "
    "resolve the root cause, rigorously stress-testing your logic against all potential paths, "
    "edge cases, and adversarial scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate "
    "step, considered alternative, and rejected hypothesis to ensure absolutely no assumption "
    "is left unchecked.\n\n";

// The tools section of the system message, around the schemas (one JSON line each).
constexpr std::string_view kToolsHead =
    "## Tools\n\n"
    "You have access to a set of tools to help answer the user's question. You can invoke tools "
    "by writing a \"<｜DSML｜tool_calls>\" block like the following:\n\n"
    "<｜DSML｜tool_calls>\n"
    "<｜DSML｜invoke name=\"$TOOL_NAME\">\n"
    "<｜DSML｜parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE"
    "</｜DSML｜parameter>\n"
    "...\n"
    "</｜DSML｜invoke>\n"
    "<｜DSML｜invoke name=\"$TOOL_NAME2\">\n"
    "...\n"
    "</｜DSML｜invoke>\n"
    "</｜DSML｜tool_calls>\n\n"
    "String parameters should be specified as is and set `string=\"true\"`. For all other types "
    "(numbers, booleans, arrays, objects), pass the value in JSON format and set "
    "`string=\"false\"`.\n\n"
    "If thinking_mode is enabled (triggered by <think>), you MUST output your complete reasoning "
    "inside <think>...</think> BEFORE any tool calls or final response.\n\n"
    "Otherwise, output directly after </think> with tool calls or final response.\n\n"
    "### Available Tool Schemas\n\n";
constexpr std::string_view kToolsTail =
    "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke "
    "tool calls.\n";

// A part of a user turn: text, or a tool's result.
struct Block {
  bool tool_result = false;
  std::string text;
  std::string tool_call_id;  // tool results
};

// One rendered unit: a system or assistant message as given, or a merged user turn.
struct Turn {
  ChatRole role;
  const ChatMessage* message = nullptr;  // system, assistant
  std::vector<Block> blocks;             // user
  bool tools = false;                    // the system turn that carries the tool schemas
};

const ChatMessage kEmptySystem{ChatRole::kSystem, "", "", {}, ""};

Turn turn_of(ChatRole role, const ChatMessage* message) {
  Turn turn;
  turn.role = role;
  turn.message = message;
  return turn;
}

std::vector<Turn> merge_turns(const Conversation& c) {
  std::vector<Turn> turns;
  const bool system_first = !c.messages.empty() && c.messages[0].role == ChatRole::kSystem;
  if (!c.tools.empty() && !system_first) turns.push_back(turn_of(ChatRole::kSystem, &kEmptySystem));
  for (const ChatMessage& m : c.messages) {
    if (m.role == ChatRole::kUser || m.role == ChatRole::kTool) {
      const bool tool = m.role == ChatRole::kTool;
      if (turns.empty() || turns.back().role != ChatRole::kUser) {
        turns.push_back(turn_of(ChatRole::kUser, nullptr));
      }
      turns.back().blocks.push_back({tool, m.content, tool ? m.tool_call_id : ""});
    } else {
      turns.push_back(turn_of(m.role, &m));
    }
  }
  if (!c.tools.empty()) turns[0].tools = true;
  return turns;
}

// Puts the tool results of each user turn in the order of the latest assistant's calls (a
// stable sort; results whose id no call has go first, as DeepSeek's order 0 puts them).
void order_tool_results(std::vector<Turn>& turns) {
  std::map<std::string, size_t> call_order;
  for (Turn& turn : turns) {
    if (turn.role == ChatRole::kAssistant && !turn.message->tool_calls.empty()) {
      call_order.clear();
      for (size_t i = 0; i < turn.message->tool_calls.size(); ++i) {
        const std::string& id = turn.message->tool_calls[i].id;
        if (!id.empty()) call_order[id] = i;  // a repeated id: its last call, as in a dict
      }
    }
    if (turn.role != ChatRole::kUser || call_order.empty()) continue;
    std::vector<Block> results;
    for (const Block& b : turn.blocks) {
      if (b.tool_result) results.push_back(b);
    }
    if (results.size() < 2) continue;
    const auto rank = [&](const Block& b) {
      const auto it = call_order.find(b.tool_call_id);
      return it == call_order.end() ? size_t{0} : it->second;
    };
    std::stable_sort(results.begin(), results.end(),
                     [&](const Block& a, const Block& b) { return rank(a) < rank(b); });
    size_t next = 0;
    for (Block& b : turn.blocks) {
      if (b.tool_result) b = results[next++];
    }
  }
}

Result<std::string> render_tools(const std::vector<std::string>& tools) {
  std::string out = std::string(kToolsHead);
  for (size_t i = 0; i < tools.size(); ++i) {
    Result<chat::PythonJson> schema =
        chat::python_json_loads(tools[i], "tools[" + std::to_string(i) + "]");
    if (!schema.ok()) return schema.status();
    if (i) out += "\n";
    out += chat::python_json_dumps(*schema);
  }
  return out + std::string(kToolsTail);
}

std::string render_user(const Turn& turn) {
  std::string out = std::string(chat::kUser);
  for (size_t i = 0; i < turn.blocks.size(); ++i) {
    const Block& b = turn.blocks[i];
    if (i) out += "\n\n";
    if (b.tool_result) out += "<tool_result>";
    out += b.text;
    if (b.tool_result) out += "</tool_result>";
  }
  return out;
}

Result<std::string> render_assistant(const ChatMessage& m, bool with_reasoning) {
  std::string out = with_reasoning ? m.reasoning_content + std::string(kThinkEnd) : "";
  out += m.content;
  if (!m.tool_calls.empty()) {
    Result<std::string> calls = chat::render_tool_calls(m.tool_calls);
    if (!calls.ok()) return calls.status();
    out += *calls;
  }
  return out + std::string(kEndOfSentence);
}

// A forced tool call opens the reply, so it cannot follow reasoning; the named tool must exist.
Status check_forced_tool(const Conversation& c) {
  if (!c.forced_tool) return ok_status();
  if (c.no_tool_calls) return invalid_argument("a forced tool call and no tool calls at once");
  if (c.thinking == ThinkingMode::kThinking) {
    return invalid_argument(
        "a forced tool call needs thinking off: it opens the reply, before any reasoning");
  }
  if (c.tools.empty()) return invalid_argument("a forced tool call needs tools");
  if (c.forced_tool->empty()) return ok_status();
  for (const std::string& tool : c.tools) {
    Result<chat::PythonJson> function = chat::python_json_loads(tool, "a tool");
    const chat::PythonJson* name = function.ok() ? function->member("name") : nullptr;
    if (name != nullptr && name->kind == chat::PythonJson::Kind::kString &&
        name->text == *c.forced_tool) {
      return ok_status();
    }
  }
  return invalid_argument("the forced tool \"" + *c.forced_tool + "\" is not among the tools");
}

// A prefill opens the reply, as a forced tool call does: in chat mode, after a user's turn.
Status check_prefill(const Conversation& c, const std::vector<Turn>& turns) {
  if (c.prefill.empty()) return ok_status();
  if (c.forced_tool) return invalid_argument("a prefill and a forced tool call at once");
  if (c.thinking == ThinkingMode::kThinking) {
    return invalid_argument(
        "a prefill needs thinking off: it opens the reply, before any reasoning");
  }
  if (turns.empty() || turns.back().role != ChatRole::kUser) {
    return invalid_argument("a prefill continues the reply to a user's message or a tool's");
  }
  return ok_status();
}

}  // namespace

std::string_view tool_calls_marker() { return chat::kToolCallsStart; }

std::string reply_opening(const Conversation& conversation) {
  if (conversation.forced_tool) return chat::tool_calls_opening(*conversation.forced_tool);
  return conversation.prefill;
}

Result<std::string> encode_chat(const Conversation& conversation) {
  DSV4_RETURN_IF_ERROR(check_forced_tool(conversation));
  std::vector<Turn> turns = merge_turns(conversation);
  order_tool_results(turns);
  DSV4_RETURN_IF_ERROR(check_prefill(conversation, turns));
  const bool thinking = conversation.thinking == ThinkingMode::kThinking;
  const bool drop_reasoning = conversation.tools.empty();
  size_t last_user = 0;  // with no user turn every turn counts as after it, as in DeepSeek's
  bool any_user = false;
  for (size_t i = 0; i < turns.size(); ++i) {
    if (turns[i].role == ChatRole::kUser) last_user = i, any_user = true;
  }
  const auto after_last_user = [&](size_t i) { return !any_user || i > last_user; };

  std::string prompt = std::string(chat::kBeginOfSentence);
  if (thinking && conversation.effort == ReasoningEffort::kMax && !turns.empty()) {
    prompt += kReasoningEffortMax;
  }
  for (size_t i = 0; i < turns.size(); ++i) {
    const Turn& turn = turns[i];
    if (turn.role == ChatRole::kSystem) {
      prompt += turn.message->content;
      if (turn.tools) {
        Result<std::string> tools = render_tools(conversation.tools);
        if (!tools.ok()) return tools.status();
        prompt += "\n\n" + *tools;
      }
    } else if (turn.role == ChatRole::kUser) {
      prompt += render_user(turn);
      const bool answered_next = i + 1 == turns.size() || turns[i + 1].role == ChatRole::kAssistant;
      if (answered_next) {
        const bool think = thinking && (!drop_reasoning || i >= last_user);
        prompt += std::string(kAssistant) + std::string(think ? kThinkStart : kThinkEnd);
      }
    } else {
      Result<std::string> reply =
          render_assistant(*turn.message, thinking && (!drop_reasoning || after_last_user(i)));
      if (!reply.ok()) return reply.status();
      prompt += *reply;
    }
  }
  if (!turns.empty() && turns.back().role == ChatRole::kUser) prompt += reply_opening(conversation);
  return prompt;
}

Result<std::vector<int64_t>> tokenize_chat_prompt(const Tokenizer& tokenizer,
                                                  const std::string& prompt) {
  // The prompt already holds every special token the model saw, begin-of-sentence first, so a
  // tokenizer.json post-processor's template must not add its own.
  return tokenizer.encode(prompt, /*add_special_tokens=*/false);
}

}  // namespace dsv4
