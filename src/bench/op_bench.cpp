// srubench ops (bench/op_bench.h): each op table entry's bench case, forward alone and forward + backward.
#include "bench/op_bench.h"

#include <algorithm>

#include "autograd/engine.h"
#include "ops/op_table.h"

namespace sru::bench {

namespace {

void add_row(Report& report, const OpEntry& entry, const OpCase& c, DType dtype, const OpBenchOptions& o) {
  const std::vector<Tensor> inputs = make_op_inputs(c, dtype, o.device, 1);
  const std::vector<Tensor> fixed = make_op_fixed(c, inputs);  // made once, not timed
  int64_t elements = 0, bytes = 0;
  for (const Tensor& x : inputs) {
    elements += x.numel();
    bytes += x.numel() * static_cast<int64_t>(dtype_size(x.dtype()));
  }
  const auto forward = [&] { (void)c.run(inputs, fixed); };
  const auto forward_backward = [&] {
    std::vector<Tensor> roots, grads;
    for (const Tensor& y : c.run(inputs, fixed))
      if (y.requires_grad()) {
        roots.push_back(y);
        grads.push_back(Tensor::ones(y.shape(), y.dtype(), y.device()));
      }
    if (!roots.empty()) autograd::backward(roots, grads);
  };
  const Timing f = time_on(o.device, forward, o.timing);
  Row row{entry.name + " " + c.label + (dtype == DType::F32 ? "" : " " + std::string(dtype_name(dtype))),
          o.device.str(), {}};
  row.set("input_elements", static_cast<double>(elements)).set("input_bytes", static_cast<double>(bytes));
  row.set("fwd_ms", f.median_ms);
  if (entry.differentiable) row.set("fwd_bwd_ms", time_on(o.device, forward_backward, o.timing).median_ms);
  report.add(std::move(row));
}

}  // namespace

void bench_ops(Report& report, const OpBenchOptions& o) {
  SRU_CHECK(o.dtype == "f32" || o.dtype == "bf16", "srubench ops --dtype: '", o.dtype, "' is not f32 or bf16");
  const DType dtype = o.dtype == "bf16" ? DType::BF16 : DType::F32;
  for (const OpEntry& entry : op_table()) {
    if (!o.only.empty() && entry.name.find(o.only) == std::string::npos) continue;
    if (std::find(entry.dtypes.begin(), entry.dtypes.end(), dtype) == entry.dtypes.end()) continue;
    if (o.small)
      for (const OpCase& c : entry.cases) add_row(report, entry, c, dtype, o);
    else
      add_row(report, entry, entry.bench, dtype, o);
  }
}

}  // namespace sru::bench
