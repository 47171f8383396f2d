// Paths of committed test data (fixtures, tests/golden). ctest runs each test with
// DSV4_SOURCE_DIR set to the repository root (tests/CMakeLists.txt), so tests find their data
// wherever the build directory is.
#pragma once

#include <cstdlib>
#include <string>

namespace dsv4::testing {

// `relative` (e.g. "tests/golden/configs/tiny_a.json") under the repository root; under the
// current directory when DSV4_SOURCE_DIR is unset (running a test binary by hand from the root).
inline std::string source_path(const std::string& relative) {
  const char* root = std::getenv("DSV4_SOURCE_DIR");
  return (root && *root ? std::string(root) + "/" : std::string()) + relative;
}

}  // namespace dsv4::testing
