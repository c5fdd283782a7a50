// The one exception type srutrain throws, and the check macros that build its messages (and record file:line).
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace sru {

// A user-facing error: the message says what went wrong and, where known, what to do about it. The
// source location of the check that failed is kept apart: users see the message (what()); the apps
// add the location only in debug mode (--debug or SRU_DEBUG=1), for developers.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, std::string location = "")
      : std::runtime_error(message), location_(std::move(location)) {}
  const std::string& location() const { return location_; }  // "core/tensor.cpp:131" or ""

 private:
  std::string location_;
};

namespace detail {
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
[[noreturn]] void throw_error(const char* file, int line, const std::string& message);
}  // namespace detail

}  // namespace sru

// SRU_CHECK(cond, parts...): throws sru::Error("parts...") with location file:line when cond is false.
#define SRU_CHECK(cond, ...)                                                        \
  do {                                                                              \
    if (!(cond)) [[unlikely]]                                                       \
      ::sru::detail::throw_error(__FILE__, __LINE__, ::sru::detail::concat(__VA_ARGS__)); \
  } while (0)

#define SRU_FAIL(...) ::sru::detail::throw_error(__FILE__, __LINE__, ::sru::detail::concat(__VA_ARGS__))
