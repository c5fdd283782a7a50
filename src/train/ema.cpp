// The moving average of the weights (see ema.h).
#include "train/ema.h"

#include <algorithm>

#include "core/error.h"

namespace sru::train {

namespace {

// The file's "raw.{name}" tensor for parameter (name, p), checked against p; null when absent.
const Tensor* raw_tensor(const safetensors::File& file, const std::string& path, const std::string& name,
                         const Tensor& p) {
  const Tensor* raw = file.find(kRawPrefix + name);
  if (raw)
    SRU_CHECK(raw->shape() == p.shape() && raw->dtype() == p.dtype(), "'", path, "': tensor '", kRawPrefix, name,
              "' does not match parameter '", name, "' (shape or dtype)");
  return raw;
}

}  // namespace

WeightEma::WeightEma(const nn::NamedTensors& params, double decay, int64_t start_step, bool warmup)
    : params_(params), decay_(decay), start_step_(start_step), warmup_(warmup) {
  SRU_CHECK(decay > 0 && decay < 1, "train.ema_decay must be in (0, 1) when on, got ", decay);
  for (const auto& [name, param] : params_) {
    const Tensor& p = param;  // a plain reference: clang 14 cannot capture structured bindings
    average_.emplace_back(name, p.detach().clone());
    // One buffer per dtype, as large as the largest parameter: the exchange then allocates nothing.
    auto it = std::find_if(scratch_.begin(), scratch_.end(), [&](const Tensor& s) { return s.dtype() == p.dtype(); });
    if (it == scratch_.end()) {
      scratch_.push_back(Tensor::zeros({p.numel()}, p.dtype(), p.device()));
    } else if (it->numel() < p.numel()) {
      *it = Tensor::zeros({p.numel()}, p.dtype(), p.device());
    }
  }
}

double WeightEma::decay_at(int64_t step) const {
  const double t = static_cast<double>(step - start_step_);
  return warmup_ ? std::min(decay_, (1.0 + t) / (10.0 + t)) : decay_;
}

void WeightEma::update(int64_t step) {
  SRU_CHECK(broken_.empty(), "the raw weights could not be put back after an evaluation (", broken_,
            "): stopping; the last checkpoint holds them");
  SRU_CHECK(!in_model_, "internal: the weight average was updated while the model held it");
  const double d = decay_at(step);
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& a = average_[i].second;
    const Tensor& w = params_[i].second;
    if (step <= start_step_) {
      a.copy_(w);
    } else {
      a.mul_(d).add_(w, 1.0 - d);
    }
  }
}

void WeightEma::exchange() {
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i].second;
    Tensor& a = average_[i].second;
    const auto it = std::find_if(scratch_.begin(), scratch_.end(), [&](const Tensor& s) { return s.dtype() == p.dtype(); });
    Tensor held = it->narrow0(0, p.numel());
    held.copy_(p);
    p.copy_(a);
    a.copy_(held);
  }
  in_model_ = !in_model_;
}

WeightEma::InModel::InModel(WeightEma* ema) : ema_(ema && !ema->in_model_ ? ema : nullptr) {
  if (ema_) ema_->exchange();
}

WeightEma::InModel::~InModel() {
  if (!ema_) return;
  try {
    ema_->exchange();  // copies only, into buffers made up front; a device fault can still fail it
  } catch (const std::exception& e) {
    ema_->broken_ = e.what();  // the next update stops the run with it (a destructor must not throw)
  }
}

nn::NamedTensors WeightEma::raw_weights() const {
  SRU_CHECK(in_model_, "internal: raw_weights() outside WeightEma::InModel");
  nn::NamedTensors out;
  for (const auto& [name, a] : average_) out.emplace_back(kRawPrefix + name, a);
  return out;
}

std::string WeightEma::load(const safetensors::File& file, const std::string& path) {
  SRU_CHECK(!in_model_, "internal: WeightEma::load inside InModel");
  size_t found = 0;
  for (size_t i = 0; i < params_.size(); ++i)
    if (raw_tensor(file, path, params_[i].first, params_[i].second)) ++found;
  SRU_CHECK(found == 0 || found == params_.size(), "'", path, "' holds raw weights for ", found, " of the ",
            params_.size(), " trainable parameters: it is damaged or from another model");
  for (size_t i = 0; i < params_.size(); ++i) {
    auto& [name, p] = params_[i];
    average_[i].second.copy_(p);  // the loaded model tensors: the average, or the weights of a run without it
    if (found) p.copy_(raw_tensor(file, path, name, p)->to(p.device()));
  }
  return found ? "the weight average (train.ema_decay) and the raw weights resume from the checkpoint"
               : "the checkpoint has no raw weights (raw.*: it was written with train.ema_decay 0, or is a "
                 "best.safetensors written without train.ema_keep_raw): the weight average starts from its weights";
}

bool restore_raw_weights(const nn::NamedTensors& params, const safetensors::File& file, const std::string& path) {
  size_t found = 0, trainable = 0;
  for (const auto& [name, p] : params) {
    if (!p.requires_grad()) continue;  // frozen parameters have no raw copy
    ++trainable;
    if (raw_tensor(file, path, name, p)) ++found;
  }
  SRU_CHECK(found == 0 || found == trainable, "'", path, "' holds raw weights for ", found, " of the ", trainable,
            " trainable parameters: it is damaged or from another model");
  for (const auto& [name, p] : params)
    if (const Tensor* raw = p.requires_grad() ? raw_tensor(file, path, name, p) : nullptr) {
      Tensor target = p;
      target.copy_(*raw);
    }
  return found > 0;
}

}  // namespace sru::train
