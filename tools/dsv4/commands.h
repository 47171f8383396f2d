// The dsv4 subcommands. Each lives in its own file and registers itself on the CLI11 app;
// its callback returns the process exit code through `exit_code`.
#pragma once

#include <CLI/CLI.hpp>

namespace dsv4::tools {

// Registration functions, one per subcommand file.

}  // namespace dsv4::tools
