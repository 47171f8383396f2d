#include "server/stop_strings.h"

#include <algorithm>
#include <utility>

#include "base/partial_match.h"

namespace dsv4::server {

StopStrings::Piece StopStrings::add(std::string_view text) {
  if (stopped_) return {};
  held_ += text;
  size_t first = std::string::npos;
  for (const std::string& stop : stops_) {
    const size_t at = held_.find(stop);
    if (at < first) first = at, found_ = stop;
  }
  if (first != std::string::npos) {
    stopped_ = true;
    held_.resize(first);
    return {std::exchange(held_, ""), true};
  }
  const size_t keep = held_back();
  Piece piece{held_.substr(0, held_.size() - keep), false};
  held_.erase(0, held_.size() - keep);
  return piece;
}

size_t StopStrings::held_back() const {
  size_t longest = 0;
  for (const std::string& stop : stops_)
    longest = std::max(longest, partial_match_at_end(held_, stop));
  return longest;
}

}  // namespace dsv4::server
