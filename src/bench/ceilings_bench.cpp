// srubench ceilings (see bench/ceilings_bench.h): sgemm, bandwidth and random-number rows.
#include "bench/ceilings_bench.h"

#include <cstring>
#include <tuple>
#include <utility>

#include "core/error.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/matmul.h"

namespace sru::bench {

namespace {

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

// Philox random numbers where training draws them: a dropout mask and a uniform initialiser of
// (L, B, d) elements, in millions of elements per second.
void bench_random(Report& report, const CeilingOptions& o) {
  for (int64_t d : o.hidden) {
    const int64_t n = o.length * o.batch * d;
    sru::Generator gen(3);
    const auto t_mask = sru::bench::time_cpu([&] { sru::dropout_mask({n}, 0.3, sru::DType::F32, gen); }, o.timing);
    const auto t_uniform = sru::bench::time_cpu([&] { Tensor::uniform({n}, -1, 1, sru::DType::F32, gen); }, o.timing);
    for (auto [impl, t] : {std::pair{"dropout_mask", t_mask}, std::pair{"uniform", t_uniform}}) {
      Row row{impl, "cpu", {}};
      row.set("L", o.length).set("B", o.batch).set("d", d).set("ms", t.median_ms).set("melem_per_s", n / (t.median_ms * 1e3));
      report.add(row);
    }
  }
}

}  // namespace

void bench_ceilings(Report& report, const CeilingOptions& o) {
  for (int64_t d : o.hidden) SRU_CHECK(d > 0, "srubench ceilings: --hidden sizes must be positive, got ", d);
  bench_sgemm(report, o);
  bench_bandwidth(report, o);
  bench_random(report, o);
}

}  // namespace sru::bench
