// dsv4 eval [--model DIR] --text FILE [--window N] [--stride N] [--batch N] [--tokenizer FILE]
// [--device cpu|cuda] [--experts w4a16|w4a4]: the perplexity and bits per byte of a UTF-8 text
// under the checkpoint. The text is <BOS> followed by its ids (the checkpoint's tokenizer.json,
// no other special tokens), scored in windows as runtime/perplexity.h says (default 512 ids,
// stride 256: every token but the first window's sees at least 256 before it); a progress bar
// runs on stderr. Bits per byte divide the summed negative log-likelihood (in bits) by the text's
// bytes, every one of which a scored token carries.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <numbers>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "dsv4/engine.h"
#include "dsv4/tokenizer.h"
#include "engine_flags.h"
#include "runtime/perplexity.h"
#include "tokenizer/utf8.h"

namespace dsv4::tools {
namespace {

// DeepSeek's <BOS>, as its tokenizer.json spells it: the context of the text's first token.
constexpr const char* kBeginOfSentence = "<｜begin▁of▁sentence｜>";

struct EvalArgs {
  EngineFlags engine;
  std::string text;
  std::string tokenizer;  // default: MODEL/tokenizer.json
  int64_t window = 512;
  int64_t stride = 256;
  int64_t batch = 4;
};

// The file's bytes, refused when empty or not UTF-8 (the byte where it stops being UTF-8 named).
Result<std::string> read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(path + ": cannot open");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return internal_error(path + ": read failed");
  if (text.empty()) return invalid_argument(path + ": empty text, nothing to score");
  const std::string valid = tokenizer::to_valid_utf8(text);
  if (valid != text) {
    size_t at = 0;
    while (at < text.size() && text[at] == valid[at]) ++at;
    return invalid_argument(path + ": not UTF-8 (an ill-formed sequence at byte " +
                            std::to_string(at) + ")");
  }
  return text;
}

// <BOS> and the text's ids.
Result<std::vector<int64_t>> text_ids(const EvalArgs& args, const std::string& model_dir,
                                      const std::string& text) {
  const std::string path = args.tokenizer.empty() ? model_dir + "/tokenizer.json" : args.tokenizer;
  Result<Tokenizer> loaded = Tokenizer::load(path);
  if (!loaded.ok()) return loaded.status().with_context("eval needs the checkpoint's tokenizer");
  const Tokenizer& tokenizer = *loaded;
  const std::optional<int64_t> bos = tokenizer.token_id(kBeginOfSentence);
  if (!bos) return invalid_argument(path + ": no " + std::string(kBeginOfSentence) + " token");
  DSV4_ASSIGN_OR_RETURN(std::vector<int64_t> ids, tokenizer.encode(text, false));
  ids.insert(ids.begin(), *bos);
  return ids;
}

void draw_progress(int64_t done, int64_t total) {
  constexpr int64_t kWidth = 40;
  const int64_t filled = done * kWidth / total;
  std::fprintf(stderr, "\rdsv4 eval: [%s%s] %lld/%lld windows", std::string(filled, '#').c_str(),
               std::string(kWidth - filled, '.').c_str(), static_cast<long long>(done),
               static_cast<long long>(total));
  if (done == total) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

int fail(const Status& status) {
  std::fprintf(stderr, "dsv4 eval: %s\n", status.to_string().c_str());
  return 1;
}

int run_eval(const EvalArgs& args) {
  EngineOptions options = engine_options(args.engine, "eval");
  Result<std::string> text = read_text(args.text);
  if (!text.ok()) return fail(text.status());
  Result<std::vector<int64_t>> ids = text_ids(args, options.model_dir, *text);
  if (!ids.ok()) return fail(ids.status());
  if (static_cast<int64_t>(ids->size()) < args.window) {
    return fail(invalid_argument(args.text + ": " + std::to_string(ids->size()) +
                                 " ids with <BOS>, fewer than one window of " +
                                 std::to_string(args.window) + " (--window)"));
  }
  options.max_context = args.window;
  options.max_batch = args.batch;
  // A forward of every window whole unless --max-step-tokens splits them (chunked prefill, the
  // same logits in fewer bytes a step).
  if (args.engine.max_step_tokens == 0) {
    options.max_step_tokens = std::min(args.batch * args.window, kMaxStepTokens);
  }
  options.prefix_cache_mb = 0;                         // windows share no prefix
  Result<Engine> engine = open_engine(options, "eval");
  if (!engine.ok()) return fail(engine.status());
  const auto start = std::chrono::steady_clock::now();
  Result<runtime::PerplexityResult> r =
      runtime::perplexity(*engine, *ids, args.window, args.stride, args.batch, draw_progress);
  if (!r.ok()) return fail(r.status().with_context(args.text));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "dsv4 eval: %lld windows in %.1f s (%.0f ids/s)\n",
               static_cast<long long>(r->windows), seconds,
               static_cast<double>(r->windows * args.window) / seconds);
  std::printf("%s: %zu bytes, %zu ids with <BOS>, %lld windows of %lld (stride %lld), %lld scored\n",
              args.text.c_str(), text->size(), ids->size(), static_cast<long long>(r->windows),
              static_cast<long long>(args.window), static_cast<long long>(args.stride),
              static_cast<long long>(r->scored));
  std::printf("perplexity %.6f  bits per byte %.6f  nll %.4f nats\n", r->perplexity(),
              r->nll / std::numbers::ln2 / static_cast<double>(text->size()), r->nll);
  return 0;
}

}  // namespace

void register_eval(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand(
      "eval", "Perplexity and bits per byte of a text, scored in windows (progress on stderr)");
  auto args = std::make_shared<EvalArgs>();
  add_engine_flags(cmd, args->engine, /*model_required=*/false);
  cmd->add_option("--text", args->text, "UTF-8 text file to score")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--tokenizer", args->tokenizer, "tokenizer.json (default: MODEL/tokenizer.json)");
  cmd->add_option("--window", args->window, "ids a forward sees (<BOS> included)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 20));
  CLI::Option* stride =
      cmd->add_option("--stride", args->stride,
                      "ids between window ends: each scores its last STRIDE ids (at most --window)")
          ->capture_default_str()
          ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--batch", args->batch, "windows run together")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1024}));
  cmd->callback([args, stride, &exit_code] {
    if (stride->count() == 0) args->stride = args->window / 2 > 0 ? args->window / 2 : 1;
    exit_code = run_eval(*args);
  });
}

}  // namespace dsv4::tools
