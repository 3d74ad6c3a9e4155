// Status and Result<T>: error values returned across library boundaries.
// Untrusted input (files, JSON, prompts) never aborts the process; every failure
// travels up as a Status with a human-readable message that says what is wrong.
#pragma once

#include <cstdio>
#include <string>
#include <utility>
#include <variant>

namespace chimera {

enum class StatusCode { kOk = 0, kInvalidArgument, kNotFound, kOutOfRange, kIoError, kUnsupported, kInternal };

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status ok() { return Status(); }
  bool is_ok() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // Prefixes context ("while reading tensor 'x': ...").
  Status with_context(const std::string& ctx) const {
    if (is_ok()) return *this;
    return Status(code_, ctx + ": " + message_);
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status invalid_argument(std::string m) { return Status(StatusCode::kInvalidArgument, std::move(m)); }
inline Status not_found(std::string m) { return Status(StatusCode::kNotFound, std::move(m)); }
inline Status out_of_range(std::string m) { return Status(StatusCode::kOutOfRange, std::move(m)); }
inline Status io_error(std::string m) { return Status(StatusCode::kIoError, std::move(m)); }
inline Status unsupported(std::string m) { return Status(StatusCode::kUnsupported, std::move(m)); }
inline Status internal_error(std::string m) { return Status(StatusCode::kInternal, std::move(m)); }

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(implicit)
  Result(Status status) : v_(std::move(status)) {  // NOLINT(implicit)
    if (std::get<Status>(v_).is_ok()) v_ = Status(StatusCode::kInternal, "Result built from OK status");
  }
  bool is_ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return is_ok(); }
  const Status& status() const {
    static const Status kOk;
    return is_ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace chimera

#define CHIMERA_CONCAT_INNER(a, b) a##b
#define CHIMERA_CONCAT(a, b) CHIMERA_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function if `expr` failed.
#define CHIMERA_RETURN_IF_ERROR(expr)            \
  do {                                           \
    ::chimera::Status _st = (expr);              \
    if (!_st.is_ok()) return _st;                \
  } while (0)

// auto x = expr-returning-Result<T>, or return its Status.
#define CHIMERA_ASSIGN_OR_RETURN(lhs, expr)                         \
  auto CHIMERA_CONCAT(_res_, __LINE__) = (expr);                    \
  if (!CHIMERA_CONCAT(_res_, __LINE__).is_ok())                     \
    return CHIMERA_CONCAT(_res_, __LINE__).status();                \
  lhs = std::move(CHIMERA_CONCAT(_res_, __LINE__)).value()

// Internal invariant: a bug in chimera, never a user error.
#define CHIMERA_CHECK(cond)                                                             \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      std::fprintf(stderr, "chimera internal error: %s at %s:%d\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                                     \
    }                                                                                   \
  } while (0)
