// The kernel dispatch counter (core/kernel_count.h).
#include "core/kernel_count.h"

#include <atomic>

namespace sru {

namespace {
std::atomic<uint64_t> dispatches{0};
}  // namespace

uint64_t kernel_dispatches() { return dispatches.load(std::memory_order_relaxed); }

namespace detail {
void count_kernel_dispatch() { dispatches.fetch_add(1, std::memory_order_relaxed); }
}  // namespace detail

}  // namespace sru
