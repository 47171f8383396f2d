// Stop strings (server/stop_strings.h) against a reference written the obvious way: after each
// piece (a token's text), look for every stop string in all the text so far; at the first piece
// where one occurs, generation ends and the text is cut at the earliest occurrence. Random texts
// over a small alphabet, so stop strings occur, overlap and straddle pieces, fed in random
// pieces. What goes out, piece by piece, is always a prefix of the reference's answer and ends as
// exactly it; `stopped` says whether a stop string occurred, and `found` which.
#include "server/stop_strings.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace dsv4::server {
namespace {

struct Cut {
  std::string text;
  bool stopped;
  std::string found;  // the stop string at the cut (the first listed of those starting there)
};

Cut reference_cut(const std::vector<std::string>& pieces, const std::vector<std::string>& stops) {
  std::string text;
  for (const std::string& piece : pieces) {
    text += piece;
    size_t first = std::string::npos;
    std::string found;
    for (const std::string& s : stops) {
      if (text.find(s) < first) first = text.find(s), found = s;
    }
    if (first != std::string::npos) return {text.substr(0, first), true, found};
  }
  return {text, false, ""};
}

std::string random_text(std::mt19937_64& rng, size_t max_len) {
  static constexpr char kAlphabet[] = "ab\n";  // few letters: matches, near misses, overlaps
  std::string out(rng() % (max_len + 1), ' ');
  for (char& c : out) c = kAlphabet[rng() % 3];
  return out;
}

TEST(StopStringsTest, PiecesAddUpToTheWholeTextCutAtTheFirstStop) {
  std::mt19937_64 rng(std::random_device{}());
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<std::string> stops;
    for (size_t n = 1 + rng() % 3; stops.size() < n;) {
      const std::string s = random_text(rng, 4);
      if (!s.empty()) stops.push_back(s);
    }
    const std::string text = random_text(rng, 30);
    std::vector<std::string> pieces;
    for (size_t at = 0; at < text.size();) {
      const size_t n = std::min(text.size() - at, size_t{rng() % 5});
      pieces.push_back(text.substr(at, n));
      at += n;
    }
    const Cut want = reference_cut(pieces, stops);
    StopStrings stop(stops);
    std::string sent;
    bool stopped = false;
    for (size_t i = 0; i < pieces.size() && !stopped; ++i) {
      const StopStrings::Piece piece = stop.add(pieces[i]);
      sent += piece.text;
      stopped = piece.stopped;
      ASSERT_EQ(want.text.compare(0, sent.size(), sent), 0)
          << "sent \"" << sent << "\" is not a prefix of \"" << want.text << "\"";
    }
    if (!stopped) sent += stop.finish();
    ASSERT_EQ(sent, want.text) << "text \"" << text << "\"";
    ASSERT_EQ(stopped, want.stopped) << "text \"" << text << "\"";
    EXPECT_EQ(stop.stopped(), want.stopped);
    EXPECT_EQ(stop.found(), want.found) << "text \"" << text << "\"";
  }
}

TEST(StopStringsTest, HoldsBackOnlyWhatCouldBeginAStop) {
  StopStrings stop({"END", "\n\n"});
  EXPECT_EQ(stop.add("The E").text, "The ");  // "E" may begin END
  EXPECT_EQ(stop.add("Nx").text, "ENx");      // it did not
  EXPECT_EQ(stop.add("y\n").text, "y");       // "\n" may begin "\n\n"
  const StopStrings::Piece last = stop.add("\nmore");
  EXPECT_EQ(last.text, "");
  EXPECT_TRUE(last.stopped);
  EXPECT_EQ(stop.found(), "\n\n");
  EXPECT_EQ(stop.add("after").text, "");
  StopStrings none({});
  EXPECT_EQ(none.add("anything").text, "anything");
  EXPECT_FALSE(none.stopped());
}

}  // namespace
}  // namespace dsv4::server
