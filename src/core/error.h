// The one exception type srutrain throws, and the check macros that build its messages with file:line.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace sru {

// A user-facing error: the message says what went wrong and, where known, what to do about it.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
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

// SRU_CHECK(cond, parts...): throws sru::Error("parts... (file:line)") when cond is false.
#define SRU_CHECK(cond, ...)                                                        \
  do {                                                                              \
    if (!(cond)) [[unlikely]]                                                       \
      ::sru::detail::throw_error(__FILE__, __LINE__, ::sru::detail::concat(__VA_ARGS__)); \
  } while (0)

#define SRU_FAIL(...) ::sru::detail::throw_error(__FILE__, __LINE__, ::sru::detail::concat(__VA_ARGS__))
