// OpenAI's "stop": generation ends where the generated text first contains one of the request's
// stop strings, and the answer's text ends just before it. Text goes through piece by piece as
// it is decoded; what could still be the start of a stop string is held back until the next
// piece says, so streamed text never shows a stop string (or its start) that the non-streamed
// answer cuts. The whole text at once goes through the same way.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dsv4::server {

class StopStrings {
 public:
  explicit StopStrings(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  struct Piece {
    std::string text;      // text that can go out now
    bool stopped = false;  // a stop string was found: nothing follows `text`
  };
  // The next piece of generated text. After a stop, every piece is empty.
  Piece add(std::string_view text);
  // The text still held when generation ended without a stop string.
  std::string finish() { return std::exchange(held_, ""); }

  bool empty() const { return stops_.empty(); }
  bool stopped() const { return stopped_; }
  // The stop string that was found (the one that starts first in the text), or "".
  const std::string& found() const { return found_; }

 private:
  // Bytes at the end of held_ that begin some stop string (held back).
  size_t held_back() const;

  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
  std::string found_;
};

}  // namespace dsv4::server
