#include "bench_schema.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <utility>

namespace dsv4::tools {

Result<BenchSchema> read_bench_schema(const std::string& path, const std::string& model_dir) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("--json-schema " + path + ": cannot open");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return internal_error("--json-schema " + path + ": read failed");
  Result<Tokenizer> tokenizer = Tokenizer::load(model_dir + "/tokenizer.json");
  if (!tokenizer.ok()) {
    return tokenizer.status().with_context("--json-schema needs the checkpoint's tokenizer");
  }
  return BenchSchema{path, std::move(text), std::move(tokenizer).value()};
}

Result<std::shared_ptr<const TokenConstraint>> compile_bench_schema(const BenchSchema& schema,
                                                                    const Engine& engine) {
  const ConstraintVocabulary vocabulary =
      ConstraintVocabulary::build(schema.tokenizer, engine.vocab_size(), engine.eos_token_id());
  Result<std::shared_ptr<const TokenConstraint>> constraint =
      vocabulary.compile({OutputFormat::Kind::kJsonSchema, schema.text});
  if (!constraint.ok()) return constraint.status().with_context("--json-schema " + schema.path);
  return constraint;
}

namespace {

// `text` on one line: control characters as \n, \t or \xHH, the rest as it is.
std::string one_line(const std::string& text) {
  std::string out;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (byte < 0x20 || byte == 0x7f) {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", byte);
      out += hex;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string describe_documents(const std::vector<Generation>& out, const Tokenizer& tokenizer,
                               int64_t eos_token_id) {
  const auto closed = std::count_if(out.begin(), out.end(), [&](const Generation& g) {
    return std::find(g.tokens.begin(), g.tokens.end(), eos_token_id) != g.tokens.end();
  });
  std::string line = std::to_string(closed) + " of " + std::to_string(out.size()) +
                     " documents complete within the tokens asked for; the first: ";
  const std::vector<int64_t>& tokens = out.front().tokens;
  const std::vector<int64_t> written(tokens.begin(),
                                     std::find(tokens.begin(), tokens.end(), eos_token_id));
  Result<std::string> text = tokenizer.decode(written);
  line += text.ok() ? one_line(*text) : text.status().to_string();
  return line;
}

}  // namespace dsv4::tools
