// Optimiser updates (formulas in optimizer.h), elementwise over each parameter, split across threads.
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
  kind_ = k == "sgd" ? Kind::Sgd : k == "adam" ? Kind::Adam : k == "adamw" ? Kind::AdamW : k == "adamax" ? Kind::Adamax
                                                                                                         : Kind::RAdam;
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
  const double b1 = o.beta1, b2 = o.beta2, wd = o.weight_decay, eps = o.eps;
  const double bias1 = 1.0 - std::pow(b1, t), bias2 = 1.0 - std::pow(b2, t);
  const bool first = step_count_ == 1;
  const Kind kind = kind_;
  // RAdam's rectification term for this step (shared by all parameters).
  const double rho_inf = 2.0 / (1.0 - b2) - 1.0;
  const double rho_t = rho_inf - 2.0 * t * std::pow(b2, t) / bias2;
  const bool rectify = rho_t > 5.0;
  const double rect = rectify ? std::sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) : 0.0;

  // One loop per optimiser kind, so that each is branch-free and vectorises (same arithmetic in
  // double as the formulas in optimizer.h, whatever the kind).
  for (size_t k = 0; k < params_.size(); ++k) {
    Tensor p = params_[k].second;
    const Tensor g_t = p.grad();
    if (!g_t.defined()) continue;
    SRU_DISPATCH_FLOATING(p.dtype(), "optimizer step", [&]<typename T>() {
      T* __restrict w = p.data<T>();
      const T* __restrict grad = g_t.data<T>();
      T* __restrict s0 = slots_[k][0].data<T>();
      T* __restrict s1 = slots_[k].size() > 1 ? slots_[k][1].data<T>() : nullptr;
      parallel_for(0, p.numel(), kParallelGrain, [&](int64_t lo, int64_t hi) {
        switch (kind) {
          case Kind::Sgd:
            for (int64_t i = lo; i < hi; ++i) {
              double x = w[i];
              double g = grad[i] + wd * x;
              if (o.momentum != 0.0) {
                const double buf = first ? g : o.momentum * s0[i] + g;
                s0[i] = static_cast<T>(buf);
                g = buf;
              }
              w[i] = static_cast<T>(x - lr * g);
            }
            break;
          case Kind::Adamax:
            for (int64_t i = lo; i < hi; ++i) {
              const double x = w[i], g = grad[i] + wd * x;
              const double m = b1 * s0[i] + (1 - b1) * g;
              const double u = std::max(b2 * s1[i], std::abs(g) + eps);
              s0[i] = static_cast<T>(m);
              s1[i] = static_cast<T>(u);
              w[i] = static_cast<T>(x - lr / bias1 * m / u);
            }
            break;
          case Kind::RAdam:
            for (int64_t i = lo; i < hi; ++i) {
              const double x = w[i], g = grad[i] + wd * x;
              const double m = b1 * s0[i] + (1 - b1) * g;
              const double v = b2 * s1[i] + (1 - b2) * g * g;
              s0[i] = static_cast<T>(m);
              s1[i] = static_cast<T>(v);
              const double m_hat = m / bias1;
              w[i] = static_cast<T>(x - (rectify ? lr * m_hat * rect * std::sqrt(bias2) / (std::sqrt(v) + eps) : lr * m_hat));
            }
            break;
          case Kind::Adam:
          case Kind::AdamW: {
            const bool decoupled = kind == Kind::AdamW;
            const double shrink = decoupled ? 1.0 - lr * wd : 1.0, l2 = decoupled ? 0.0 : wd;
            for (int64_t i = lo; i < hi; ++i) {
              const double x = w[i] * shrink, g = grad[i] + l2 * static_cast<double>(w[i]);
              const double m = b1 * s0[i] + (1 - b1) * g;
              const double v = b2 * s1[i] + (1 - b2) * g * g;
              s0[i] = static_cast<T>(m);
              s1[i] = static_cast<T>(v);
              w[i] = static_cast<T>(x - lr * (m / bias1) / (std::sqrt(v / bias2) + eps));
            }
            break;
          }
        }
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
