// srubench under-load (see bench/load_bench.h): workloads timed alone and beside forked busy-loop
// processes, at each thread count, with and without the load-aware thread count.
#include "bench/load_bench.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <utility>

#include "bench/task_bench.h"
#include "core/error.h"
#include "core/parallel.h"

namespace sru::bench {

namespace {

// `cores` child processes, each spinning on the CPU until this object goes (SIGKILL). A child also
// dies with its parent (PR_SET_PDEATHSIG), so an interrupted benchmark leaves no spinner behind.
class BusyLoad {
 public:
  explicit BusyLoad(int cores) {
    for (int i = 0; i < cores; ++i) {
      const pid_t pid = fork();
      SRU_CHECK(pid >= 0, "srubench under-load: cannot start a busy process: ", std::strerror(errno));
      if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        volatile unsigned long spin = 0;
        for (;;) spin = spin + 1;
      }
      children_.push_back(pid);
    }
    if (cores > 0) usleep(100000);  // let the scheduler spread them before the clock starts
  }
  ~BusyLoad() {
    for (const pid_t pid : children_) kill(pid, SIGKILL);
    for (const pid_t pid : children_) waitpid(pid, nullptr, 0);
  }
  BusyLoad(const BusyLoad&) = delete;
  BusyLoad& operator=(const BusyLoad&) = delete;

 private:
  std::vector<pid_t> children_;
};

struct Workload {
  std::string name;
  std::function<double()> run_ms;  // the median ms of one measurement
};

}  // namespace

void bench_under_load(Report& report, const LoadBenchOptions& o) {
  SRU_CHECK(!o.configs.empty() || !o.checkpoints.empty(), "srubench under-load: give --config or --checkpoint");
  SRU_CHECK(!o.threads.empty() && o.threads.front() == 1, "srubench under-load: --threads-list must start with 1 "
            "(the reference of vs_1_thread)");
  SRU_CHECK(o.busy_cores >= 0, "srubench under-load: --busy must be >= 0, got ", o.busy_cores);
  std::vector<Workload> workloads;
  for (const std::string& path : o.configs)
    workloads.push_back({std::filesystem::path(path).stem().string() + ":train", [&o, path] {
                           Report r("train-epoch");
                           bench_train_epoch(r, {{path}, o.overrides, o.steps, 5, o.repeats});
                           std::map<std::string, double> f(r.rows().front().fields.begin(),
                                                           r.rows().front().fields.end());
                           return f.at("s_per_epoch") * 1000.0 / f.at("steps_per_epoch");
                         }});
  for (const std::string& path : o.checkpoints)
    workloads.push_back({std::filesystem::path(path).parent_path().filename().string() + ":eval", [&o, path] {
                           Report r("eval");
                           EvalBenchOptions e;
                           e.checkpoints = {path};
                           e.overrides = o.overrides;
                           e.max_batches = o.max_batches;
                           e.timing = {1, o.repeats};
                           bench_eval(r, e);
                           for (const auto& [key, value] : r.rows().front().fields)
                             if (key == "ms") return value;
                           SRU_FAIL("srubench under-load: the eval row has no ms");
                         }});
  const bool was_adaptive = adaptive_threads();
  std::vector<bool> modes{true};
  if (o.compare_fixed) modes.push_back(false);
  for (const Workload& w : workloads) {
    for (const bool adaptive : modes) {
      double loaded_one_thread = 0;
      for (const int threads : o.threads) {
        set_adaptive_threads(adaptive);
        set_num_threads(threads);
        const double alone = w.run_ms();
        double loaded = 0;
        int64_t adaptations = 0;
        double others = 0;
        {
          BusyLoad load(o.busy_cores);
          set_num_threads(threads);
          const int64_t before = thread_adaptations();
          loaded = w.run_ms();
          adaptations = thread_adaptations() - before;
          others = other_processes_cores();
        }
        if (threads == 1) loaded_one_thread = loaded;
        Row row{w.name, "cpu", {}};
        row.set("threads", threads).set("adaptive", adaptive ? 1 : 0).set("busy_cores", o.busy_cores);
        row.set("alone_ms", alone).set("ms", loaded).set("slowdown", loaded / alone);
        row.set("vs_1_thread", loaded / loaded_one_thread);
        row.set("adaptations", static_cast<double>(adaptations)).set("others_cores", others);
        report.add(row);
      }
    }
  }
  set_adaptive_threads(was_adaptive);
}

}  // namespace sru::bench
