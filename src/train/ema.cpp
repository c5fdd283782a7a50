// The moving average of the weights (see ema.h).
#include "train/ema.h"

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

WeightEma::WeightEma(const nn::NamedTensors& params, double decay, int64_t start_step)
    : params_(params), decay_(decay), start_step_(start_step) {
  SRU_CHECK(decay > 0 && decay < 1, "train.ema_decay must be in (0, 1) when on, got ", decay);
  for (const auto& [name, p] : params_) average_.emplace_back(name, p.detach().clone());
}

void WeightEma::update(int64_t step) {
  SRU_CHECK(!in_model_, "internal: the weight average was updated while the model held it");
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& a = average_[i].second;
    const Tensor& w = params_[i].second;
    if (step <= start_step_) {
      a.copy_(w);
    } else {
      a.mul_(decay_).add_(w, 1.0 - decay_);
    }
  }
}

void WeightEma::exchange() {
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i].second;
    Tensor& a = average_[i].second;
    const Tensor held = p.detach().clone();
    p.copy_(a);
    a.copy_(held);
  }
  in_model_ = !in_model_;
}

WeightEma::InModel::InModel(WeightEma* ema) : ema_(ema && !ema->in_model_ ? ema : nullptr) {
  if (ema_) ema_->exchange();
}

WeightEma::InModel::~InModel() {
  if (ema_) ema_->exchange();
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
               : "the checkpoint has no weight average (written with train.ema_decay 0): it starts from the "
                 "checkpoint's weights";
}

bool restore_raw_weights(const nn::NamedTensors& params, const safetensors::File& file, const std::string& path) {
  bool any = false;
  for (const auto& [name, p] : params) {
    const Tensor* raw = raw_tensor(file, path, name, p);
    if (!raw) continue;
    Tensor target = p;
    target.copy_(raw->to(p.device()));
    any = true;
  }
  return any;
}

}  // namespace sru::train
