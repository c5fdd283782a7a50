// Central-difference gradient checks in float64.
#include "autograd/gradcheck.h"

#include <cmath>
#include <sstream>

#include "autograd/engine.h"
#include "autograd/node.h"

namespace sru::autograd {

namespace {

double weighted_sum(const std::vector<Tensor>& outputs, const std::vector<Tensor>& cotangents) {
  double total = 0.0;
  for (size_t k = 0; k < outputs.size(); ++k) {
    if (!cotangents[k].defined()) continue;
    SRU_CHECK(outputs[k].dtype() == DType::F64, "gradcheck: output ", k, " is ", dtype_name(outputs[k].dtype()),
              ", expected f64");
    const double* o = outputs[k].data<double>();
    const double* v = cotangents[k].data<double>();
    for (int64_t i = 0; i < outputs[k].numel(); ++i) total += o[i] * v[i];
  }
  return total;
}

}  // namespace

GradcheckResult gradcheck(const MultiFn& f, const std::vector<Tensor>& inputs, const GradcheckOptions& options) {
  for (const Tensor& x : inputs)
    if (x.defined() && x.requires_grad())
      SRU_CHECK(x.dtype() == DType::F64 && x.is_leaf(), "gradcheck: inputs that require grad must be f64 leaves");

  // Analytic gradients.
  for (const Tensor& x : inputs)
    if (x.defined() && x.requires_grad()) x.impl()->grad.reset();
  std::vector<Tensor> outputs = f(inputs);
  Generator gen(options.seed);
  std::vector<Tensor> cotangents, roots, seeds;
  for (const Tensor& out : outputs) {
    // Outputs that do not depend on any input (or are integer) take no part in the check.
    if (!out.defined() || !out.requires_grad() || !is_floating(out.dtype())) {
      cotangents.emplace_back();
      continue;
    }
    cotangents.push_back(Tensor::uniform(out.shape(), -1.0, 1.0, DType::F64, gen));
    roots.push_back(out);
    seeds.push_back(cotangents.back());
  }
  SRU_CHECK(!roots.empty(), "gradcheck: no output requires grad");
  backward(roots, seeds);

  GradcheckResult result;
  std::ostringstream report;
  int reported = 0;
  NoGradGuard no_grad;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& x = inputs[k];
    if (!x.defined() || !x.requires_grad()) continue;
    Tensor analytic = x.grad();
    double* xd = x.data<double>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double saved = xd[i];
      xd[i] = saved + options.eps;
      const double plus = weighted_sum(f(inputs), cotangents);
      xd[i] = saved - options.eps;
      const double minus = weighted_sum(f(inputs), cotangents);
      xd[i] = saved;
      const double numeric = (plus - minus) / (2 * options.eps);
      const double a = analytic.defined() ? analytic.data<double>()[i] : 0.0;
      const double err = std::abs(a - numeric);
      result.max_abs_error = std::max(result.max_abs_error, err);
      if (!(err <= options.atol + options.rtol * std::abs(numeric))) {
        result.ok = false;
        if (reported++ < 5)
          report << "input " << k << " element " << i << ": analytic " << a << " vs numeric " << numeric << "\n";
      }
    }
  }
  result.message = report.str();
  return result;
}

GradcheckResult gradcheck(const SingleFn& f, const std::vector<Tensor>& inputs, const GradcheckOptions& options) {
  return gradcheck(MultiFn([&](const std::vector<Tensor>& xs) { return std::vector<Tensor>{f(xs)}; }), inputs,
                   options);
}

}  // namespace sru::autograd
