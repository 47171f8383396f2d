// The engine flags (tools/engine_flags) as a command parses them into EngineOptions:
//   - --numerics auto, the default, is fast with --device cuda and exact with --device cpu, and
//     an explicit profile is kept on either device (fast on the CPU is the engine's to refuse);
//   - a command that checks the exact profile (dsv4 verify) runs exact by default on cuda too,
//     and refuses fast by name;
//   - a value outside auto|exact|fast is refused when parsed;
//   - --cuda-graph auto, the default, is on with --device cuda and one rank only (ranks run a
//     layer on several threads, which no graph captures), and on or off is kept as named.
#include "engine_flags.h"

#include <gtest/gtest.h>

#include <string>

namespace dsv4::tools {
namespace {

// The flags a command gets from `command_line` (the --model given, so nothing reads the
// environment or names the embedded model).
EngineFlags parse(const std::string& command_line) {
  CLI::App app;
  EngineFlags flags;
  add_engine_flags(&app, flags, /*model_required=*/false);
  app.parse("--model m " + command_line, /*program_name_included=*/false);
  return flags;
}

TEST(EngineFlags, NumericsDefaultIsFastOnCudaExactOnCpu) {
  EXPECT_EQ(parse("").numerics, "auto");
  EXPECT_EQ(engine_options(parse("--device cuda"), "test").numerics, Numerics::kFast);
  EXPECT_EQ(engine_options(parse("--device cpu"), "test").numerics, Numerics::kExact);
  EXPECT_EQ(engine_options(parse(""), "test").numerics, Numerics::kExact);
  EXPECT_EQ(engine_options(parse("--device cuda --numerics auto"), "test").numerics,
            Numerics::kFast);
}

TEST(EngineFlags, NumericsNamedIsKeptOnEitherDevice) {
  EXPECT_EQ(engine_options(parse("--device cuda --numerics exact"), "test").numerics,
            Numerics::kExact);
  EXPECT_EQ(engine_options(parse("--device cuda --numerics fast"), "test").numerics,
            Numerics::kFast);
  EXPECT_EQ(engine_options(parse("--device cpu --numerics fast"), "test").numerics,
            Numerics::kFast);
}

TEST(EngineFlags, VerifyRunsExactByDefaultOnCuda) {
  for (const char* command_line :
       {"--device cuda", "--device cpu", "--device cuda --numerics exact"}) {
    Result<EngineOptions> options = exact_engine_options(parse(command_line), "verify");
    ASSERT_TRUE(options.ok()) << command_line << ": " << options.status().to_string();
    EXPECT_EQ(options->numerics, Numerics::kExact) << command_line;
    EXPECT_EQ(options->model_dir, "m");
  }
}

TEST(EngineFlags, VerifyRefusesFastSayingWhy) {
  Result<EngineOptions> options =
      exact_engine_options(parse("--device cuda --numerics fast"), "verify");
  ASSERT_FALSE(options.ok());
  EXPECT_EQ(options.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(options.status().message().find(
                "--numerics fast: verify checks the exact profile against the oracle"),
            std::string::npos)
      << options.status().to_string();
}

TEST(EngineFlags, NumericsOutsideItsValuesIsRefused) {
  EXPECT_THROW(parse("--numerics fp8"), CLI::ValidationError);
}

TEST(EngineFlags, CudaGraphAutoIsOnWithCudaAndOneRank) {
  EXPECT_EQ(parse("").cuda_graph, "auto");
  EXPECT_TRUE(engine_options(parse("--device cuda"), "test").cuda_graph);
  EXPECT_TRUE(engine_options(parse("--device cuda --ep 1 --cuda-graph auto"), "test").cuda_graph);
  EXPECT_FALSE(engine_options(parse(""), "test").cuda_graph);
  EXPECT_FALSE(engine_options(parse("--device cpu"), "test").cuda_graph);
  EXPECT_FALSE(engine_options(parse("--device cuda --ep 2"), "test").cuda_graph);
  EXPECT_FALSE(engine_options(parse("--device cuda --ep 2 --gpus 2"), "test").cuda_graph);
  EXPECT_FALSE(engine_options(parse("--device cuda --cuda-graph off"), "test").cuda_graph);
  // Named, it is kept: check_parallelism is the engine's refusal of on with several ranks.
  EXPECT_TRUE(engine_options(parse("--device cpu --cuda-graph on"), "test").cuda_graph);
  EXPECT_TRUE(engine_options(parse("--device cuda --ep 2 --cuda-graph on"), "test").cuda_graph);
}

TEST(EngineFlags, NumericsNameIsTheFlagsSpelling) {
  EXPECT_STREQ(numerics_name(Numerics::kExact), "exact");
  EXPECT_STREQ(numerics_name(Numerics::kFast), "fast");
}

}  // namespace
}  // namespace dsv4::tools
