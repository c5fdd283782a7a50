// srubench: speed tables. `srubench ceilings` measures this machine's own limits — sgemm GFLOP/s at
// the SRU's GEMM shapes and elementwise / copy GB/s — so later benchmarks can be read against them.
#include <cstring>
#include <iostream>

#include <CLI/CLI.hpp>

#include "apps/common.h"
#include "bench/bench.h"
#include "core/parallel.h"
#include "ops/elementwise.h"
#include "ops/matmul.h"

namespace {

using sru::Tensor;
using sru::bench::Report;
using sru::bench::Row;

struct CeilingOptions {
  std::vector<int64_t> hidden = {256, 512, 1024};
  int64_t length = 128;
  int64_t batch = 32;
  sru::bench::TimingOptions timing;
};

// U = x W for all time steps at once: (L*B, d) @ (d, 3d), the SRU's one big GEMM per layer.
void bench_sgemm(Report& report, const CeilingOptions& o) {
  for (int64_t d : o.hidden) {
    const int64_t M = o.length * o.batch, K = d, N = 3 * d;
    Tensor x = Tensor::uniform({M, K}, -1, 1), w = Tensor::uniform({K, N}, -1, 1);
    const auto t = sru::bench::time_cpu([&] { sru::matmul(x, w); }, o.timing);
    Row row{"sgemm", "cpu", {}};
    row.set("L", o.length).set("B", o.batch).set("d", d).set("M", M).set("N", N).set("K", K);
    row.set("ms", t.median_ms).set("gflops", 2.0 * M * N * K / (t.median_ms * 1e6));
    report.add(row);
  }
}

// Elementwise add of two (L, B, d) f32 tensors (reads 2, writes 1), and a plain memcpy for reference.
void bench_bandwidth(Report& report, const CeilingOptions& o) {
  for (int64_t d : o.hidden) {
    const int64_t n = o.length * o.batch * d;
    Tensor a = Tensor::uniform({n}, -1, 1), b = Tensor::uniform({n}, -1, 1);
    Tensor out = Tensor::empty({n});
    const auto t_add = sru::bench::time_cpu([&] { sru::add(a, b); }, o.timing);
    const auto t_copy = sru::bench::time_cpu([&] { std::memcpy(out.data_ptr(), a.data_ptr(), a.nbytes()); }, o.timing);
    const double bytes = static_cast<double>(n) * sizeof(float);
    for (auto [impl, t, moved] : {std::tuple{"add", t_add, 3 * bytes}, std::tuple{"copy", t_copy, 2 * bytes}}) {
      Row row{impl, "cpu", {}};
      row.set("L", o.length).set("B", o.batch).set("d", d).set("ms", t.median_ms).set("gbps", moved / (t.median_ms * 1e6));
      report.add(row);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{"srubench: speed tables (median of repeats)"};
  cli.set_version_flag("--version", sru::apps::version_line("srubench"));
  cli.require_subcommand(1);
  int threads = 0;
  cli.add_option("--threads", threads, "CPU threads for kernels and BLAS (0 = all cores)")->check(CLI::NonNegativeNumber);

  CeilingOptions ceilings;
  std::string json_path;
  std::string device = "cpu";
  auto* ceil_cmd = cli.add_subcommand("ceilings", "sgemm GFLOP/s and elementwise/copy GB/s at SRU-sized shapes");
  ceil_cmd->add_option("--hidden", ceilings.hidden, "Hidden sizes d")->capture_default_str();
  ceil_cmd->add_option("--length", ceilings.length, "Sequence length L")->capture_default_str()->check(CLI::PositiveNumber);
  ceil_cmd->add_option("--batch", ceilings.batch, "Batch size B")->capture_default_str()->check(CLI::PositiveNumber);
  ceil_cmd->add_option("--repeats", ceilings.timing.repeats, "Timed repeats (the median is reported)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  ceil_cmd->add_option("--warmup", ceilings.timing.warmup, "Untimed warm-up runs")->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  ceil_cmd->add_option("--device", device, "Device to measure (cpu)")->capture_default_str();
  ceil_cmd->add_option("--json", json_path, "Also write the rows as JSON to this file");

  CLI11_PARSE(cli, argc, argv);
  return sru::apps::run_main("srubench", [&] {
    sru::set_num_threads(threads);
    SRU_CHECK(device == "cpu", "srubench ceilings: --device ", device,
              " is not available: this build measures the CPU only (the CUDA backend is not built yet)");
    for (int64_t d : ceilings.hidden) SRU_CHECK(d > 0, "srubench ceilings: --hidden sizes must be positive, got ", d);
    Report report("ceilings");
    bench_sgemm(report, ceilings);
    bench_bandwidth(report, ceilings);
    std::cout << "threads: " << sru::num_threads() << ", repeats: " << ceilings.timing.repeats << "\n"
              << report.table();
    if (!json_path.empty()) report.write_json(json_path);
    return 0;
  });
}
