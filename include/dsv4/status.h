// Status and Result<T>: how dsv4 reports what the world can get wrong (a missing file, a bad
// header, a wrong shape, an unsupported config). Bugs use DSV4_CHECK instead (src/base/check.h).
// C++20 has no std::expected, so this is a small cut-down of abseil's Status / StatusOr.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace dsv4 {

enum class StatusCode {
  kOk,
  kInvalidArgument,    // the caller (a flag, a config value, a request) asked for something wrong
  kNotFound,           // a file, tensor or key that should exist does not
  kDataLoss,           // a file exists but its bytes are corrupt or inconsistent
  kUnimplemented,      // valid, but not supported by this engine
  kResourceExhausted,  // out of memory, or a size over a cap
  kInternal,           // a failure of a library or the device we called
};

std::string_view status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "not found: layers.3.attn.wq_a.weight" - what a user sees.
  std::string to_string() const;
  // Returns a copy whose message is "context: message", to say where an error happened.
  Status with_context(std::string_view context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status ok_status() { return Status(); }
Status invalid_argument(std::string message);
Status not_found(std::string message);
Status data_loss(std::string message);
Status unimplemented(std::string message);
Status resource_exhausted(std::string message);
Status internal_error(std::string message);

// A value or the Status explaining why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}        // NOLINT: implicit, like absl::StatusOr
  Result(Status status) : state_(std::move(status)) {  // NOLINT
    if (std::get<Status>(state_).ok()) {
      state_ = Status(StatusCode::kInternal, "Result constructed from an OK status");
    }
  }

  bool ok() const { return std::holds_alternative<T>(state_); }
  const Status& status() const {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<Status>(state_);
  }
  T& value() & { return std::get<T>(state_); }
  const T& value() const& { return std::get<T>(state_); }
  T&& value() && { return std::get<T>(std::move(state_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> state_;
};

}  // namespace dsv4

#define DSV4_STATUS_CONCAT_INNER(a, b) a##b
#define DSV4_STATUS_CONCAT(a, b) DSV4_STATUS_CONCAT_INNER(a, b)

// Returns the Status of `expr` from the enclosing function when it is not OK.
#define DSV4_RETURN_IF_ERROR(expr)               \
  do {                                           \
    ::dsv4::Status dsv4_status_ = (expr);        \
    if (!dsv4_status_.ok()) return dsv4_status_; \
  } while (0)

// `DSV4_ASSIGN_OR_RETURN(auto x, f());` binds x to f()'s value or returns its Status.
#define DSV4_ASSIGN_OR_RETURN(lhs, expr)                        \
  auto DSV4_STATUS_CONCAT(dsv4_result_, __LINE__) = (expr);     \
  if (!DSV4_STATUS_CONCAT(dsv4_result_, __LINE__).ok())         \
    return DSV4_STATUS_CONCAT(dsv4_result_, __LINE__).status(); \
  lhs = std::move(DSV4_STATUS_CONCAT(dsv4_result_, __LINE__)).value()
