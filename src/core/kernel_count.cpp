// The kernel dispatch counter and the host profile (core/kernel_count.h).
#include "core/kernel_count.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <utility>

namespace sru {

namespace {
std::atomic<uint64_t> dispatches{0};

// The host profile's marks: a relaxed flag read per dispatch when off; a mutex-guarded list when on.
std::atomic<bool> profiling{false};
std::mutex profile_mutex;
std::vector<std::pair<const char*, std::chrono::steady_clock::time_point>> marks;
}  // namespace

uint64_t kernel_dispatches() { return dispatches.load(std::memory_order_relaxed); }

void start_host_profile() {
  std::lock_guard<std::mutex> lock(profile_mutex);
  marks.clear();
  marks.reserve(1 << 20);
  profiling.store(true, std::memory_order_relaxed);
}

std::vector<HostProfileEntry> stop_host_profile() {
  std::lock_guard<std::mutex> lock(profile_mutex);
  profiling.store(false, std::memory_order_relaxed);
  // Charges the interval from mark i to mark i + 1 to `key`.
  const auto charge = [](std::map<std::string, HostProfileEntry>& to, const std::string& key, size_t i) {
    HostProfileEntry& e = to[key];
    e.marks += 1;
    e.total_us += std::chrono::duration<double, std::micro>(marks[i + 1].second - marks[i].second).count();
  };
  // Names are literals, but one literal may sit at two addresses (two translation units): group by text.
  std::map<std::string, HostProfileEntry> by_name;
  for (size_t i = 0; i + 1 < marks.size(); ++i) charge(by_name, marks[i].first, i);
  // SRU_HOST_PROFILE_CONTEXT=NAME: the marks of NAME split by the marks before and after them, as
  // "before > NAME > after" lines (which of an op's call sites holds the host).
  if (const char* probe = std::getenv("SRU_HOST_PROFILE_CONTEXT")) {
    std::map<std::string, HostProfileEntry> sites;
    for (size_t i = 0; i + 1 < marks.size(); ++i)
      if (std::string(marks[i].first) == probe)
        charge(sites, std::string(i > 0 ? marks[i - 1].first : "(start)") + " > " + probe + " > " + marks[i + 1].first, i);
    for (auto& [site, e] : sites)
      std::printf("# host profile context: %s: %llu marks, %.1f us\n", site.c_str(), static_cast<unsigned long long>(e.marks), e.total_us);
  }
  std::vector<HostProfileEntry> entries;
  for (auto& [name, e] : by_name) {
    e.name = name;
    entries.push_back(e);
  }
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.total_us > b.total_us; });
  marks.clear();
  return entries;
}

namespace detail {
void host_profile_mark(const char* name) {
  if (!profiling.load(std::memory_order_relaxed)) return;
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(profile_mutex);
  marks.emplace_back(name, now);
}

void count_kernel_dispatch(const char* name) {
  dispatches.fetch_add(1, std::memory_order_relaxed);
  host_profile_mark(name);
}
}  // namespace detail

}  // namespace sru
