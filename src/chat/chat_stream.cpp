#include "base/partial_match.h"
#include "chat/dsml.h"            // kToolCallsStart
#include "chat/special_tokens.h"  // kThinkEnd
#include "dsv4/chat.h"

namespace dsv4 {
namespace {

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace

void ChatStream::release(ChatDelta& out) {
  while (part_ != Part::kToolCalls) {
    const bool reasoning = part_ == Part::kReasoning;
    const std::string_view marker = reasoning ? chat::kThinkEnd : chat::kToolCallsStart;
    std::string& to = reasoning ? out.reasoning_content : out.content;
    const size_t at = held_.find(marker);
    if (at == std::string::npos) {
      // Markers start with an ASCII byte, so what is held back starts a whole character.
      const size_t keep = partial_match_at_end(held_, marker);
      to += held_.substr(0, held_.size() - keep);
      held_.erase(0, held_.size() - keep);
      return;
    }
    to += held_.substr(0, at);
    if (reasoning) {
      held_.erase(0, at + marker.size());  // </think> itself is neither reasoning nor content
      part_ = Part::kContent;
    } else {
      held_.erase(0, at);  // the tool-call block waits for the end
      part_ = Part::kToolCalls;
    }
  }
}

ChatDelta ChatStream::add(std::string_view text) {
  text_ += text;
  held_ += text;
  ChatDelta out;
  release(out);
  sent_.reasoning_content += out.reasoning_content;
  sent_.content += out.content;
  return out;
}

ChatStream::End ChatStream::finish(bool finished) const {
  End end{read_chat_reply(text_, finished, thinking_), {}};
  const ChatReply& reply = end.reply;
  if (starts_with(reply.reasoning_content, sent_.reasoning_content) &&
      starts_with(reply.content, sent_.content)) {
    end.rest = {reply.reasoning_content.substr(sent_.reasoning_content.size()),
                reply.content.substr(sent_.content.size())};
  } else {
    end.rest = {"", held_};  // the format broke after reasoning went out (see the header)
  }
  return end;
}

}  // namespace dsv4
