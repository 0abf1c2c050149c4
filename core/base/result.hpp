// Result<T>: a value or an errno with a message. The FUSE path never throws;
// every fallible core call returns one of these instead.
#pragma once

#include <cerrno>
#include <string>
#include <utility>
#include <variant>

namespace sealfs {

struct Error {
  int code = EIO;       // an errno value, chosen on purpose by the failing call
  std::string message;  // one human-readable line, for logs and CLI output
};

inline Error make_error(int code, std::string message) { return Error{code, std::move(message)}; }
// errno of the last failed syscall, with context ("openat kernels/x").
inline Error errno_error(std::string context) { return Error{errno, std::move(context)}; }

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Error& error() const { return std::get<1>(v_); }
  int code() const { return ok() ? 0 : error().code; }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : err_(std::move(error)), ok_(false) {}  // NOLINT(google-explicit-constructor)
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return err_; }
  int code() const { return ok_ ? 0 : err_.code; }

 private:
  Error err_{};
  bool ok_ = true;
};

using Status = Result<void>;

}  // namespace sealfs
