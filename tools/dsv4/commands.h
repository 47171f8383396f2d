// The dsv4 subcommands. Each lives in its own file and registers itself on the CLI11 app;
// its callback returns the process exit code through `exit_code`.
#pragma once

#include <CLI/CLI.hpp>

namespace dsv4::tools {

// Registration functions, one per subcommand file.
void register_bench(CLI::App& app, int& exit_code);     // bench.cpp
void register_chat(CLI::App& app, int& exit_code);      // chat.cpp
void register_check(CLI::App& app, int& exit_code);     // check.cpp
void register_eval(CLI::App& app, int& exit_code);      // eval.cpp
void register_generate(CLI::App& app, int& exit_code);  // generate.cpp
void register_inspect(CLI::App& app, int& exit_code);   // inspect.cpp
void register_quantize(CLI::App& app, int& exit_code);  // quantize.cpp
void register_verify(CLI::App& app, int& exit_code);    // verify.cpp

}  // namespace dsv4::tools
