// The text of DeepSeek-V4's chat tokens, as encoding_dsv4.py writes them. Each is one added token
// in the checkpoint's tokenizer.json; the fullwidth bar ｜ (U+FF5C) and ▁ (U+2581) are part of it.
#pragma once

#include <string_view>

#include "dsv4/chat.h"  // kEndOfSentence, which the public API needs too

namespace dsv4::chat {

inline constexpr std::string_view kBeginOfSentence = "<｜begin▁of▁sentence｜>";
inline constexpr std::string_view kUser = "<｜User｜>";
inline constexpr std::string_view kAssistant = "<｜Assistant｜>";
inline constexpr std::string_view kThinkStart = "<think>";
inline constexpr std::string_view kThinkEnd = "</think>";
// DSML, DeepSeek's markup for tool calls, prefixes each of its tags with this.
inline constexpr std::string_view kDsml = "｜DSML｜";

}  // namespace dsv4::chat
