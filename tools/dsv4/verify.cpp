// dsv4 verify --model DIR --reference REF.safetensors [--dump OUT.safetensors [--force]]
// [--tolerance R] [--device cpu|cuda] [--experts w4a16|w4a4]: checks the engine against an
// oracle's reference file (prompt_i, logits_i [len, V], greedy_i [n], greedy_logits_i [n, V]).
// For each prompt it recomputes the full-sequence logits and the cached greedy continuation,
// prints the largest per-row relative error ‖Δ‖/‖ref‖ of both and the token agreement, and exits
// 1 past the tolerance (1e-4 unless --tolerance). --dump writes the engine's own outputs under
// the same names and shapes; an existing file is replaced only with --force.
// Uses the public API plus the safetensors reader/writer for the two files.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "base/row_error.h"
#include "commands.h"
#include "dsv4/engine.h"
#include "engine_flags.h"
#include "format/safetensors.h"
#include "format/safetensors_writer.h"

namespace dsv4::tools {
namespace {

// The acceptance bar of fp32 logits against transformers' fp32 forward (docs/numerics.md).
constexpr double kLogitsRelTol = 1e-4;

struct VerifyArgs {
  EngineFlags engine;
  std::string reference, dump;
  bool force = false;  // --dump may replace an existing file
  // W4A16 rounds the experts' activations to bf16, where a last-bit difference upstream can flip
  // a rounding: references of NVFP4 checkpoints need a looser bar (docs/quality.md).
  double tolerance = kLogitsRelTol;
};

template <typename T>
Result<std::vector<T>> read_tensor(const format::SafetensorsFile& file, const std::string& name,
                                   DType dtype) {
  const format::TensorInfo* t = file.find(name);
  if (t == nullptr) return not_found(file.path() + ": no tensor " + name);
  if (t->dtype != dtype) {
    return invalid_argument(file.path() + ": " + name + " is " + std::string(dtype_name(t->dtype)) +
                            ", expected " + std::string(dtype_name(dtype)));
  }
  const T* begin = reinterpret_cast<const T*>(t->data);
  return std::vector<T>(begin, begin + t->shape.numel());
}

struct PromptCheck {
  bool ok = true;
  std::vector<int64_t> prompt;
  Generation out;
};

Result<PromptCheck> check_prompt(Engine& engine, const format::SafetensorsFile& ref, int i,
                                 double tolerance) {
  const std::string n = std::to_string(i);
  const int64_t v = engine.vocab_size();
  PromptCheck c;
  DSV4_ASSIGN_OR_RETURN(c.prompt, read_tensor<int64_t>(ref, "prompt_" + n, DType::kI64));
  DSV4_ASSIGN_OR_RETURN(auto logits, read_tensor<float>(ref, "logits_" + n, DType::kF32));
  DSV4_ASSIGN_OR_RETURN(auto greedy, read_tensor<int64_t>(ref, "greedy_" + n, DType::kI64));
  DSV4_ASSIGN_OR_RETURN(auto greedy_logits,
                        read_tensor<float>(ref, "greedy_logits_" + n, DType::kF32));
  const auto n_prompt = static_cast<int64_t>(c.prompt.size());
  const auto n_greedy = static_cast<int64_t>(greedy.size());
  if (static_cast<int64_t>(logits.size()) != n_prompt * v ||
      static_cast<int64_t>(greedy_logits.size()) != n_greedy * v) {
    return invalid_argument("prompt " + n + ": reference logits are not [len, " +
                            std::to_string(v) + "]");
  }
  GenerateRequest request{c.prompt, {}, true, true};
  request.sampling.max_tokens = n_greedy;
  DSV4_ASSIGN_OR_RETURN(c.out, engine.generate(request));
  const int64_t n_common = std::min<int64_t>(n_greedy, static_cast<int64_t>(c.out.tokens.size()));
  int64_t n_agree = 0;
  while (n_agree < n_common && c.out.tokens[n_agree] == greedy[n_agree]) ++n_agree;
  const double full = max_row_rel_error(c.out.prompt_logits.data(), logits.data(), n_prompt, v);
  const double cached =
      max_row_rel_error(c.out.step_logits.data(), greedy_logits.data(), n_agree, v);
  c.ok = full <= tolerance && cached <= tolerance && n_agree == n_greedy &&
         static_cast<int64_t>(c.out.tokens.size()) == n_greedy;
  std::printf(
      "prompt %d: %lld tokens  logits max rel err %.3e  greedy %lld/%lld tokens agree, "
      "their logits max rel err %.3e  %s\n",
      i, static_cast<long long>(n_prompt), full, static_cast<long long>(n_agree),
      static_cast<long long>(n_greedy), cached, c.ok ? "OK" : "FAIL");
  return c;
}

void add_dump(format::SafetensorsWriter& writer, int i, PromptCheck& c, int64_t v) {
  const std::string n = std::to_string(i);
  auto view = [](auto& values, DType dtype, Shape shape) {
    return TensorView::contiguous(values.data(), dtype, Device::kCpu, shape);
  };
  const auto n_prompt = static_cast<int64_t>(c.prompt.size());
  const auto n_gen = static_cast<int64_t>(c.out.tokens.size());
  writer.add("prompt_" + n, view(c.prompt, DType::kI64, {n_prompt}));
  writer.add("logits_" + n, view(c.out.prompt_logits, DType::kF32, {n_prompt, v}));
  writer.add("greedy_" + n, view(c.out.tokens, DType::kI64, {n_gen}));
  writer.add("greedy_logits_" + n, view(c.out.step_logits, DType::kF32, {n_gen, v}));
}

int run_verify(const VerifyArgs& args) {
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "dsv4 verify: %s\n", s.to_string().c_str());
    return 2;
  };
  // Refused before the forward passes too (minutes on a large checkpoint), not only at the write.
  std::error_code ec;
  if (!args.dump.empty() && !args.force && std::filesystem::exists(args.dump, ec)) {
    return fail(
        invalid_argument(args.dump + ": already exists (not overwritten; --force replaces it)"));
  }
  // Refused before the reference loads, as the dump above.
  Result<EngineOptions> options = exact_engine_options(args.engine, "verify");
  if (!options.ok()) return fail(options.status());
  Result<format::SafetensorsFile> ref = format::SafetensorsFile::open(args.reference);
  if (!ref.ok()) return fail(ref.status());
  Result<Engine> engine = open_engine(*options, "verify");
  if (!engine.ok()) return fail(engine.status());
  format::SafetensorsWriter writer;
  bool all_ok = true;
  int i = 0;
  for (; ref->find("prompt_" + std::to_string(i)) != nullptr; ++i) {
    Result<PromptCheck> c = check_prompt(*engine, *ref, i, args.tolerance);
    if (!c.ok()) return fail(c.status());
    all_ok &= c->ok;
    if (!args.dump.empty()) add_dump(writer, i, *c, engine->vocab_size());
  }
  if (i == 0) return fail(not_found(args.reference + ": no prompt_0"));
  if (!args.dump.empty()) {
    if (Status s = writer.write(args.dump, args.force); !s.ok()) return fail(s);
  }
  std::printf("%s: %d prompts, tolerance %.0e: %s\n", args.reference.c_str(), i, args.tolerance,
              all_ok ? "PASS" : "FAIL");
  return all_ok ? 0 : 1;
}

}  // namespace

void register_verify(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand(
      "verify", "Recompute an oracle reference file's logits and greedy tokens and compare");
  auto args = std::make_shared<VerifyArgs>();
  add_engine_flags(cmd, args->engine, /*model_required=*/true);
  cmd->add_option("--reference", args->reference,
                  "reference .safetensors (prompt_i, logits_i, ...)")
      ->required()
      ->check(CLI::ExistingFile);
  CLI::Option* dump = cmd->add_option("--dump", args->dump,
                                      "write the engine's outputs here (same names and shapes)");
  cmd->add_flag("--force", args->force, "with --dump, replace an existing file")->needs(dump);
  cmd->add_option("--tolerance", args->tolerance,
                  "largest per-row relative logits error that passes")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd->callback([args, &exit_code] { exit_code = run_verify(*args); });
}

}  // namespace dsv4::tools
