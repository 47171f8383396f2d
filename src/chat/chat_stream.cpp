#include <algorithm>

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

ChatStream::ChatStream(ThinkingMode thinking)
    : thinking_(thinking),
      part_(thinking == ThinkingMode::kThinking ? Part::kReasoning : Part::kContent) {}

ChatStream::ChatStream(const Conversation& conversation) : ChatStream(conversation.thinking) {
  text_ = held_ = reply_opening(conversation);
  held_opening_ = conversation.forced_tool ? 0 : conversation.prefill.size();
  ChatDelta unsent;  // the forced tool call's start is held: nothing is released
  release(unsent);
}

void ChatStream::release_text(size_t n, std::string& to, std::string& sent) {
  const size_t known = std::min(n, held_opening_);
  to.append(held_, known, n - known);
  sent.append(held_, 0, n);
  held_.erase(0, n);
  held_opening_ -= known;
}

void ChatStream::release(ChatDelta& out) {
  while (part_ != Part::kToolCalls) {
    const bool reasoning = part_ == Part::kReasoning;
    const std::string_view marker = reasoning ? chat::kThinkEnd : chat::kToolCallsStart;
    std::string& to = reasoning ? out.reasoning_content : out.content;
    std::string& sent = reasoning ? sent_.reasoning_content : sent_.content;
    const size_t at = held_.find(marker);
    if (at == std::string::npos) {
      // Markers start with an ASCII byte, so what is held back starts a whole character.
      release_text(held_.size() - partial_match_at_end(held_, marker), to, sent);
      return;
    }
    release_text(at, to, sent);
    if (reasoning) {
      // </think> itself is neither reasoning nor content
      held_opening_ -= std::min(held_opening_, marker.size());
      held_.erase(0, marker.size());
      part_ = Part::kContent;
    } else {
      part_ = Part::kToolCalls;  // the tool-call block waits for the end
    }
  }
}

ChatDelta ChatStream::add(std::string_view text) {
  text_ += text;
  held_ += text;
  ChatDelta out;
  release(out);
  return out;
}

ChatStream::End ChatStream::finish(bool finished) const {
  End end{read_chat_reply(text_, finished, thinking_), {}};
  const ChatReply& reply = end.reply;
  // What the client has: the sent text, and the prefill's held text where the reply holds it
  // as content (a tool-call block's start that broke) or reasoning.
  ChatDelta with_prefill = sent_;
  (part_ == Part::kReasoning ? with_prefill.reasoning_content : with_prefill.content) +=
      held_.substr(0, held_opening_);
  for (const ChatDelta& known : {with_prefill, sent_}) {
    if (starts_with(reply.reasoning_content, known.reasoning_content) &&
        starts_with(reply.content, known.content)) {
      end.rest = {reply.reasoning_content.substr(known.reasoning_content.size()),
                  reply.content.substr(known.content.size())};
      return end;
    }
  }
  // The format broke after reasoning went out (see the header).
  end.rest = {"", held_.substr(held_opening_)};
  return end;
}

}  // namespace dsv4
