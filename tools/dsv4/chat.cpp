// dsv4 chat [--model DIR] [--tokenizer FILE] [--system TEXT] [--thinking [--reasoning-effort
// high|max]] [--max-tokens N] [--max-context N] [--temperature T --top-k K --top-p P --seed S
// --presence-penalty P --frequency-penalty F] [--experts w4a16|w4a4] [--device cpu|cuda]:
// a conversation on the terminal. Each line read from stdin is a user message; the reply is
// printed as it is generated (its reasoning between <think> and </think> lines with --thinking)
// and joins the conversation, so the next line continues it. The engine's prefix cache keeps the
// conversation's state between turns, so a turn runs only its new tokens. "/clear" starts over
// (the system message stays); the end of input ends the chat. A turn that fails (the
// conversation outgrew --max-context, say) prints why and is left out of the conversation; the
// exit status is then 1. Ctrl-C ends the reply being generated (what it had joins the
// conversation); at the prompt it ends the chat.
// Uses only the public API (include/dsv4/).
#include "dsv4/chat.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "chat_flags.h"
#include "commands.h"
#include "dsv4/engine.h"
#include "dsv4/tokenizer.h"
#include "engine_flags.h"
#include "reply_printer.h"

namespace dsv4::tools {
namespace {

struct ChatArgs {
  EngineFlags engine;
  std::string tokenizer;  // default: MODEL/tokenizer.json
  ChatFlags chat;
  std::optional<int64_t> max_tokens;  // default: the rest of the context
  int64_t max_context = EngineOptions{}.max_context;
  SamplingParams sampling;
};

void report(const Status& status) {
  std::fprintf(stderr, "dsv4 chat: %s\n", status.to_string().c_str());
}

// What Ctrl-C does, shared with the thread that takes SIGINT: during a reply it cancels the
// reply's generation; otherwise it ends the chat.
struct Interrupt {
  std::shared_ptr<std::atomic<bool>> cancel = std::make_shared<std::atomic<bool>>(false);
  std::atomic<bool> replying{false};
};

// Blocks SIGINT in this thread and in those started after (the engine's), and takes it on a
// thread of its own; called before the engine opens.
void take_interrupts(const std::shared_ptr<Interrupt>& interrupt) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([interrupt, set] {
    while (true) {
      int signal = 0;
      sigwait(&set, &signal);
      if (!interrupt->replying) std::_Exit(128 + SIGINT);
      interrupt->cancel->store(true);
    }
  }).detach();
}

class ChatSession {
 public:
  ChatSession(const ChatArgs& args, Engine& engine, const Tokenizer& tokenizer,
              std::shared_ptr<Interrupt> interrupt)
      : args_(args),
        engine_(engine),
        tokenizer_(tokenizer),
        interrupt_(std::move(interrupt)),
        chat_(start_conversation(args.chat)) {}

  void clear() { chat_ = start_conversation(args_.chat); }

  // One turn: `line` as the user's message, the reply printed and added to the conversation.
  // On failure the conversation is as it was.
  Status turn(const std::string& line) {
    chat_.messages.push_back({ChatRole::kUser, line, "", {}, ""});
    Result<ChatReply> reply = answer();
    if (!reply.ok()) {
      chat_.messages.pop_back();
      return reply.status();
    }
    chat_.messages.push_back(
        {ChatRole::kAssistant, reply->content, reply->reasoning_content, reply->tool_calls, ""});
    return ok_status();
  }

 private:
  Result<ChatReply> answer() {
    DSV4_ASSIGN_OR_RETURN(const std::string text, encode_chat(chat_));
    DSV4_ASSIGN_OR_RETURN(std::vector<int64_t> prompt, tokenize_chat_prompt(tokenizer_, text));
    GenerateRequest request{std::move(prompt), args_.sampling};
    const auto rest = args_.max_context - static_cast<int64_t>(request.prompt.size());
    if (rest <= 0 && !args_.max_tokens) {
      return invalid_argument("the conversation's " + std::to_string(request.prompt.size()) +
                              " tokens fill the context of " + std::to_string(args_.max_context) +
                              ": /clear, or a larger --max-context");
    }
    request.sampling.max_tokens = args_.max_tokens.value_or(rest);
    // Refused before anything is printed (a <think> line ahead of the error, once).
    DSV4_RETURN_IF_ERROR(engine_.check(request));
    ReplyPrinter printer(tokenizer_, chat_.thinking, engine_.eos_token_id());
    request.on_token = [&](int64_t id) { return printer.token(id); };
    interrupt_->cancel->store(false);
    request.cancelled = interrupt_->cancel;
    interrupt_->replying = true;
    Result<Generation> out = engine_.generate(request);
    interrupt_->replying = false;
    if (!out.ok()) return out.status();
    return printer.finish(*out);
  }

  const ChatArgs& args_;
  Engine& engine_;
  const Tokenizer& tokenizer_;
  std::shared_ptr<Interrupt> interrupt_;
  Conversation chat_;
};

int run_chat(const ChatArgs& args) {
  EngineOptions options = engine_options(args.engine, "chat");
  options.max_context = args.max_context;
  const std::string path =
      args.tokenizer.empty() ? options.model_dir + "/tokenizer.json" : args.tokenizer;
  Result<Tokenizer> tokenizer = Tokenizer::load(path);
  if (!tokenizer.ok()) {
    report(tokenizer.status().with_context("chat needs the checkpoint's tokenizer"));
    return 1;
  }
  // Ids the tokenizer lacks are never drawn: every reply prints.
  options.decodable = [&tok = *tokenizer](int64_t id) { return tok.decode({id}).ok(); };
  const auto interrupt = std::make_shared<Interrupt>();
  take_interrupts(interrupt);
  Result<Engine> engine = open_engine(options, "chat");
  if (!engine.ok()) {
    report(engine.status());
    return 1;
  }
  ChatSession session(args, *engine, *tokenizer, interrupt);
  const bool terminal = isatty(STDIN_FILENO) != 0;
  bool failed = false;
  std::string line;
  while (true) {
    if (terminal) std::fputs("> ", stderr);
    if (!std::getline(std::cin, line)) break;
    if (line.empty()) continue;
    if (line == "/clear") {
      session.clear();
      continue;
    }
    const Status turned = session.turn(line);
    if (!turned.ok()) report(turned);
    failed = failed || !turned.ok();
  }
  return failed ? 1 : 0;
}

}  // namespace

void register_chat(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand(
      "chat", "A conversation on the terminal: each line a user message, each reply printed");
  auto args = std::make_shared<ChatArgs>();
  add_engine_flags(cmd, args->engine, /*model_required=*/false);
  cmd->add_option("--tokenizer", args->tokenizer, "tokenizer.json (default: MODEL/tokenizer.json)");
  add_chat_flags(cmd, args->chat);
  cmd->add_option("--max-tokens", args->max_tokens,
                  "tokens a reply at most (default: the rest of the context)")
      ->check(non_negative());
  cmd->add_option("--max-context", args->max_context,
                  "most tokens of the conversation, replies included")
      ->capture_default_str()
      ->check(positive());
  add_sampling_flags(cmd, args->sampling);
  cmd->callback([args, &exit_code] { exit_code = run_chat(*args); });
}

}  // namespace dsv4::tools
