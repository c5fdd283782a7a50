// CPU threading: one OpenMP pool shared with OpenBLAS (its OpenMP build), a thread-count setting that
// yields cores other processes keep busy, and parallel_for, which splits a range into chunks only when
// the work is large enough to pay.
#pragma once

#include <algorithm>
#include <cstdint>

#include <omp.h>

namespace sru {

// Sets the most threads our kernels and OpenBLAS use. n <= 0 means all cores. The calling thread
// becomes the one whose thread count follows the machine's load (adapt_threads).
void set_num_threads(int n);
// The threads parallel regions use now (OpenMP's own setting is kept at 1, see parallel.cpp).
int num_threads();
// The thread count last asked for with set_num_threads (num_threads() may be lower under load).
int requested_threads();

// Load-aware threads. Every parallel region waits for its slowest thread, so when another process
// keeps a core busy, a thread sharing that core makes every region wait for the scheduler (measured:
// 2 threads 1.7-2.8x slower than 1 beside one busy process, 25x beside a multi-threaded one). At most every 200 ms, on the thread that
// called set_num_threads and outside parallel regions, adapt_threads() reads the cores' busy time
// (/proc/stat, the cores this process may run on) minus this process's own CPU time, and runs on the
// cores the other processes leave free (at least 1, at most the requested count). Off with
// SRU_ADAPTIVE_THREADS=0 or set_adaptive_threads(false); results do not depend on the thread count.
void adapt_threads();
void set_adaptive_threads(bool on);
bool adaptive_threads();
// Thread-count changes made by adapt_threads so far, and the latest estimate of the cores other
// processes keep busy (for benchmarks and logs).
int64_t thread_adaptations();
double other_processes_cores();

// Elements below which an elementwise loop stays on one thread (thread start-up costs ~microseconds).
constexpr int64_t kParallelGrain = 32768;

// Calls fn(begin, end) over disjoint chunks of [begin, end) covering it, in parallel when
// (end - begin) > grain. fn must not throw across threads: it runs inside an OpenMP region.
template <typename F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& fn) {
  const int64_t n = end - begin;
  if (n <= 0) return;
  const int64_t chunks = (n + grain - 1) / std::max<int64_t>(grain, 1);
  if (chunks > 1 && !omp_in_parallel()) adapt_threads();
  const int threads = static_cast<int>(std::min<int64_t>(num_threads(), chunks));
  if (threads <= 1 || omp_in_parallel()) {
    fn(begin, end);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
    const int nt = omp_get_num_threads();
    const int64_t chunk = (n + nt - 1) / nt;
    const int64_t b = begin + t * chunk;
    const int64_t e = std::min(end, b + chunk);
    if (b < e) fn(b, e);
  }
}

}  // namespace sru
