// The moving average of the weights (see ema.h).
#include "train/ema.h"

#include <algorithm>

#include "core/error.h"

namespace sru::train {

namespace {

// The file's "raw.{name}" tensor of each trainable parameter (name, p), checked against p; null for frozen
// parameters (no raw copy) and, when the file has none, for all. Raw weights of some only are refused.
std::vector<const Tensor*> raw_tensors(const nn::NamedTensors& params, const safetensors::File& file,
                                       const std::string& path) {
  std::vector<const Tensor*> raw;
  size_t found = 0, trainable = 0;
  for (const auto& [name, p] : params) {
    const Tensor* r = p.requires_grad() ? file.find(kRawPrefix + name) : nullptr;
    if (r)
      SRU_CHECK(r->shape() == p.shape() && r->dtype() == p.dtype(), "'", path, "': tensor '", kRawPrefix, name,
                "' does not match parameter '", name, "' (shape or dtype)");
    trainable += p.requires_grad();
    found += r != nullptr;
    raw.push_back(r);
  }
  SRU_CHECK(found == 0 || found == trainable, "'", path, "' holds raw weights for ", found, " of the ", trainable,
            " trainable parameters: it is damaged or from another model");
  return raw;
}

}  // namespace

WeightEma::WeightEma(const nn::NamedTensors& params, double decay, int64_t start_step, bool warmup,
                     std::shared_ptr<nn::FlatParameters> flat)
    : params_(params), decay_(decay), start_step_(start_step), warmup_(warmup) {
  SRU_CHECK(decay > 0 && decay < 1, "train.ema_decay must be in (0, 1) when on, got ", decay);
  if (flat && (flat_group_ = flat->group_of(params_)) >= 0) {
    flat_ = std::move(flat);
    const size_t g = static_cast<size_t>(flat_group_);
    average_buffer_ = flat_->groups()[g].values.clone();  // the padding: zeros, as the values'
    const std::vector<Tensor> views = flat_->member_views(g, average_buffer_);
    for (size_t i = 0; i < params_.size(); ++i) average_.emplace_back(params_[i].first, views[i]);
    return;
  }
  for (const auto& named : params_) {
    const Tensor& p = named.second;
    average_.emplace_back(named.first, p.detach().clone());
    if (p.is_whole()) continue;
    const auto same = [&](const Tensor& s) { return s.dtype() == p.dtype() && s.device() == p.device(); };
    const auto it = std::find_if(scratch_.begin(), scratch_.end(), same);
    if (it == scratch_.end()) scratch_.push_back(Tensor::empty({p.numel()}, p.dtype(), p.device()));
    else if (it->numel() < p.numel()) *it = Tensor::empty({p.numel()}, p.dtype(), p.device());
  }
}

double WeightEma::decay_at(int64_t step) const {
  const double t = static_cast<double>(step - start_step_);
  return warmup_ ? std::min(decay_, (1.0 + t) / (10.0 + t)) : decay_;
}

void WeightEma::update(int64_t step) {
  SRU_CHECK(!in_model_, "internal: the weight average was updated while the model held it");
  const double d = decay_at(step);
  if (flat_) {  // the same element-wise update, over the whole buffers
    const Tensor& values = flat_->groups()[static_cast<size_t>(flat_group_)].values;
    if (step <= start_step_) average_buffer_.copy_(values);
    else average_buffer_.mul_(d).add_(values, 1.0 - d);
    return;
  }
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
  if (flat_) {
    flat_->exchange_values(static_cast<size_t>(flat_group_), average_buffer_);
    for (auto& [name, a] : average_) a.impl()->storage = average_buffer_.impl()->storage;  // same offsets
    in_model_ = !in_model_;
    return;
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i].second;
    Tensor& a = average_[i].second;
    if (p.is_whole()) {  // swap_data_ trades storage
      p.swap_data_(a);
      continue;
    }
    const auto same = [&](const Tensor& s) { return s.dtype() == p.dtype() && s.device() == p.device(); };
    Tensor kept = std::find_if(scratch_.begin(), scratch_.end(), same)->narrow0(0, p.numel()).view(p.shape());
    kept.copy_(p);
    p.copy_(a);
    a.copy_(kept);
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
  const std::vector<const Tensor*> raw = raw_tensors(params_, file, path);
  const bool found = std::any_of(raw.begin(), raw.end(), [](const Tensor* r) { return r != nullptr; });
  for (size_t i = 0; i < params_.size(); ++i) {
    average_[i].second.copy_(params_[i].second);  // the loaded model tensors: the average, or a run's without it
    if (raw[i]) params_[i].second.copy_(*raw[i]);
  }
  return found ? "the weight average (train.ema_decay) and the raw weights resume from the checkpoint"
               : "the checkpoint has no raw weights (raw.*: it was written with train.ema_decay 0, or is a "
                 "best.safetensors written without train.ema_keep_raw): the weight average starts from its weights";
}

bool restore_raw_weights(const nn::NamedTensors& params, const safetensors::File& file, const std::string& path) {
  const std::vector<const Tensor*> raw = raw_tensors(params, file, path);
  bool any = false;
  for (size_t i = 0; i < params.size(); ++i)
    if (raw[i]) {
      Tensor target = params[i].second;
      target.copy_(*raw[i]);
      any = true;
    }
  return any;
}

}  // namespace sru::train
