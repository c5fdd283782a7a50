// Throws sru::Error with the source location of the failed check.
#include "core/error.h"

namespace sru::detail {

void throw_error(const char* file, int line, const std::string& message) {
  std::string where = file;
  // Report paths relative to src/ so messages do not depend on the build machine's checkout path.
  if (auto pos = where.rfind("/src/"); pos != std::string::npos) where = where.substr(pos + 1);
  throw Error(message, where + ":" + std::to_string(line));
}

}  // namespace sru::detail
