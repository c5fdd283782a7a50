// CPU threading: one OpenMP pool shared with OpenBLAS (its OpenMP build), a thread-count setting,
// and parallel_for, which splits a range into chunks only when the work is large enough to pay.
#pragma once

#include <algorithm>
#include <cstdint>

#include <omp.h>

namespace sru {

// Sets the threads used by our kernels and by OpenBLAS. n <= 0 means all cores.
void set_num_threads(int n);
int num_threads();

// Elements below which an elementwise loop stays on one thread (thread start-up costs ~microseconds).
constexpr int64_t kParallelGrain = 32768;

// Calls fn(begin, end) over disjoint chunks of [begin, end) covering it, in parallel when
// (end - begin) > grain. fn must not throw across threads: it runs inside an OpenMP region.
template <typename F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& fn) {
  const int64_t n = end - begin;
  if (n <= 0) return;
  const int threads = static_cast<int>(std::min<int64_t>(omp_get_max_threads(), (n + grain - 1) / std::max<int64_t>(grain, 1)));
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
