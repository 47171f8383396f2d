// synth_checkpoint: writes a synthetic DeepSeek-V4 checkpoint at a real config's layer shapes
// with random weights (synthetic_checkpoint.h), so `dsv4 bench --device cuda --model OUT_DIR`
// times V4-Flash / V4-Pro shapes without the real checkpoint. A program, not a test.
//   usage: synth_checkpoint CONFIG_JSON OUT_DIR --layers N [--mtp-layers M] [--seed S]
// (M MTP draft blocks, for `dsv4 bench --speculative K`; default none).
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>

#include "checkpoint/synthetic_checkpoint.h"

namespace {

constexpr double kGB = 1e9;

void print_shard(const dsv4::bench::SyntheticShard& shard) {
  std::printf("shard %zu/%zu %s: %zu tensors, %.2f GB in %.1f s (%.2f GB/s)\n", shard.index + 1,
              shard.count, shard.file.c_str(), shard.n_tensors, shard.bytes / kGB, shard.seconds,
              shard.bytes / kGB / shard.seconds);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  dsv4::bench::SyntheticOptions options;
  CLI::App app(
      "Writes a synthetic DeepSeek-V4 checkpoint (random weights, NVFP4 routed "
      "experts) at a config's layer shapes");
  app.add_option("CONFIG_JSON", options.config_path, "a DeepSeek-V4 config.json")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("OUT_DIR", options.out_dir, "output directory (empty or absent)")->required();
  // Its range (1 .. the config's layers) is checked against the config, which names it.
  app.add_option("--layers", options.n_layers, "layers to write (the config's first N)")
      ->required();
  app.add_option("--mtp-layers", options.n_mtp_layers,
                 "MTP draft blocks to write (the config's first M)")
      ->capture_default_str();
  app.add_option("--seed", options.seed, "random seed (the same seed writes the same bytes)")
      ->capture_default_str();
  app.add_flag("--fp8-linears", options.fp8_linears,
               "write the linears the release stores in FP8 (attention, the indexer's wq_b, the "
               "shared expert, MTP's projections) in FP8 with 128x128 block scales, as it "
               "stores them; without it, in bf16");
  CLI11_PARSE(app, argc, argv);

  options.on_shard = print_shard;
  const auto start = std::chrono::steady_clock::now();
  const auto summary = dsv4::bench::write_synthetic_checkpoint(options);
  if (!summary.ok()) {
    std::fprintf(stderr, "synth_checkpoint: %s\n", summary.status().to_string().c_str());
    return 1;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("wrote %s: %zu tensors in %zu shards, %.2f GB in %.1f s (%.2f GB/s)\n",
              options.out_dir.c_str(), summary->n_tensors, summary->n_shards,
              summary->tensor_bytes / kGB, seconds, summary->tensor_bytes / kGB / seconds);
  return 0;
}
