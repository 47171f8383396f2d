// dsv4 quantize IN_DIR OUT_DIR (--input-scale X | --calibration-text FILE [--calibration-tokens N]
// [--tokenizer FILE]) [--all-linears] [--force]: a bf16/f32 checkpoint's routed experts
// (optionally every 2-D linear) to ModelOpt-layout NVFP4 (checkpoint/quantize.h, docs/nvfp4.md).
// The input scales are one static value, or calibrated per routed expert on a text's tokens
// (runtime/calibration.h); the result binds under `dsv4 check`.
#include "checkpoint/quantize.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/mapped_file.h"
#include "commands.h"
#include "dsv4/tokenizer.h"
#include "engine_flags.h"
#include "runtime/calibration.h"

namespace dsv4::tools {
namespace {

struct QuantizeArgs {
  std::string in_dir;
  std::string out_dir;
  checkpoint::QuantizeOptions options;
  std::string calibration_text;
  int64_t calibration_tokens = 2048;
  std::string tokenizer;  // default: IN_DIR/tokenizer.json
};

// The text's first `bytes` bytes (all of it when shorter), cut back to a UTF-8 character boundary.
std::string_view text_prefix(std::string_view text, size_t bytes) {
  if (bytes >= text.size()) return text;
  while (bytes > 0 && (static_cast<unsigned char>(text[bytes]) & 0xC0) == 0x80) --bytes;
  return text.substr(0, bytes);
}

// The first calibration_tokens ids of the calibration text, through the checkpoint's tokenizer.
// A calibration text may be a whole dataset, so only a prefix is encoded: one that gives the
// same first ids as a prefix twice as long, so that where it was cut (a word split in two, which
// may change that word's ids) lies past the ids taken.
Result<std::vector<int64_t>> calibration_ids(const QuantizeArgs& args) {
  const std::string path =
      args.tokenizer.empty() ? args.in_dir + "/tokenizer.json" : args.tokenizer;
  Result<Tokenizer> tokenizer = Tokenizer::load(path);
  if (!tokenizer.ok()) {
    return tokenizer.status().with_context("--calibration-text needs the checkpoint's tokenizer");
  }
  DSV4_ASSIGN_OR_RETURN(MappedFile file, MappedFile::open(args.calibration_text));
  if (file.size() == 0) return invalid_argument(args.calibration_text + ": empty calibration text");
  const std::string_view text(reinterpret_cast<const char*>(file.data()), file.size());
  const auto encode = [&](std::string_view prefix) -> Result<std::vector<int64_t>> {
    Result<std::vector<int64_t>> ids = tokenizer->encode(prefix);
    return ids.ok() ? std::move(ids) : ids.status().with_context(args.calibration_text);
  };
  const auto n = static_cast<size_t>(args.calibration_tokens);
  size_t bytes = 16 * n;  // a few bytes a token: usually settles at once
  std::string_view prefix = text_prefix(text, bytes);
  DSV4_ASSIGN_OR_RETURN(std::vector<int64_t> ids, encode(prefix));
  while (prefix.size() < text.size()) {
    bytes *= 2;
    prefix = text_prefix(text, bytes);
    DSV4_ASSIGN_OR_RETURN(std::vector<int64_t> longer, encode(prefix));
    const bool settled =
        ids.size() >= n && longer.size() >= n &&
        std::equal(ids.begin(), ids.begin() + static_cast<int64_t>(n), longer.begin());
    ids = std::move(longer);
    if (settled) break;
  }
  if (ids.size() > n) ids.resize(n);
  return ids;
}

// The calibration pass: its scales, and what it measured on stdout.
Result<checkpoint::ExpertInputScales> calibrate(const QuantizeArgs& args) {
  DSV4_ASSIGN_OR_RETURN(std::vector<int64_t> ids, calibration_ids(args));
  DSV4_ASSIGN_OR_RETURN(runtime::ExpertCalibration calibration,
                        runtime::calibrate_expert_inputs(args.in_dir, ids));
  const size_t n_pairs =
      calibration.scales.gate_up.size() *
      (calibration.scales.gate_up.empty() ? 0 : calibration.scales.gate_up[0].size());
  std::printf(
      "calibrated:  %lld tokens of %s; %lld of %zu (layer, expert) pairs reached no "
      "token and take their layer's largest input scale\n",
      static_cast<long long>(calibration.n_tokens), args.calibration_text.c_str(),
      static_cast<long long>(calibration.n_unreached), n_pairs);
  return std::move(calibration.scales);
}

int run_quantize(QuantizeArgs args, bool calibrating) {
  // The pass runs inside quantize_checkpoint, once the input and the output have been checked.
  if (calibrating) args.options.calibrate_experts = [&args] { return calibrate(args); };
  const Result<checkpoint::QuantizeSummary> summary =
      checkpoint::quantize_checkpoint(args.in_dir, args.out_dir, args.options);
  if (!summary.ok()) {
    std::fprintf(stderr, "dsv4 quantize: %s\n", summary.status().to_string().c_str());
    return 1;
  }
  std::printf("convention:  %s\n",
              std::string(checkpoint::convention_name(summary->convention)).c_str());
  std::printf("quantized:   %zu weight tensors to NVFP4\n", summary->n_quantized);
  std::printf("copied:      %zu tensors unchanged\n", summary->n_copied);
  std::printf("written:     %zu shards, %zu tensor bytes, in %s\n", summary->n_shards,
              summary->tensor_bytes, args.out_dir.c_str());
  return 0;
}

}  // namespace

void register_quantize(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand(
      "quantize", "Quantize a bf16/f32 checkpoint's routed experts to ModelOpt-layout NVFP4");
  auto args = std::make_shared<QuantizeArgs>();
  cmd->add_option("IN_DIR", args->in_dir, "input checkpoint directory")->required();
  cmd->add_option("OUT_DIR", args->out_dir, "output directory (empty or absent)")->required();
  auto* all = cmd->add_flag("--all-linears", args->options.all_linears,
                            "also quantize every 2-D linear but the embedding, head and router");
  auto* scale = cmd->add_option("--input-scale", args->options.input_scale,
                                "static activation decode scale (amax_x / 2688) of every "
                                "quantized linear the calibration does not cover")
                    ->check(positive());
  auto* text = cmd->add_option("--calibration-text", args->calibration_text,
                               "calibrate each routed expert's input scales on this text's "
                               "tokens (the checkpoint runs them on the CPU)")
                   ->check(CLI::ExistingFile);
  cmd->add_option("--calibration-tokens", args->calibration_tokens,
                  "at most this many tokens of the calibration text, run as one sequence "
                  "(about 1 MB of activations a token at V4-Flash's width)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 15))
      ->needs(text);
  cmd->add_option("--tokenizer", args->tokenizer,
                  "tokenizer.json of the calibration text (default: IN_DIR/tokenizer.json)")
      ->check(CLI::ExistingFile)
      ->needs(text);
  cmd->add_flag("--force", args->options.force, "write into a non-empty OUT_DIR");
  cmd->callback([args, scale, text, all, &exit_code] {
    // Without calibration every input scale is the static one; with it, the static one covers
    // the other linears of --all-linears only.
    if (text->count() == 0 && scale->count() == 0) {
      throw CLI::RequiredError("--input-scale or --calibration-text");
    }
    if (text->count() > 0 && (all->count() > 0) != (scale->count() > 0)) {
      throw CLI::ValidationError(
          "--input-scale", all->count() > 0 ? "--all-linears with --calibration-text needs "
                                              "--input-scale for the linears it does not cover"
                                            : "with --calibration-text it applies only with "
                                              "--all-linears (the calibration covers the "
                                              "routed experts)");
    }
    exit_code = run_quantize(*args, text->count() > 0);
  });
}

}  // namespace dsv4::tools
