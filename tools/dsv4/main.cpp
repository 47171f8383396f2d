// dsv4: one binary, one file per subcommand (see commands.h).
#include <CLI/CLI.hpp>

#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"dsv4: DeepSeek-V4 inference with NVFP4 experts"};
  app.require_subcommand(1);
  int exit_code = 0;
  dsv4::tools::register_bench(app, exit_code);
  dsv4::tools::register_chat(app, exit_code);
  dsv4::tools::register_check(app, exit_code);
  dsv4::tools::register_eval(app, exit_code);
  dsv4::tools::register_generate(app, exit_code);
  dsv4::tools::register_inspect(app, exit_code);
  dsv4::tools::register_quantize(app, exit_code);
  dsv4::tools::register_verify(app, exit_code);
  CLI11_PARSE(app, argc, argv);
  return exit_code;
}
