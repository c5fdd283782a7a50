// Thread-count control for OpenMP and OpenBLAS together, and the load-aware thread count
// (see parallel.h for why).
#include "core/parallel.h"

#include <sched.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace sru {

namespace {

// One reading of the load: busy time of the cores this process may use (all processes) and this
// process's own CPU time, both in seconds, and when it was taken.
struct LoadSample {
  double busy_s = 0, self_s = 0, wall_s = 0;
  bool ok = false;
};

double monotonic_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

LoadSample read_load(const cpu_set_t& cores) {
  LoadSample s;
  s.wall_s = monotonic_s();
  timespec ts{};
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) return s;
  s.self_s = static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  std::ifstream in("/proc/stat");
  if (!in) return s;
  static const double tick_s = 1.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
  std::string line;
  int counted = 0;
  while (std::getline(in, line)) {
    // "cpuN user nice system idle iowait irq softirq steal ...": busy = all but idle and iowait.
    if (line.compare(0, 3, "cpu") != 0) break;  // the per-core lines come first
    if (line.size() < 4 || line[3] == ' ') continue;  // the all-cores line
    std::istringstream fields(line.substr(3));
    int cpu = -1;
    unsigned long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
    fields >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
    if (!fields || cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &cores)) continue;
    s.busy_s += static_cast<double>(user + nice + system + irq + softirq + steal) * tick_s;
    ++counted;
  }
  s.ok = counted > 0;
  return s;
}

struct Governor {
  // Before any set_num_threads: OpenMP's default (OMP_NUM_THREADS or all cores). The first call of
  // num_threads() builds this, before anything sets OpenMP's count to 1 (blas_gemm asks it first).
  std::atomic<int> current{std::max(1, omp_get_max_threads())};
  int requested = 0;
  bool adaptive = [] {
    const char* env = std::getenv("SRU_ADAPTIVE_THREADS");
    return env == nullptr || std::strcmp(env, "0") != 0;
  }();
  std::atomic<std::thread::id> owner{};
  cpu_set_t cores{};
  int core_count = 0;
  LoadSample last;
  double next_s = 0;
  int64_t adaptations = 0;
  double others = 0;
};

Governor& governor() {
  static Governor g;
  return g;
}

// Our parallel regions name their thread count (num_threads(sru::num_threads())); OpenMP's own setting
// stays 1 so that OpenBLAS, which follows it, runs every call on the calling thread (ops/cpu/blas.h
// spreads GEMM tiles over our threads instead): its results then never depend on the thread count,
// and it never reallocates its per-thread buffers when the count changes.
void apply_threads(int n) {
  governor().current.store(n, std::memory_order_relaxed);
  if (omp_get_max_threads() != 1) omp_set_num_threads(1);  // OpenBLAS's own count: ops/cpu/blas.cpp
}

}  // namespace

void set_num_threads(int n) {
  if (n <= 0) n = omp_get_num_procs();
  Governor& g = governor();
  g.requested = n;
  g.owner.store(std::this_thread::get_id());
  CPU_ZERO(&g.cores);
  g.core_count = sched_getaffinity(0, sizeof(g.cores), &g.cores) == 0 ? CPU_COUNT(&g.cores) : 0;
  // The first decision comes 50 ms after this sample: a short run beside a busy core should not spend
  // its first 200 ms waiting for a thread that shares it.
  g.last = g.core_count > 0 ? read_load(g.cores) : LoadSample{};
  g.next_s = monotonic_s() + 0.05;
  apply_threads(n);
}

int num_threads() { return governor().current.load(std::memory_order_relaxed); }

int requested_threads() {
  const Governor& g = governor();
  return g.requested > 0 ? g.requested : num_threads();
}

void set_adaptive_threads(bool on) {
  Governor& g = governor();
  g.adaptive = on;
  if (!on && g.requested > 0) apply_threads(g.requested);
}

bool adaptive_threads() { return governor().adaptive; }
int64_t thread_adaptations() { return governor().adaptations; }
double other_processes_cores() { return governor().others; }

void adapt_threads() {
  Governor& g = governor();
  if (g.core_count == 0 || omp_in_parallel()) return;
  if (g.owner.load(std::memory_order_relaxed) != std::this_thread::get_id()) return;
  const double now = monotonic_s();
  if (now < g.next_s) return;
  g.next_s = now + 0.2;
  const LoadSample s = read_load(g.cores);
  if (!s.ok) {
    g.core_count = 0;  // no /proc/stat: keep the requested count from now on
    return;
  }
  const LoadSample prev = g.last;
  g.last = s;
  const double wall = s.wall_s - prev.wall_s;
  if (!prev.ok || wall < 0.04) return;
  // The clock-tick resolution of /proc/stat (10 ms) over >= 50 ms keeps this within ~0.2 cores.
  g.others = std::max(0.0, (s.busy_s - prev.busy_s - (s.self_s - prev.self_s)) / wall);
  if (!g.adaptive || g.requested <= 1) return;  // measured (for benchmarks and logs), not acted on
  const double free_cores = static_cast<double>(g.core_count) - g.others;
  const int current = num_threads();
  // Hysteresis: drop a thread once its core is more than half taken, take it back once it is 3/4 free.
  const int down = static_cast<int>(std::floor(free_cores + 0.5));
  const int up = static_cast<int>(std::floor(free_cores + 0.25));
  int target = current;
  if (down < current) target = down;
  else if (up > current) target = up;
  target = std::clamp(target, 1, g.requested);
  if (target != current) {
    apply_threads(target);
    ++g.adaptations;
  }
}

}  // namespace sru
