#include "server/generated_text.h"

namespace dsv4::server {

Result<std::string> GeneratedText::add(int64_t token) {
  if (token == hidden_token_ || stopped()) return std::string();
  DSV4_ASSIGN_OR_RETURN(const std::string text, decoder_.add(token));
  return stop_.add(text).text;
}

Result<std::string> GeneratedText::finish() {
  if (stopped()) return std::string();
  DSV4_ASSIGN_OR_RETURN(const std::string held, decoder_.finish());
  StopStrings::Piece last = stop_.add(held);  // the held bytes may complete a stop string
  if (!last.stopped) last.text += stop_.finish();
  return last.text;
}

}  // namespace dsv4::server
