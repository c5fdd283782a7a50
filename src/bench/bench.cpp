// Timing, tables and JSON output for the benchmarks.
#include "bench/bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <iomanip>
#include <sstream>

#include <nlohmann/json.hpp>

#include "autograd/node.h"
#include "core/cuda/runtime.h"
#include "core/error.h"
#include "ops/matmul.h"

namespace sru::bench {

namespace {

double process_cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

}  // namespace

Timing time_cpu(const std::function<void()>& fn, const TimingOptions& options) {
  return time_on(Device::cpu(), fn, options);
}

Timing time_on(Device device, const std::function<void()>& fn, const TimingOptions& options) {
  SRU_CHECK(options.repeats >= 1, "benchmark repeats must be >= 1, got ", options.repeats);
  for (int i = 0; i < options.warmup; ++i) fn();
  if (device.is_cuda()) cuda::synchronize(device.index);
  std::vector<double> ms;
  for (int i = 0; i < options.repeats; ++i) {
    if (device.is_cuda()) {
      ms.push_back(cuda::time_on_stream_ms(device.index, fn));
      continue;
    }
    if (options.cpu_time) {
      const double start = process_cpu_ms();
      fn();
      ms.push_back(process_cpu_ms() - start);
      continue;
    }
    const auto start = std::chrono::steady_clock::now();
    fn();
    const auto stop = std::chrono::steady_clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>(stop - start).count());
  }
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  const double median = n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
  return {median, ms.front(), ms.back()};
}

void warm_up_cpu(double seconds) {
  autograd::NoGradGuard no_grad;
  Tensor a = Tensor::uniform({1024, 512}, -1, 1), b = Tensor::uniform({512, 1024}, -1, 1);
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < seconds) matmul(a, b);
}

Row& Row::set(const std::string& key, double value) {
  for (auto& f : fields)
    if (f.first == key) {
      f.second = value;
      return *this;
    }
  fields.emplace_back(key, value);
  return *this;
}

namespace {
std::string format_value(double v) {
  std::ostringstream os;
  if (std::floor(v) == v && std::abs(v) < 1e12) os << static_cast<long long>(v);
  else os << std::fixed << std::setprecision(std::abs(v) >= 100 ? 1 : 3) << v;
  return os.str();
}
}  // namespace

std::string Report::table() const {
  std::vector<std::string> columns = {"impl", "device"};
  for (const Row& r : rows_)
    for (const auto& f : r.fields)
      if (std::find(columns.begin(), columns.end(), f.first) == columns.end()) columns.push_back(f.first);
  std::vector<std::vector<std::string>> cells;
  for (const Row& r : rows_) {
    std::vector<std::string> line = {r.impl, r.device};
    for (size_t c = 2; c < columns.size(); ++c) {
      std::string cell = "-";
      for (const auto& f : r.fields)
        if (f.first == columns[c]) cell = format_value(f.second);
      line.push_back(cell);
    }
    cells.push_back(line);
  }
  std::vector<size_t> width(columns.size());
  for (size_t c = 0; c < columns.size(); ++c) {
    width[c] = columns[c].size();
    for (const auto& line : cells) width[c] = std::max(width[c], line[c].size());
  }
  std::ostringstream os;
  os << "# " << bench_ << "\n";
  auto emit = [&](const std::vector<std::string>& line) {
    for (size_t c = 0; c < line.size(); ++c)
      os << (c ? "  " : "") << (c < 2 ? std::left : std::right) << std::setw(static_cast<int>(width[c])) << line[c];
    os << "\n";
  };
  emit(columns);
  for (const auto& line : cells) emit(line);
  return os.str();
}

void Report::write_json(const std::string& path) const {
  nlohmann::ordered_json doc;
  doc["bench"] = bench_;
  // The process's float32 GEMM precision on a GPU as the rows end (train-epoch: the configs' own setting).
  doc["precision"] = precision_name(matmul_precision());
  doc["rows"] = nlohmann::ordered_json::array();
  for (const Row& r : rows_) {
    nlohmann::ordered_json row;
    row["impl"] = r.impl;
    row["device"] = r.device;
    for (const auto& f : r.fields) {
      // Sizes and counts stay integers in the file; measurements keep their fraction.
      if (std::floor(f.second) == f.second && std::abs(f.second) < 9.0e15) row[f.first] = static_cast<int64_t>(f.second);
      else row[f.first] = f.second;
    }
    doc["rows"].push_back(row);
  }
  std::ofstream out(path);
  SRU_CHECK(out.good(), "cannot write benchmark results to '", path, "'");
  out << doc.dump(2) << "\n";
  SRU_CHECK(out.good(), "error while writing benchmark results to '", path, "'");
}

}  // namespace sru::bench
