// The load-aware thread count (core/parallel.h): beside processes that keep every core busy it drops
// to one thread, with adaptation off it keeps the requested count.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/parallel.h"

namespace {

// One spinning child process per core until destroyed.
struct BusyCores {
  std::vector<pid_t> children;
  explicit BusyCores(int n) {
    for (int i = 0; i < n; ++i) {
      const pid_t pid = fork();
      if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        volatile unsigned long spin = 0;
        for (;;) spin = spin + 1;
      }
      children.push_back(pid);
    }
  }
  ~BusyCores() {
    for (const pid_t pid : children) kill(pid, SIGKILL);
    for (const pid_t pid : children) waitpid(pid, nullptr, 0);
  }
};

// Calls adapt_threads() for up to `seconds`, stopping early once `done()` holds.
template <typename Done>
void adapt_for(double seconds, Done done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until && !done()) {
    sru::adapt_threads();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

class LoadAwareThreads : public ::testing::Test {
 protected:
  void SetUp() override {
    if (omp_get_num_procs() < 2) GTEST_SKIP() << "needs 2 cores";
    if (!std::ifstream("/proc/stat")) GTEST_SKIP() << "no /proc/stat";
    was_adaptive_ = sru::adaptive_threads();
  }
  void TearDown() override {
    sru::set_adaptive_threads(was_adaptive_);
    sru::set_num_threads(0);
  }
  bool was_adaptive_ = true;
};

TEST_F(LoadAwareThreads, DropsToOneThreadWhenOtherProcessesTakeEveryCore) {
  sru::set_adaptive_threads(true);
  const int cores = omp_get_num_procs();
  BusyCores busy(cores);
  sru::set_num_threads(2);
  EXPECT_EQ(sru::requested_threads(), 2);
  adapt_for(5.0, [] { return sru::num_threads() == 1; });
  EXPECT_EQ(sru::num_threads(), 1) << "others use " << sru::other_processes_cores() << " cores";
  EXPECT_GT(sru::other_processes_cores(), 0.5);
  EXPECT_GE(sru::thread_adaptations(), 1);
  EXPECT_EQ(sru::requested_threads(), 2);
}

TEST_F(LoadAwareThreads, KeepsTheRequestedCountWhenAdaptationIsOff) {
  sru::set_adaptive_threads(false);
  BusyCores busy(omp_get_num_procs());
  sru::set_num_threads(2);
  adapt_for(0.5, [] { return false; });
  EXPECT_EQ(sru::num_threads(), 2);
}

}  // namespace
