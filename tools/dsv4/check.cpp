// dsv4 check DIR: proves a checkpoint binds completely. Prints the naming convention, bound
// tensors per category, how they are stored, the dtype census, ignored keys with their reasons,
// unbound keys, unbound slots, every problem, all-zero and non-finite tensors, and for the
// official layout the tensor-count self-check of ../shared/docs/deepseek_v4.md §3.1.4. Exits
// non-zero on any problem. Decodes tensor by tensor into scratch memory, so it runs on
// checkpoints far larger than memory in f32, with progress every ~2 s.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/loader.h"
#include "commands.h"
#include "engine_flags.h"
#include "format/text_file.h"
#include "runtime/ep_memory_plan.h"
#include "runtime/placement.h"
#include "runtime/step_memory_plan.h"

namespace dsv4::tools {
namespace {

constexpr size_t kMaxListed = 50;  // per list; the rest is counted

void print_list(const char* title, const std::vector<std::string>& items) {
  std::printf("%s: %zu\n", title, items.size());
  for (size_t i = 0; i < items.size() && i < kMaxListed; ++i)
    std::printf("  %s\n", items[i].c_str());
  if (items.size() > kMaxListed) std::printf("  ... and %zu more\n", items.size() - kMaxListed);
}

void print_counts(const char* title, const std::map<std::string, size_t>& counts) {
  std::printf("%s:\n", title);
  for (const auto& [name, n] : counts) std::printf("  %-44s %zu\n", name.c_str(), n);
}

void print_ignored(const std::vector<checkpoint::IgnoredKey>& ignored) {
  std::map<std::string, std::pair<size_t, std::string>> by_reason;  // reason -> (count, example)
  for (const checkpoint::IgnoredKey& key : ignored) {
    auto& entry = by_reason[key.reason];
    if (entry.first++ == 0) entry.second = key.key;
  }
  std::printf("ignored keys: %zu\n", ignored.size());
  for (const auto& [reason, entry] : by_reason) {
    std::printf("  %zu x %s (e.g. %s)\n", entry.first, reason.c_str(), entry.second.c_str());
  }
}

// Progress on stderr at most every two seconds: a 160 GB checkpoint takes minutes.
std::function<void(size_t, size_t)> progress_printer() {
  auto last =
      std::make_shared<std::chrono::steady_clock::time_point>(std::chrono::steady_clock::now());
  return [last](size_t done, size_t total) {
    const auto now = std::chrono::steady_clock::now();
    if (done != total && now - *last < std::chrono::seconds(2)) return;
    *last = now;
    std::fprintf(stderr, "checked %zu / %zu tensors\n", done, total);
  };
}

// The §3.1.4 self-check; returns whether it fails.
bool print_self_check(const checkpoint::LoadReport& report) {
  if (report.convention != checkpoint::NamingConvention::kOfficial) return false;
  if (report.official_count_expected == 0) {
    std::printf("tensor-count self-check (§3.1.4): skipped, layer 0 did not bind\n");
    return false;
  }
  const bool ok = report.official_count_expected == report.official_count_found;
  std::printf("tensor-count self-check (§3.1.4): formula %zu, checkpoint %zu (MTP excluded): %s\n",
              report.official_count_expected, report.official_count_found, ok ? "ok" : "MISMATCH");
  return !ok;
}

int run_check(const std::string& dir, const std::string& convention) {
  checkpoint::LoadOptions options;
  if (!convention.empty()) options.force_convention = checkpoint::parse_convention(convention);
  options.progress = progress_printer();
  Result<checkpoint::LoadReport> result = checkpoint::check_model(dir, options);
  if (!result.ok()) {
    std::fprintf(stderr, "dsv4 check: %s\n", result.status().to_string().c_str());
    return 1;
  }
  const checkpoint::LoadReport& report = *result;
  std::printf("checkpoint: %s\n", dir.c_str());
  std::printf("convention: %s%s\n",
              std::string(checkpoint::convention_name(report.convention)).c_str(),
              convention.empty() ? " (detected)" : " (forced)");
  std::printf("keys: %zu (bound %zu, ignored %zu)\n", report.n_keys, report.n_bound,
              report.ignored.size());
  std::printf("MTP blocks: %zu (%zu tensors)%s\n", report.n_mtp_blocks, report.n_mtp_bound,
              report.n_mtp_blocks > 0 ? ", speculative decoding available"
                                      : ", no speculative decoding");
  print_counts("bound tensors per category", report.bound_per_category);
  print_counts("storage of bound tensors", report.storage_census);
  print_counts("dtype census (all keys)", report.dtype_census);
  print_ignored(report.ignored);
  print_list("unbound keys", report.unbound_keys);
  print_list("unbound slots", report.unbound_slots);
  print_list("problems", report.problems);
  print_list("all-zero tensors", report.zero_tensors);
  print_list("non-finite tensors", report.non_finite_tensors);
  print_list("notes", report.notes);
  const bool count_failed = print_self_check(report);
  const bool clean = report.clean() && !count_failed;
  std::printf("result: %s\n",
              clean ? "OK, every key bound or ignored, every slot filled" : "FAILED");
  return clean ? 0 : 1;
}

// --plan for a checkpoint directory: the same plan from the checkpoint as bound (as a GPU load
// binds it, FP8 linears kept FP8; nothing is decoded), which holds more than its config declares
// where it stores wider values (bf16 linears under a config declaring FP8).
void print_bound_plan(const std::string& dir, const runtime::EpMemoryPlan& declared,
                      int64_t n_experts, int64_t headroom) {
  checkpoint::LoadOptions options;
  options.keep_fp8 = true;
  const Result<checkpoint::LoadPlan> bound = checkpoint::plan_model(dir, options);
  const int ranks = static_cast<int>(declared.ranks.size());
  Result<runtime::EpMemoryPlan> plan = bound.ok()
                                           ? runtime::plan_ep_memory(*bound, n_experts, ranks)
                                           : Result<runtime::EpMemoryPlan>(bound.status());
  if (!plan.ok() || !bound->first_problem.empty()) {
    std::printf("as bound: not planned (%s)\n",
                plan.ok() ? bound->first_problem.c_str() : plan.status().to_string().c_str());
    return;
  }
  const int64_t beyond = plan->ranks.front().total() - declared.ranks.front().total();
  std::printf("%s as bound: %s", dir.c_str(), runtime::describe(*plan, headroom).c_str());
  if (beyond != 0) {
    std::printf("as bound, rank 0 holds %lld bytes %s than the config declares\n",
                static_cast<long long>(beyond < 0 ? -beyond : beyond),
                beyond > 0 ? "more" : "fewer");
  }
}

// --plan: the expert-parallel memory plan of `path` (a checkpoint directory or its config.json)
// over `gpus` ranks, and what a step of max_step_tokens (0: the default) holds at the engine's
// default batch and context, from the config alone (nothing is loaded); for a directory, then
// from the checkpoint as bound (print_bound_plan).
int run_plan(const std::string& path, int gpus, int64_t max_step_tokens) {
  Result<checkpoint::ModelConfig> config = std::filesystem::is_directory(path)
      ? checkpoint::load_model_config(path)
      : [&]() -> Result<checkpoint::ModelConfig> {
          DSV4_ASSIGN_OR_RETURN(const std::string text, format::read_text_file(path));
          return checkpoint::parse_model_config(text, path);
        }();
  EngineOptions defaults;
  if (max_step_tokens > 0) defaults.max_step_tokens = max_step_tokens;
  Result<runtime::EpMemoryPlan> plan = config.ok()
                                           ? runtime::plan_ep_memory(*config, gpus)
                                           : Result<runtime::EpMemoryPlan>(config.status());
  if (!plan.ok()) {
    std::fprintf(stderr, "dsv4 check --plan: %s\n", plan.status().to_string().c_str());
    return 1;
  }
  const runtime::StepMemoryPlan step = runtime::plan_step_memory(defaults, *config);
  const int64_t headroom = runtime::device_placement(defaults, step.total()).device_headroom;
  std::printf("%s: %s", path.c_str(), runtime::describe(*plan, headroom).c_str());
  std::printf("at a batch of %lld and a context of %lld, %s\n",
              static_cast<long long>(defaults.max_batch),
              static_cast<long long>(defaults.max_context), runtime::describe(step).c_str());
  if (std::filesystem::is_directory(path)) {
    print_bound_plan(path, *plan, config->n_routed_experts, headroom);
  }
  return 0;
}

}  // namespace

void register_check(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand(
      "check",
      "Prove a checkpoint binds completely (every key, every slot; no zero or NaN tensor)");
  auto dir = std::make_shared<std::string>();
  auto convention = std::make_shared<std::string>();
  cmd->add_option("DIR", *dir, "checkpoint directory (config.json and safetensors)")->required();
  cmd->add_option("--convention", *convention,
                  "force the naming convention instead of detecting it")
      ->check(CLI::IsMember({"official", "pretrained", "state_dict"}));
  auto plan = std::make_shared<bool>(false);
  auto gpus = std::make_shared<int>(1);
  cmd->add_flag("--plan", *plan,
                "print which GPU holds what under expert parallelism over --gpus ranks, from the "
                "config (DIR may be a config.json), then from the checkpoint as bound, and "
                "whether it fits H100s and H200s");
  cmd->add_option("--gpus", *gpus, "ranks of the --plan, one a GPU")
      ->capture_default_str()
      ->check(CLI::Range(1, 8));
  auto max_step_tokens = std::make_shared<int64_t>(0);
  add_max_step_tokens_flag(cmd, *max_step_tokens);
  cmd->callback([dir, convention, plan, gpus, max_step_tokens, &exit_code] {
    exit_code = *plan ? run_plan(*dir, *gpus, *max_step_tokens) : run_check(*dir, *convention);
  });
}

}  // namespace dsv4::tools
