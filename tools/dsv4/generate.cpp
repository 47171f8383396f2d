// dsv4 generate [--model DIR] (--ids 1,2,3 | --prompt TEXT | --chat TEXT [--system TEXT]
// [--thinking [--reasoning-effort high|max]]) [--tokenizer FILE] [--max-tokens N]
// [--temperature T --top-k K --top-p P --seed S --presence-penalty P --frequency-penalty F]
// [--experts w4a16|w4a4] [--device cpu|cuda]
// [--print-ids]: one-shot generation. With --ids it prints the generated token ids; with
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

#include "commands.h"
#include "dsv4/chat.h"
#include "dsv4/engine.h"
#include "dsv4/tokenizer.h"
#include "engine_flags.h"

namespace dsv4::tools {
namespace {

struct GenerateArgs {
  EngineFlags engine;
  std::vector<int64_t> ids;
  std::string prompt;
  std::string chat;  // a user message, through the chat encoder
  std::string system;
  bool thinking = false;
  std::string reasoning_effort = "high";
  std::string tokenizer;   // default: MODEL/tokenizer.json
  bool print_ids = false;  // with --prompt: the generated ids instead of their text
  SamplingParams sampling;
};

Conversation chat_conversation(const GenerateArgs& args) {
  Conversation chat;
  if (!args.system.empty()) chat.messages.push_back({ChatRole::kSystem, args.system, "", {}, ""});
  chat.messages.push_back({ChatRole::kUser, args.chat, "", {}, ""});
  chat.thinking = args.thinking ? ThinkingMode::kThinking : ThinkingMode::kChat;
  chat.effort = args.reasoning_effort == "max" ? ReasoningEffort::kMax : ReasoningEffort::kHigh;
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

// Prints the text as the engine draws its tokens: --prompt's as it is, --chat's reply read as one
// (its reasoning between <think> and </think> lines with --thinking).
class LivePrinter {
 public:
  LivePrinter(const Tokenizer& tokenizer, const GenerateArgs& args, int64_t eos_token_id)
      : decoder_(tokenizer), eos_token_id_(eos_token_id), thinking_(args.thinking) {
    if (!args.chat.empty()) {
      reply_.emplace(thinking_ ? ThinkingMode::kThinking : ThinkingMode::kChat);
      if (thinking_) print("<think>\n");
    }
  }

  // The engine's on_token: false stops generation (an id the tokenizer does not know).
  bool token(int64_t id) {
    if (reply_ && id == eos_token_id_) return true;  // a chat reply's end, not its text
    Result<std::string> piece = decoder_.add(id);
    if (!piece.ok()) failed_ = piece.status();
    if (piece.ok()) show(*piece);
    return piece.ok();
  }

  // The rest once generation ended with `out`.
  Status finish(const Generation& out) {
    DSV4_RETURN_IF_ERROR(failed_);
    DSV4_ASSIGN_OR_RETURN(const std::string held, decoder_.finish());
    show(held);
    if (reply_) {
      print_delta(reply_->finish(out.stopped_at_eos).rest);
      close_reasoning();
    }
    print("\n");
    return ok_status();
  }

 private:
  void show(const std::string& piece) {
    if (reply_) {
      print_delta(reply_->add(piece));
    } else {
      print(piece);
    }
  }
  void print_delta(const ChatDelta& delta) {
    print(delta.reasoning_content);
    if (!delta.content.empty()) close_reasoning();
    print(delta.content);
  }
  void close_reasoning() {
    if (thinking_ && !reasoning_closed_) print("\n</think>\n");
    reasoning_closed_ = true;
  }
  static void print(const std::string& text) {
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
  }

  IncrementalDecoder decoder_;
  std::optional<ChatStream> reply_;  // --chat
  int64_t eos_token_id_;
  bool thinking_;
  bool reasoning_closed_ = false;
  Status failed_ = ok_status();
};

int fail(const Status& status) {
  std::fprintf(stderr, "dsv4 generate: %s\n", status.to_string().c_str());
  return 1;
}

int run_generate(const GenerateArgs& args) {
  const EngineOptions options = engine_options(args.engine, "generate");
  std::optional<Tokenizer> tokenizer;
  Result<std::vector<int64_t>> prompt = prompt_ids(args, options.model_dir, tokenizer);
  if (!prompt.ok()) return fail(prompt.status());
  Result<Engine> engine = Engine::open(options);
  if (!engine.ok()) return fail(engine.status());
  GenerateRequest request{*prompt, args.sampling};
  std::optional<LivePrinter> printer;
  if (tokenizer && !args.print_ids) {
    printer.emplace(*tokenizer, args, engine->eos_token_id());
    request.on_token = [&](int64_t id) { return printer->token(id); };
  }
  Result<Generation> out = engine->generate(request);
  if (!out.ok()) return fail(out.status());
  if (printer) {
    const Status printed = printer->finish(*out);
    return printed.ok() ? 0 : fail(printed);
  }
  for (size_t i = 0; i < out->tokens.size(); ++i) {
    std::printf("%s%lld", i ? "," : "", static_cast<long long>(out->tokens[i]));
  }
  std::printf("\n");
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
  cmd->add_option("--system", args->system, "with --chat, a system message before it")->needs(chat);
  CLI::Option* thinking =
      cmd->add_flag("--thinking", args->thinking, "with --chat, thinking mode (prints reasoning)")
          ->needs(chat);
  cmd->add_option("--reasoning-effort", args->reasoning_effort, "with --thinking: high or max")
      ->capture_default_str()
      ->check(CLI::IsMember({"high", "max"}))
      ->needs(thinking);
  cmd->add_option("--tokenizer", args->tokenizer, "tokenizer.json (default: MODEL/tokenizer.json)");
  cmd->add_flag("--print-ids", args->print_ids,
                "with --prompt or --chat, print the generated ids, not text");
  cmd->add_option("--max-tokens", args->sampling.max_tokens, "tokens to generate at most")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--temperature", args->sampling.temperature, "0 = greedy")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-k", args->sampling.top_k, "keep the k most likely tokens (0 = all)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-p", args->sampling.top_p, "nucleus probability mass")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--seed", args->sampling.seed, "sampling seed")->capture_default_str();
  cmd->add_option("--presence-penalty", args->sampling.presence_penalty,
                  "less this on the logit of every token already generated")
      ->check(CLI::Range(-2.0, 2.0));
  cmd->add_option("--frequency-penalty", args->sampling.frequency_penalty,
                  "less this on a token's logit for every time it was generated")
      ->check(CLI::Range(-2.0, 2.0));
  cmd->callback([args, &exit_code] { exit_code = run_generate(*args); });
}

}  // namespace dsv4::tools
