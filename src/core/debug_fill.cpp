// The NaN-fill debug switch (see debug_fill.h), read from the environment once.
#include "core/debug_fill.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace sru {

namespace {
bool from_environment() {
  const char* v = std::getenv("SRU_DEBUG_NAN_FILL");
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}
std::atomic<bool>& flag() {
  static std::atomic<bool> on{from_environment()};
  return on;
}
}  // namespace

bool nan_fill_enabled() { return flag().load(std::memory_order_relaxed); }
bool set_nan_fill(bool on) { return flag().exchange(on); }

}  // namespace sru
