// The chat flags dsv4 generate --chat and dsv4 chat share: a system message, thinking mode and
// the reasoning effort, and the conversation they start.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "dsv4/chat.h"

namespace dsv4::tools {

struct ChatFlags {
  std::string system;
  bool thinking = false;
  std::string reasoning_effort = "high";
};

// --system, --thinking and --reasoning-effort (high or max, with --thinking); each needs
// `needs` when one is given (generate's --chat).
void add_chat_flags(CLI::App* cmd, ChatFlags& flags, CLI::Option* needs = nullptr);

ThinkingMode thinking_mode(const ChatFlags& flags);

// A conversation holding the system message alone (when one is given), in the flags' mode.
Conversation start_conversation(const ChatFlags& flags);

}  // namespace dsv4::tools
