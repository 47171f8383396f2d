// dsv4 quantize IN_DIR OUT_DIR --input-scale X [--all-linears] [--force]: a bf16/f32
// checkpoint's routed experts (optionally every 2-D linear) to ModelOpt-layout NVFP4
// (checkpoint/quantize.h, docs/nvfp4.md). The result binds under `dsv4 check`.
#include "checkpoint/quantize.h"

#include <cstdio>
#include <memory>
#include <string>

#include "commands.h"

namespace dsv4::tools {
namespace {

struct QuantizeArgs {
  std::string in_dir;
  std::string out_dir;
  checkpoint::QuantizeOptions options;
  int64_t calibration_tokens = 0;
};

int run_quantize(const QuantizeArgs& args) {
  if (args.calibration_tokens > 0 || args.options.input_scale <= 0.0f) {
    std::fprintf(stderr,
                 "dsv4 quantize: a calibration pass (--calibration-tokens) needs the model forward "
                 "and is not implemented; pass --input-scale X, the activation decode scale "
                 "amax_x / 2688 written as every input_scale\n");
    return 2;
  }
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
  cmd->add_flag("--all-linears", args->options.all_linears,
                "also quantize every 2-D linear but the embedding, head and router");
  auto* scale = cmd->add_option("--input-scale", args->options.input_scale,
                                "static activation decode scale (amax_x / 2688) for every linear");
  cmd->add_option("--calibration-tokens", args->calibration_tokens,
                  "calibrate input scales on N tokens (not implemented: needs the model forward)")
      ->excludes(scale);
  cmd->add_flag("--force", args->options.force, "write into a non-empty OUT_DIR");
  cmd->callback([args, &exit_code] { exit_code = run_quantize(*args); });
}

}  // namespace dsv4::tools
