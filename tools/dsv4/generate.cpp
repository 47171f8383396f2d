// dsv4 generate [--model DIR] (--ids 1,2,3 | --prompt TEXT | --chat TEXT [--system TEXT]
// [--thinking [--reasoning-effort high|max]]) [--tokenizer FILE] [--max-tokens N]
// [--temperature T --top-k K --top-p P --seed S --presence-penalty P --frequency-penalty F]
// [--experts w4a16|w4a4] [--device cpu|cuda] [--speculative K]
// [--print-ids]: one-shot generation (with K, the drafts' acceptance on stderr). With --ids it prints the generated token ids; with
// --prompt it encodes the text with the checkpoint's tokenizer.json (special tokens such as
// <｜begin▁of▁sentence｜> are written in the text; no chat template is applied) and prints the
// generated text (or, with --print-ids, the ids). --chat makes TEXT one user message (after an
// optional system message) of a DeepSeek-V4 chat (include/dsv4/chat.h) and prints the reply's
// content, after its reasoning between <think> and </think> lines with --thinking. Text is printed
// as it is generated.
// Without --model it runs the small oracle checkpoint shipped in the repository (random
// weights, so the ids mean nothing; it shows the whole path works), or $DSV4_MODEL.
// Uses only the public API (include/dsv4/).
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "acceptance.h"
#include "chat_flags.h"
#include "commands.h"
#include "dsv4/chat.h"
#include "dsv4/engine.h"
#include "dsv4/tokenizer.h"
#include "engine_flags.h"
#include "reply_printer.h"

namespace dsv4::tools {
namespace {

struct GenerateArgs {
  EngineFlags engine;
  std::vector<int64_t> ids;
  std::string prompt;
  std::string chat;  // a user message, through the chat encoder
  ChatFlags chat_flags;
  std::string tokenizer;   // default: MODEL/tokenizer.json
  bool print_ids = false;  // with --prompt: the generated ids instead of their text
  SamplingParams sampling;
};

Conversation chat_conversation(const GenerateArgs& args) {
  Conversation chat = start_conversation(args.chat_flags);
  chat.messages.push_back({ChatRole::kUser, args.chat, "", {}, ""});
  return chat;
}

// The prompt's ids (--ids, or --prompt / --chat through the tokenizer), and the tokenizer when
// there is one to print text with.
Result<std::vector<int64_t>> prompt_ids(const GenerateArgs& args, const std::string& model_dir,
                                        std::optional<Tokenizer>& tokenizer) {
  if (args.prompt.empty() && args.chat.empty()) return args.ids;
  const std::string path = args.tokenizer.empty() ? model_dir + "/tokenizer.json" : args.tokenizer;
  Result<Tokenizer> loaded = Tokenizer::load(path);
  if (!loaded.ok()) {
    return loaded.status().with_context(
        "--prompt and --chat need the checkpoint's tokenizer (or --ids)");
  }
  tokenizer.emplace(std::move(loaded).value());
  if (args.chat.empty()) return tokenizer->encode(args.prompt);
  Result<std::string> prompt = encode_chat(chat_conversation(args));
  if (!prompt.ok()) return prompt.status();
  return tokenize_chat_prompt(*tokenizer, *prompt);
}

int fail(const Status& status) {
  std::fprintf(stderr, "dsv4 generate: %s\n", status.to_string().c_str());
  return 1;
}

int run_generate(const GenerateArgs& args) {
  const EngineOptions options = engine_options(args.engine, "generate");
  std::optional<Tokenizer> tokenizer;
  Result<std::vector<int64_t>> prompt = prompt_ids(args, options.model_dir, tokenizer);
  if (!prompt.ok()) return fail(prompt.status());
  Result<Engine> engine = open_engine(options, "generate");
  if (!engine.ok()) return fail(engine.status());
  GenerateRequest request{*prompt, args.sampling};
  std::optional<ReplyPrinter> printer;
  if (tokenizer && !args.print_ids) {
    const std::optional<ThinkingMode> chat =
        args.chat.empty() ? std::nullopt : std::optional(thinking_mode(args.chat_flags));
    printer.emplace(*tokenizer, chat, engine->eos_token_id());
    request.on_token = [&](int64_t id) { return printer->token(id); };
  }
  Result<Generation> out = engine->generate(request);
  if (!out.ok()) return fail(out.status());
  // After the reply, so that its last line is whole before stderr's.
  const auto report_acceptance = [&] {
    if (options.speculative_tokens == 0) return;
    std::fflush(stdout);
    std::fprintf(stderr, "dsv4 generate: speculative: %s\n",
                 describe_acceptance(engine->stats()).c_str());
  };
  if (printer) {
    const Result<ChatReply> printed = printer->finish(*out);
    report_acceptance();
    return printed.ok() ? 0 : fail(printed.status());
  }
  for (size_t i = 0; i < out->tokens.size(); ++i) {
    std::printf("%s%lld", i ? "," : "", static_cast<long long>(out->tokens[i]));
  }
  std::printf("\n");
  report_acceptance();
  return 0;
}

}  // namespace

void register_generate(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand("generate", "Generate from a prompt of token ids or of text");
  auto args = std::make_shared<GenerateArgs>();
  add_engine_flags(cmd, args->engine, /*model_required=*/false);
  // Exactly one prompt: token ids or text.
  CLI::Option_group* prompt = cmd->add_option_group("prompt", "one of --ids, --prompt, --chat");
  prompt->add_option("--ids", args->ids, "prompt token ids, comma separated")->delimiter(',');
  prompt->add_option(
      "--prompt", args->prompt,
      "prompt text, encoded with the checkpoint's tokenizer.json (special tokens written out; no "
      "chat template); prints text");
  CLI::Option* chat = prompt->add_option(
      "--chat", args->chat,
      "a user message, through DeepSeek-V4's chat encoder; prints the reply's content");
  prompt->require_option(1);
  add_chat_flags(cmd, args->chat_flags, chat);
  cmd->add_option("--tokenizer", args->tokenizer, "tokenizer.json (default: MODEL/tokenizer.json)");
  cmd->add_flag("--print-ids", args->print_ids,
                "with --prompt or --chat, print the generated ids, not text");
  cmd->add_option("--max-tokens", args->sampling.max_tokens, "tokens to generate at most")
      ->capture_default_str()
      ->check(non_negative());
  add_sampling_flags(cmd, args->sampling);
  cmd->callback([args, &exit_code] { exit_code = run_generate(*args); });
}

}  // namespace dsv4::tools
