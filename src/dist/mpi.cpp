// The MPI communicator (builds with MPI; see dist/communicator.h). Every collective is MPI's
// non-blocking form, completed by one wait loop that polls it against a deadline, so no call can block
// forever:
//   - Arrivals: before each collective every rank but 0 sends rank 0 the collective's number (a small
//     non-blocking message); rank 0 keeps a receive posted for each rank and reads them while it waits.
//   - Heartbeats: a rank waiting in a collective resends its number every kHeartbeatSeconds, so rank 0
//     can tell a rank that arrived and waits from one that arrived and then stopped (SIGSTOP, a hung
//     node) inside the collective.
//   - When a wait passes the timeout on rank 0, it names the ranks that have not reached the collective
//     (stuck, stopped or lost), or else those that reached it but have gone silent, prints that and
//     ends the job (MPI_Abort). Other ranks wait half as long
//     again plus 5 s, so that rank 0's message comes first; if they time out, rank 0 is the one that
//     stopped, and they say so.
//   - A rank that dies outright is usually noticed first by the launcher: Open MPI's mpirun ends the job
//     within about a second, naming the rank and its signal (docs/architecture.md, "Data parallel").
// MPI calls return errors (MPI_ERRORS_RETURN) so that a failure is reported with the collective's name.
// CUDA buffers are summed by NCCL (dist/nccl.cu) when built, else through host memory.
// The C API only: without these, Open MPI's and MPICH's mpi.h pull in their deprecated C++ bindings,
// which need a library we do not link.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <deque>
#include <thread>

#include "core/cuda/runtime.h"
#include "dist/backends.h"

namespace sru::dist {

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kArrivalTag = 7301;
constexpr double kHeartbeatSeconds = 0.5;
// Rank 0 calls a rank silent after this long without a message (several missed heartbeats).
constexpr double kSilentSeconds = 4 * kHeartbeatSeconds;
// MPI counts are int: larger buffers go in pieces of this many elements.
constexpr int64_t kMaxCount = int64_t{1} << 30;

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(text, static_cast<size_t>(length));
}

MPI_Datatype mpi_type(DType dtype) {
  if (dtype == DType::F32) return MPI_FLOAT;
  if (dtype == DType::F64) return MPI_DOUBLE;
  SRU_FAIL("dist: sums of ", dtype_name(dtype), " tensors are not supported (f32 or f64)");
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() {
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    MPI_Comm node;
    MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local_rank_);
    MPI_Comm_size(node, &local_size_);
    MPI_Comm_free(&node);
    char name[MPI_MAX_PROCESSOR_NAME];
    int length = 0;
    MPI_Get_processor_name(name, &length);
    host_.assign(name, static_cast<size_t>(length));
    if (rank_ == 0) {
      last_seen_.assign(size_, 0);
      last_heard_.assign(size_, Clock::now());
      arrival_values_.assign(size_, 0);
      arrival_requests_.assign(size_, MPI_REQUEST_NULL);
      for (int r = 1; r < size_; ++r) post_arrival_receive(r);
    }
  }

  ~MpiCommunicator() override { finish(); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  std::string backend() const override { return device_ ? "mpi+nccl" : "mpi"; }
  std::string host() const override { return host_; }
  void set_timeout(double seconds) override { timeout_ = seconds; }

  void use_device(Device device) override {
    if (!device.is_cuda() || size_ == 1 || device_) return;
#if defined(SRU_WITH_NCCL)
    std::string id = rank_ == 0 ? detail::nccl_unique_id() : std::string();
    broadcast(id, 0, "the NCCL unique id");
    device_ = detail::make_nccl_reducer(device.index, rank_, size_, id);
#endif
  }

  void start_all_reduce_sum(const Tensor& buffer, const std::string& what) override {
    const MPI_Datatype type = mpi_type(buffer.dtype());
    if (buffer.device().is_cuda()) {
      arrive(what);
      if (device_) {
        device_->start(buffer);
        return;
      }
      // No NCCL: through host memory, at once (the copies wait for the device).
      const Tensor host = buffer.to(Device::cpu());
      reduce_in_pieces(host, type, what);
      wait_pending();
      Tensor(buffer).copy_(host.to(buffer.device()));  // a handle to the same storage
      return;
    }
    arrive(what);
    reduce_in_pieces(buffer, type, what);
  }

  void wait_all() override {
    wait_pending();
    if (device_) device_->wait_all();
  }

  void await_device(Device device) override {
    if (!device_ || !device.is_cuda()) return;
    const auto start = Clock::now();
    std::string error;
    if (device_->await([&] { return keep_waiting(start); }, error)) return;
    if (!error.empty()) fail("NCCL reported an error while the device worked through '" + current_ + "': " + error);
    timed_out(start);
  }

  void all_reduce_sum(std::vector<double>& values, const std::string& what) override {
    arrive(what);
    MPI_Request request;
    check(MPI_Iallreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_DOUBLE, MPI_SUM, comm_,
                         &request),
          what);
    wait(request);
  }

  std::vector<std::string> all_gather(const std::string& bytes, const std::string& what) override {
    arrive(what + " (sizes)");
    const int64_t mine = static_cast<int64_t>(bytes.size());
    std::vector<int64_t> sizes(size_);
    MPI_Request request;
    check(MPI_Iallgather(&mine, 1, MPI_INT64_T, sizes.data(), 1, MPI_INT64_T, comm_, &request), what);
    wait(request);
    std::vector<int> counts(size_), displacements(size_);
    int64_t total = 0;
    for (int r = 0; r < size_; ++r) {
      counts[r] = static_cast<int>(sizes[r]);
      displacements[r] = static_cast<int>(total);
      total += sizes[r];
    }
    SRU_CHECK(total <= INT_MAX, "dist: gathering ", what, ": ", total, " bytes in all is more than one MPI call takes");
    std::string all(static_cast<size_t>(total), '\0');
    arrive(what);
    check(MPI_Iallgatherv(bytes.data(), static_cast<int>(mine), MPI_CHAR, all.data(), counts.data(),
                          displacements.data(), MPI_CHAR, comm_, &request),
          what);
    wait(request);
    std::vector<std::string> out;
    for (int r = 0; r < size_; ++r) out.push_back(all.substr(displacements[r], counts[r]));
    return out;
  }

  void broadcast(std::string& bytes, int root, const std::string& what) override {
    arrive(what + " (size)");
    int64_t n = static_cast<int64_t>(bytes.size());
    MPI_Request request;
    check(MPI_Ibcast(&n, 1, MPI_INT64_T, root, comm_, &request), what);
    wait(request);
    bytes.resize(static_cast<size_t>(n));
    for (int64_t at = 0; at < n; at += kMaxCount) {
      arrive(what);
      check(MPI_Ibcast(bytes.data() + at, static_cast<int>(std::min(kMaxCount, n - at)), MPI_CHAR, root, comm_, &request),
            what);
      wait(request);
    }
  }

  [[noreturn]] void abort(int code) override {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

 private:
  // Every collective starts here: its number, its name for messages, and rank 0's arrival message.
  void arrive(const std::string& what) {
    ++collective_;
    current_ = what;
    if (rank_ != 0) send_arrival(collective_, what);
  }

  // Tells rank 0 that this rank has reached collective `number` (again, for a heartbeat).
  void send_arrival(int64_t number, const std::string& what) {
    last_sent_ = Clock::now();
    auto value = std::make_unique<int64_t>(number);
    MPI_Request request;
    check(MPI_Isend(value.get(), 1, MPI_INT64_T, 0, kArrivalTag, comm_, &request), "the arrival message of " + what);
    sends_.emplace_back(request, std::move(value));
    while (!sends_.empty()) {  // drop the ones delivered
      int done = 0;
      check(MPI_Test(&sends_.front().first, &done, MPI_STATUS_IGNORE), "an arrival message");
      if (!done) break;
      sends_.pop_front();
    }
  }

  void post_arrival_receive(int r) {
    check(MPI_Irecv(&arrival_values_[r], 1, MPI_INT64_T, r, kArrivalTag, comm_, &arrival_requests_[r]),
          "the arrival messages");
  }

  // Rank 0: records every arrival message received so far.
  void read_arrivals() {
    for (int r = 1; r < size_; ++r) {
      for (;;) {
        int done = 0;
        check(MPI_Test(&arrival_requests_[r], &done, MPI_STATUS_IGNORE), "the arrival messages");
        if (!done) break;
        last_seen_[r] = arrival_values_[r];
        last_heard_[r] = Clock::now();
        post_arrival_receive(r);
      }
    }
  }

  void reduce_in_pieces(const Tensor& buffer, MPI_Datatype type, const std::string& what) {
    char* data = static_cast<char*>(buffer.data_ptr());
    const int64_t n = buffer.numel(), element = static_cast<int64_t>(dtype_size(buffer.dtype()));
    for (int64_t at = 0; at < n; at += kMaxCount) {
      MPI_Request request;
      check(MPI_Iallreduce(MPI_IN_PLACE, data + at * element, static_cast<int>(std::min(kMaxCount, n - at)), type,
                           MPI_SUM, comm_, &request),
            what);
      pending_.push_back({request, collective_, what});
    }
  }

  void wait_pending() {
    for (Pending& p : pending_) {
      collective_in_wait_ = p.collective;
      current_ = p.what;
      wait(p.request);
    }
    pending_.clear();
    collective_in_wait_ = 0;
  }

  // Polls `request` until it completes or the deadline passes (then the job ends here).
  void wait(MPI_Request& request) {
    const auto start = Clock::now();
    for (;;) {
      int done = 0;
      check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), current_);
      if (done) return;
      if (!keep_waiting(start)) timed_out(start);
    }
  }

  // One poll's worth of waiting: reads arrivals (rank 0), yields the processor, backs off after a while.
  bool keep_waiting(Clock::time_point start) {
    const auto now = Clock::now();
    if (rank_ == 0) {
      read_arrivals();
    } else if (std::chrono::duration<double>(now - last_sent_).count() >= kHeartbeatSeconds) {
      send_arrival(collective_in_wait_ ? collective_in_wait_ : collective_, current_);
    }
    const double waited = std::chrono::duration<double>(now - start).count();
    if (waited > limit()) return false;
    // Spin only briefly: a rank that waits for a slower one must not take the processor from it (ranks
    // often share cores). A sum of a step's gradients is milliseconds, so 50 us of sleep costs little.
    if (waited < 2e-4) {
      std::this_thread::yield();
    } else if (waited < 2.0) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
  }

  double limit() const { return rank_ == 0 ? timeout_ : timeout_ * 1.5 + 5.0; }

  [[noreturn]] void timed_out(Clock::time_point start) {
    const double waited = std::chrono::duration<double>(Clock::now() - start).count();
    const int64_t number = collective_in_wait_ ? collective_in_wait_ : collective_;
    std::string message = "'" + current_ + "' (collective #" + std::to_string(number) + ") has waited " +
                          std::to_string(static_cast<int>(waited)) + " s (train.dist_timeout_s is " +
                          std::to_string(static_cast<int>(timeout_)) + ")";
    if (rank_ == 0) {
      read_arrivals();
      std::string missing, silent;
      for (int r = 1; r < size_; ++r) {
        const double quiet = std::chrono::duration<double>(Clock::now() - last_heard_[r]).count();
        if (last_seen_[r] < number)
          missing += (missing.empty() ? "" : ", ") + std::to_string(r) + " (last at #" + std::to_string(last_seen_[r]) + ")";
        else if (quiet > kSilentSeconds)
          silent += (silent.empty() ? "" : ", ") + std::to_string(r) + " (silent for " +
                    std::to_string(static_cast<int>(quiet)) + " s)";
      }
      if (!missing.empty())
        message += " for rank(s) " + missing + ", which have not reached it: stuck, stopped or lost";
      else if (!silent.empty())
        message += ": rank(s) " + silent + " reached it and then stopped responding: stopped or lost";
      else
        message += ": every rank reached it and is waiting, but it did not complete (a lost connection?)";
    } else {
      message += " and rank 0, which names the ranks that stop responding, has not ended the job: rank 0 is stuck, "
                 "stopped or lost";
    }
    fail(message + "; ending every rank");
  }

  void check(int code, const std::string& what) {
    if (code != MPI_SUCCESS) fail("MPI error in '" + what + "': " + mpi_error_string(code));
  }

  [[noreturn]] void fail(const std::string& message) {
    std::fprintf(stderr, "rank %d: error: %s\n", rank_, message.c_str());
    abort(1);
  }

  // At the end of a job that finished together: every arrival message is received, every send done.
  void finish() {
    const auto start = Clock::now();
    const double patience = std::min(timeout_, 30.0);
    if (rank_ == 0) {
      for (bool all = false; !all && std::chrono::duration<double>(Clock::now() - start).count() < patience;) {
        read_arrivals();
        all = true;
        for (int r = 1; r < size_; ++r) all = all && last_seen_[r] >= collective_;
      }
      for (int r = 1; r < size_; ++r) {
        MPI_Cancel(&arrival_requests_[r]);
        MPI_Wait(&arrival_requests_[r], MPI_STATUS_IGNORE);
      }
    } else {
      while (!sends_.empty() && std::chrono::duration<double>(Clock::now() - start).count() < patience) {
        int done = 0;
        MPI_Test(&sends_.front().first, &done, MPI_STATUS_IGNORE);
        if (done) sends_.pop_front();
      }
    }
    device_.reset();
    MPI_Comm_free(&comm_);
  }

  struct Pending {
    MPI_Request request;
    int64_t collective;
    std::string what;
  };

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  std::string host_;
  double timeout_ = 600.0;
  int64_t collective_ = 0, collective_in_wait_ = 0;
  std::string current_;
  std::vector<Pending> pending_;
  std::deque<std::pair<MPI_Request, std::unique_ptr<int64_t>>> sends_;
  std::vector<int64_t> last_seen_, arrival_values_;
  std::vector<Clock::time_point> last_heard_;  // rank 0: when each rank's last message came
  Clock::time_point last_sent_ = Clock::now();  // the others: when this rank last told rank 0
  std::vector<MPI_Request> arrival_requests_;
  std::unique_ptr<detail::DeviceReducer> device_;
};

}  // namespace

namespace detail {

std::unique_ptr<Communicator> start_mpi() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  }
  return std::make_unique<MpiCommunicator>();
}

void finish_mpi() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(text, &length);
  std::string version(text, static_cast<size_t>(length));
  const size_t comma = version.find(',');
  return comma == std::string::npos ? version : version.substr(0, comma);
}

}  // namespace detail

}  // namespace sru::dist
