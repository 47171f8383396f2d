#include "reply_printer.h"

#include <cstdio>

namespace dsv4::tools {
namespace {

void print(const std::string& text) {
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
}

}  // namespace

ReplyPrinter::ReplyPrinter(const Tokenizer& tokenizer, std::optional<ThinkingMode> chat,
                           int64_t eos_token_id)
    : decoder_(tokenizer), eos_token_id_(eos_token_id), thinking_(chat == ThinkingMode::kThinking) {
  if (!chat) return;
  reply_.emplace(*chat);
  if (thinking_) print("<think>\n");
}

bool ReplyPrinter::token(int64_t id) {
  if (reply_ && id == eos_token_id_) return true;  // a chat reply's end, not its text
  Result<std::string> piece = decoder_.add(id);
  if (!piece.ok()) failed_ = piece.status();
  if (piece.ok()) show(*piece);
  return piece.ok();
}

Result<ChatReply> ReplyPrinter::finish(const Generation& out) {
  DSV4_RETURN_IF_ERROR(failed_);
  DSV4_ASSIGN_OR_RETURN(const std::string held, decoder_.finish());
  show(held);
  ChatReply reply{"", text_, {}};
  if (reply_) {
    auto [read, rest] = reply_->finish(out.stopped_at_eos);
    print_delta(rest);
    close_reasoning();
    reply = std::move(read);
  }
  print("\n");
  return reply;
}

void ReplyPrinter::show(const std::string& piece) {
  if (reply_) return print_delta(reply_->add(piece));
  text_ += piece;
  print(piece);
}

void ReplyPrinter::print_delta(const ChatDelta& delta) {
  print(delta.reasoning_content);
  if (!delta.content.empty()) close_reasoning();
  print(delta.content);
}

void ReplyPrinter::close_reasoning() {
  if (thinking_ && !reasoning_closed_) print("\n</think>\n");
  reasoning_closed_ = true;
}

}  // namespace dsv4::tools
