// How long the GPU was busy while a piece of host code ran: the union of the intervals in which a
// kernel, a copy or a memset executed, from CUPTI's activity records (libcupti loaded at run time, so
// no build and no run needs it), against the wall time between the two CUPTI timestamps around the
// code. srubench train-epoch --idle-share reports 1 - busy / wall per step: the share of a training
// step in which the GPU waited for the host (issue 38 item 4), where Nsight Compute's per-kernel
// durations (scripts/ncu_kernel_table.py) serialise the kernels and so can only estimate it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace sru::cuda {

struct DeviceBusy {
  double busy_ms = 0;   // the union of the device activity intervals within the window
  double wall_ms = 0;   // the window: CUPTI's clock before `work` and after it (work ends synchronised)
  int64_t records = 0;  // activity records seen (kernels, copies, memsets)
  double idle_share() const { return wall_ms > 0 ? 1.0 - busy_ms / wall_ms : 0.0; }
};

// Runs `work` (which must leave the device synchronised) with CUPTI's kernel, copy and memset activity
// recording on, and returns the busy time; nullopt, with the reason in *why_not, where CUPTI cannot be
// loaded or enabled (no libcupti, a build without CUDA). One measurement at a time.
std::optional<DeviceBusy> measure_device_busy(const std::function<void()>& work, std::string* why_not);
// Loads CUPTI and hooks it into the driver ahead of the measurement, before any CUDA graph of the run is
// made (graphs instantiated earlier may go unrecorded); "" or why it cannot be.
std::string prepare_device_busy();

// The length of the union of the [start, end) intervals, clipped to [from, to): the time in which at
// least one of them ran (kernels of several streams overlap; a copy may overlap a kernel).
inline uint64_t union_length(std::vector<std::pair<uint64_t, uint64_t>> intervals, uint64_t from, uint64_t to) {
  std::sort(intervals.begin(), intervals.end());
  uint64_t total = 0, covered_to = from;
  for (auto [start, end] : intervals) {
    start = std::max(start, covered_to);
    end = std::min(end, to);
    if (end <= start) continue;
    total += end - start;
    covered_to = end;
  }
  return total;
}

}  // namespace sru::cuda
