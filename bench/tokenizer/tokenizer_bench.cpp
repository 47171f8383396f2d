// tokenizer_bench: how fast Tokenizer::encode turns text into ids on one core, on text it has
// never seen, of two kinds:
//   natural  the words of tests/tokenizer/fixtures/corpus.jsonl (prose, code, numbers, CJK,
//            Korean, Arabic, Hindi, emoji; each word with the spaces or newlines after it) drawn
//            at random into new documents
//   random   random words of random characters (Latin, digits, code punctuation, CJK, Cyrillic,
//            Arabic, emoji): text unlike any the merges were learnt on, the slow case of BPE
// Each run draws new documents of 8 KiB (a seed from the clock unless given), encoded one by one.
// Prints MB/s (10^6 bytes of UTF-8 input a second of the process's CPU time, so that a machine
// shared with other work still measures one core) for each of 3 runs and their median, per
// kind. A program, not a test; results in docs/bench.md.
//   usage: tokenizer_bench TOKENIZER_JSON [MEGABYTES=8] [SEED]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "dsv4/tokenizer.h"
#include "format/json.h"
#include "tokenizer/utf8.h"

namespace dsv4::bench {
namespace {

// A word of 1-10 characters drawn from [first, last].
void word(std::mt19937& rng, char32_t first, char32_t last, std::string& out) {
  std::uniform_int_distribution<int> length(1, 10);
  std::uniform_int_distribution<uint32_t> cp(first, last);
  for (int i = length(rng); i > 0; --i) tokenizer::append_utf8(cp(rng), out);
}

std::string random_text(size_t n_bytes, std::mt19937& rng) {
  static const char* const kPunct[] = {".",  ",",  "!",  "?", "(", ")", "{", "}", "::", "->",
                                       "==", "\"", "'s", ";", "/", "_", "#", "*", "[",  "]"};
  std::string text;
  std::uniform_int_distribution<int> pick(0, 99), punct(0, 19);
  while (text.size() < n_bytes) {
    const int p = pick(rng);
    if (p < 55) {
      word(rng, U'a', U'z', text);
    } else if (p < 60) {
      word(rng, U'A', U'Z', text);
    } else if (p < 68) {
      word(rng, U'0', U'9', text);
    } else if (p < 78) {
      text += kPunct[punct(rng)];
    } else if (p < 86) {
      word(rng, 0x4E00, 0x9FA5, text);  // CJK ideographs
    } else if (p < 91) {
      word(rng, 0x0430, 0x044F, text);  // Cyrillic
    } else if (p < 95) {
      word(rng, 0x0621, 0x064A, text);  // Arabic
    } else {
      word(rng, 0x1F600, 0x1F64F, text);  // emoji
    }
    text += pick(rng) < 8 ? "\n" : " ";
  }
  return text;
}

// The words of the corpus, each with the white space after it.
std::vector<std::string> corpus_words(const std::string& path) {
  std::vector<std::string> words;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const std::string text = format::Json::parse(line).get<std::string>();
    size_t at = 0;
    while (at < text.size()) {
      size_t end = text.find_first_of(" \n\t", at);
      end = end == std::string::npos ? text.size() : text.find_first_not_of(" \n\t", end);
      if (end == std::string::npos) end = text.size();
      words.push_back(text.substr(at, end - at));
      at = end;
    }
  }
  return words;
}

std::string natural_text(size_t n_bytes, const std::vector<std::string>& words, std::mt19937& rng) {
  std::uniform_int_distribution<size_t> pick(0, words.size() - 1);
  std::string text;
  while (text.size() < n_bytes) {
    text += words[pick(rng)];
    if (text.back() != ' ' && text.back() != '\n' && text.back() != '\t') text += ' ';
  }
  return text;
}

// The median MB/s of 3 runs over fresh documents from `make`.
template <typename Make>
double time_runs(const char* kind, const Tokenizer& tok, double megabytes, Make make) {
  std::vector<double> rates;
  for (int run = 0; run < 3; ++run) {
    std::vector<std::string> documents;
    size_t n_bytes = 0;
    while (n_bytes < megabytes * 1e6) {
      documents.push_back(make());
      n_bytes += documents.back().size();
    }
    size_t n_ids = 0;
    const std::clock_t start = std::clock();
    for (const std::string& doc : documents) {
      Result<std::vector<int64_t>> ids = tok.encode(doc, false);
      if (!ids.ok()) {
        std::fprintf(stderr, "%s\n", ids.status().to_string().c_str());
        std::exit(1);
      }
      n_ids += ids->size();
    }
    const double s = static_cast<double>(std::clock() - start) / CLOCKS_PER_SEC;
    rates.push_back(n_bytes / s / 1e6);
    std::printf("%s run %d: %.1f MB in %.3f s, %zu ids: %.2f MB/s\n", kind, run, n_bytes / 1e6, s,
                n_ids, rates.back());
  }
  std::sort(rates.begin(), rates.end());
  return rates[1];
}

}  // namespace
}  // namespace dsv4::bench

int main(int argc, char** argv) {
  using namespace dsv4;
  if (argc < 2) {
    std::fprintf(stderr, "usage: tokenizer_bench TOKENIZER_JSON [MEGABYTES=8] [SEED]\n");
    return 2;
  }
  const double megabytes = argc > 2 ? std::atof(argv[2]) : 8.0;
  const unsigned seed =
      argc > 3 ? static_cast<unsigned>(std::atol(argv[3]))
               : static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count());
  Result<Tokenizer> tok = Tokenizer::load(argv[1]);
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", tok.status().to_string().c_str());
    return 1;
  }
  constexpr size_t kDocumentBytes = 8192;
  const std::vector<std::string> words = bench::corpus_words(DSV4_BENCH_CORPUS);
  if (words.empty()) {
    std::fprintf(stderr, "no words in %s\n", DSV4_BENCH_CORPUS);
    return 1;
  }
  std::mt19937 rng(seed);
  const double natural = bench::time_runs(
      "natural", *tok, megabytes, [&] { return bench::natural_text(kDocumentBytes, words, rng); });
  const double random = bench::time_runs("random", *tok, megabytes,
                                         [&] { return bench::random_text(kDocumentBytes, rng); });
  std::printf("seed %u, median MB/s on one core: natural %.2f, random %.2f\n", seed, natural,
              random);
  return 0;
}
