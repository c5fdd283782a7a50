// Optimiser updates (formulas in optimizer.h; per-element code in optimizer_math.h), elementwise over
// each parameter: split across threads on the CPU, one CUDA kernel per parameter on a GPU.
#include "optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/parallel.h"

namespace sru::optim {

namespace {

std::vector<std::string> slots_for(const std::string& kind) {
  if (kind == "sgd") return {"momentum_buffer"};
  if (kind == "adamax") return {"exp_avg", "exp_inf"};
  if (kind == "adam" || kind == "adamw" || kind == "radam") return {"exp_avg", "exp_avg_sq"};
  SRU_FAIL("unknown optimizer '", kind, "': expected sgd, adam, adamw, adamax or radam");
}

}  // namespace

Optimizer::Optimizer(nn::NamedTensors params, OptimizerOptions options)
    : params_(std::move(params)), options_(std::move(options)), slot_names_(slots_for(options_.kind)) {
  const std::string& k = options_.kind;
  kind_ = k == "sgd"      ? OptimizerKind::Sgd
          : k == "adam"   ? OptimizerKind::Adam
          : k == "adamw"  ? OptimizerKind::AdamW
          : k == "adamax" ? OptimizerKind::Adamax
                          : OptimizerKind::RAdam;
  for (auto& [name, p] : params_) {
    check_floating(p, "optimizer");
    std::vector<Tensor> slots;
    for (size_t i = 0; i < slot_names_.size(); ++i) slots.push_back(Tensor::zeros(p.shape(), p.dtype(), p.device()));
    slots_.push_back(slots);
  }
}

void Optimizer::zero_grad() {
  for (auto& [name, p] : params_) p.set_grad(Tensor());
}

void Optimizer::step(double lr) {
  ++step_count_;
  const double t = static_cast<double>(step_count_);
  const OptimizerOptions& o = options_;
  StepScalars sc{};
  sc.lr = lr;
  sc.momentum = o.momentum;
  sc.b1 = o.beta1;
  sc.b2 = o.beta2;
  sc.wd = o.weight_decay;
  sc.eps = o.eps;
  sc.bias1 = 1.0 - std::pow(o.beta1, t);
  sc.bias2 = 1.0 - std::pow(o.beta2, t);
  sc.first = step_count_ == 1;
  // RAdam's rectification term for this step (shared by all parameters).
  const double rho_inf = 2.0 / (1.0 - o.beta2) - 1.0;
  const double rho_t = rho_inf - 2.0 * t * std::pow(o.beta2, t) / sc.bias2;
  sc.rectify = rho_t > 5.0;
  sc.rect = sc.rectify ? std::sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) : 0.0;

  for (size_t k = 0; k < params_.size(); ++k) {
    const Tensor& p = params_[k].second;
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    const Tensor& s0 = slots_[k][0];
    const Tensor& s1 = slots_[k].size() > 1 ? slots_[k][1] : slots_[k][0];  // SGD: one slot, s1 unused
#if defined(SRU_WITH_CUDA)
    if (p.device().is_cuda()) {
      cuda::optimizer_update(kind_, p, g, s0, s1, sc);
      continue;
    }
#endif
    // One loop per kind (a template parameter), so that each is branch-free and vectorises.
    SRU_DISPATCH_FLOATING(p.dtype(), "optimizer step", [&]<typename T>() {
      T* __restrict w = p.data<T>();
      const T* __restrict grad = g.data<T>();
      T* __restrict m0 = s0.data<T>();
      T* __restrict m1 = s1.data<T>();
      const StepScalars scalars = sc;
      with_optimizer_kind(kind_, [&]<OptimizerKind K>() {
        parallel_for(0, p.numel(), kParallelGrain, [&](int64_t lo, int64_t hi) {
          for (int64_t i = lo; i < hi; ++i) update_element<K, T>(w[i], grad[i], m0[i], m1[i], scalars);
        });
      });
    });
  }
}

nn::NamedTensors Optimizer::state() const {
  nn::NamedTensors out;
  for (size_t k = 0; k < params_.size(); ++k)
    for (size_t s = 0; s < slot_names_.size(); ++s)
      out.emplace_back("optim." + params_[k].first + "." + slot_names_[s], slots_[k][s]);
  out.emplace_back("optim.step", Tensor::full({1}, static_cast<double>(step_count_), DType::I64));
  return out;
}

void Optimizer::load_state(const std::vector<std::pair<std::string, Tensor>>& tensors) {
  auto find = [&](const std::string& name) -> const Tensor* {
    for (const auto& [n, t] : tensors)
      if (n == name) return &t;
    return nullptr;
  };
  const Tensor* step = find("optim.step");
  SRU_CHECK(step && step->numel() == 1, "checkpoint has no optimizer state 'optim.step' (saved with a different "
            "optimizer, or not a training checkpoint)");
  for (size_t k = 0; k < params_.size(); ++k)
    for (size_t s = 0; s < slot_names_.size(); ++s) {
      const std::string name = "optim." + params_[k].first + "." + slot_names_[s];
      const Tensor* t = find(name);
      SRU_CHECK(t, "checkpoint lacks optimizer state '", name, "' (was it saved with optimizer ", options_.kind, "?)");
      SRU_CHECK(t->shape() == slots_[k][s].shape() && t->dtype() == slots_[k][s].dtype(), "optimizer state '", name,
                "' has shape ", shape_str(t->shape()), ", expected ", shape_str(slots_[k][s].shape()));
    }
  for (size_t k = 0; k < params_.size(); ++k)
    for (size_t s = 0; s < slot_names_.size(); ++s)
      slots_[k][s].copy_(*find("optim." + params_[k].first + "." + slot_names_[s]));
  step_count_ = step->item<int64_t>();
}

double clip_grad_norm(const nn::NamedTensors& params, double max_norm) {
  // Sums of squares over fixed blocks, added in block order: the same result for any thread count.
  constexpr int64_t kBlock = 1 << 16;
  double total = 0.0;
  for (const auto& [name, p] : params) {
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    const int64_t n = g.numel(), blocks = (n + kBlock - 1) / kBlock;
#if defined(SRU_WITH_CUDA)
    if (g.device().is_cuda()) {
      for (double v : cuda::block_sums_of_squares(g, kBlock)) total += v;
      continue;
    }
#endif
    std::vector<double> partial(static_cast<size_t>(blocks), 0.0);
    SRU_DISPATCH_FLOATING(g.dtype(), "clip_grad_norm", [&]<typename T>() {
      const T* d = g.data<T>();
      parallel_for(0, blocks, 2, [&](int64_t lo, int64_t hi) {
        for (int64_t blk = lo; blk < hi; ++blk) {
          double s = 0.0;
          for (int64_t i = blk * kBlock, e = std::min(n, i + kBlock); i < e; ++i) s += static_cast<double>(d[i]) * d[i];
          partial[blk] = s;
        }
      });
    });
    for (double s : partial) total += s;
  }
  const double norm = std::sqrt(total);
  if (max_norm > 0 && std::isfinite(norm) && norm > max_norm) {
    const double factor = max_norm / (norm + 1e-6);
    for (const auto& [name, p] : params) {
      Tensor g = p.grad();
      if (g.defined()) g.mul_(factor);
    }
  }
  return norm;
}

}  // namespace sru::optim
