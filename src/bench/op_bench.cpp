// srubench ops (bench/op_bench.h): each op table entry's bench case, forward alone and forward + backward.
#include "bench/op_bench.h"

#include "autograd/engine.h"
#include "ops/op_table.h"

namespace sru::bench {

namespace {

void add_row(Report& report, const OpEntry& entry, const OpCase& c, const OpBenchOptions& o) {
  const std::vector<Tensor> inputs = make_op_inputs(c, DType::F32, o.device, 1);
  const std::vector<Tensor> fixed = make_op_fixed(c, inputs);  // made once, not timed
  int64_t elements = 0;
  for (const Tensor& x : inputs) elements += x.numel();
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
  Row row{entry.name + " " + c.label, o.device.str(), {}};
  row.set("input_elements", static_cast<double>(elements)).set("fwd_ms", f.median_ms);
  if (entry.differentiable) row.set("fwd_bwd_ms", time_on(o.device, forward_backward, o.timing).median_ms);
  report.add(std::move(row));
}

}  // namespace

void bench_ops(Report& report, const OpBenchOptions& o) {
  for (const OpEntry& entry : op_table()) {
    if (!o.only.empty() && entry.name.find(o.only) == std::string::npos) continue;
    if (o.small)
      for (const OpCase& c : entry.cases) add_row(report, entry, c, o);
    else
      add_row(report, entry, entry.bench, o);
  }
}

}  // namespace sru::bench
