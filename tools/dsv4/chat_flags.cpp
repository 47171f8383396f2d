#include "chat_flags.h"

namespace dsv4::tools {

void add_chat_flags(CLI::App* cmd, ChatFlags& flags, CLI::Option* needs) {
  CLI::Option* system =
      cmd->add_option("--system", flags.system, "a system message before the conversation");
  CLI::Option* thinking =
      cmd->add_flag("--thinking", flags.thinking, "thinking mode (prints the reasoning)");
  CLI::Option* effort =
      cmd->add_option("--reasoning-effort", flags.reasoning_effort, "with --thinking: high or max")
          ->capture_default_str()
          ->check(CLI::IsMember({"high", "max"}))
          ->needs(thinking);
  if (needs) {
    for (CLI::Option* option : {system, thinking, effort}) option->needs(needs);
  }
}

ThinkingMode thinking_mode(const ChatFlags& flags) {
  return flags.thinking ? ThinkingMode::kThinking : ThinkingMode::kChat;
}

Conversation start_conversation(const ChatFlags& flags) {
  Conversation chat;
  if (!flags.system.empty()) chat.messages.push_back({ChatRole::kSystem, flags.system, "", {}, ""});
  chat.thinking = thinking_mode(flags);
  chat.effort = flags.reasoning_effort == "max" ? ReasoningEffort::kMax : ReasoningEffort::kHigh;
  return chat;
}

}  // namespace dsv4::tools
