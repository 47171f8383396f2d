// TempDir: a fresh directory under $TMPDIR (or /tmp) for one test, removed with everything in it
// when the test ends, so tests that write checkpoints never see each other's files.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>

#include "base/check.h"

namespace dsv4::testing {

class TempDir {
 public:
  TempDir() {
    const char* root = std::getenv("TMPDIR");
    std::string pattern = std::string(root && *root ? root : "/tmp") + "/dsv4-test-XXXXXX";
    DSV4_CHECK(::mkdtemp(pattern.data()) != nullptr, "mkdtemp(%s) failed", pattern.c_str());
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;  // a leftover temp dir must not fail the test that used it
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // path()/name; `name` may contain subdirectories.
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace dsv4::testing
