// DSV4_CHECK: for conditions only a bug can break. Always on (also under NDEBUG): it prints
// file:line and the formatted message, then aborts. Never use it on user input - that gets a
// Status (include/dsv4/status.h).
#pragma once

#include <cstdio>
#include <cstdlib>

namespace dsv4::base {

[[noreturn]] inline void check_failed(const char* file, int line, const char* condition,
                                      const char* message) {
  std::fprintf(stderr, "%s:%d: DSV4_CHECK(%s) failed: %s\n", file, line, condition, message);
  std::abort();
}

}  // namespace dsv4::base

#define DSV4_CHECK(cond, ...)                                              \
  do {                                                                     \
    if (!(cond)) {                                                         \
      char dsv4_check_message_[512];                                       \
      std::snprintf(dsv4_check_message_, sizeof dsv4_check_message_, "" __VA_ARGS__); \
      ::dsv4::base::check_failed(__FILE__, __LINE__, #cond, dsv4_check_message_); \
    }                                                                      \
  } while (0)

#define DSV4_UNREACHABLE(...) DSV4_CHECK(false, __VA_ARGS__)
