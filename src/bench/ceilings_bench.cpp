// srubench ceilings (see bench/ceilings_bench.h): sgemm, bf16 GEMM paths, bandwidth and random-number rows.
#include "bench/ceilings_bench.h"

#include <cstring>
#include <tuple>
#include <utility>

#include "core/error.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "ops/cpu/gemm_bf16.h"
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

// The three products of an SRU layer's training step at precision bf16 on each CPU path, beside
// fp32's sgemm: forward U = x W (M = L*B, K = d, N = 3d), weight gradient x^T dU (a transposed,
// K = L*B; row ta 1) and input gradient dU W^T (b transposed; row tb 1). Paths: "sgemm" (fp32), "bf16-rounded" (operands
// rounded into float32 copies, then sgemm: the path without AVX512-BF16) and "bf16-dot" (the AVX512-BF16
// kernels, ops/cpu/gemm_bf16.h; only where the processor has them). GFLOP/s count 2 M N K.
void bench_bf16_gemm(Report& report, const CeilingOptions& o) {
  struct Product {
    bool ta, tb;  // x W, x^T dU, dU W^T
  };
  const Product products[] = {{false, false}, {true, false}, {false, true}};
  const MatmulPrecision saved = matmul_precision();
  for (int64_t d : o.hidden) {
    const int64_t L_B = o.length * o.batch;
    for (const Product& p : products) {
      const int64_t M = p.ta ? d : L_B, K = p.ta ? L_B : d, N = p.tb ? d : 3 * d;
      const Tensor a = p.ta ? Tensor::uniform({K, M}, -1, 1) : Tensor::uniform({M, K}, -1, 1);
      const Tensor b = p.tb ? Tensor::uniform({N, K}, -1, 1) : Tensor::uniform({K, N}, -1, 1);
      struct Path {
        const char* impl;
        MatmulPrecision precision;
        bool kernels_off;
      };
      std::vector<Path> paths = {{"sgemm", MatmulPrecision::Highest, true}, {"bf16-rounded", MatmulPrecision::Medium, true}};
      if (cpu::bf16_dot_kernels_available()) paths.push_back({"bf16-dot", MatmulPrecision::Medium, false});
      for (const Path& path : paths) {
        set_matmul_precision(path.precision);
        const bool previous = cpu::force_bf16_dot_kernels_off(path.kernels_off);
        const auto t = sru::bench::time_cpu([&] { sru::matmul(a, b, p.ta, p.tb); }, o.timing);
        cpu::force_bf16_dot_kernels_off(previous);
        Row row{path.impl, "cpu", {}};
        row.set("L", o.length).set("B", o.batch).set("d", d).set("ta", p.ta).set("tb", p.tb).set("M", M).set("N", N).set("K", K);
        row.set("ms", t.median_ms).set("gflops", 2.0 * M * N * K / (t.median_ms * 1e6));
        report.add(row);
      }
    }
  }
  set_matmul_precision(saved);
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
  bench_bf16_gemm(report, o);
  bench_bandwidth(report, o);
  bench_random(report, o);
}

}  // namespace sru::bench
