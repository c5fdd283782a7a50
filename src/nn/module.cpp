// Module bookkeeping: registration, recursive name collection, train/eval, gradient reset.
#include "nn/module.h"

#include <algorithm>

namespace sru::nn {

Tensor Module::register_parameter(const std::string& name, Tensor t, bool trainable) {
  SRU_CHECK(t.defined(), "register_parameter: '", name, "' is undefined");
  SRU_CHECK(!layout_fixed_, "register_parameter: '", path_, name, "' after the model's parameters "
            "were laid out in flat buffers (nn::Module::flatten_parameters, when the optimiser was made): the update "
            "would leave it out; register every parameter while building the model");
  for (const Entry& e : parameters_) SRU_CHECK(e.name != name, "parameter '", name, "' registered twice");
  if (trainable) t.set_requires_grad(true);
  parameters_.push_back({name, t});
  return t;
}

Tensor Module::register_buffer(const std::string& name, Tensor t) {
  SRU_CHECK(t.defined(), "register_buffer: '", name, "' is undefined");
  buffers_.push_back({name, t});
  return t;
}

void Module::replace_parameter(const std::string& name, const Tensor& t) {
  SRU_CHECK(!layout_fixed_, "replace_parameter: '", path_, name, "' after the model's parameters "
            "were laid out in flat buffers (nn::Module::flatten_parameters): tie weights while building the model");
  for (Entry& e : parameters_) {
    if (e.name != name) continue;
    SRU_CHECK(t.shape() == e.tensor.shape() && t.dtype() == e.tensor.dtype(), "replace_parameter '", name, "': ",
              t.str(), " does not match ", e.tensor.str());
    e.tensor = t;
    return;
  }
  SRU_FAIL("replace_parameter: no parameter '", name, "'");
}

void Module::collect(const std::string& prefix, bool params, bool buffers, NamedTensors& out,
                     std::vector<const TensorImpl*>& seen) const {
  auto add = [&](const Entry& e) {
    const TensorImpl* impl = e.tensor.impl().get();
    if (std::find(seen.begin(), seen.end(), impl) != seen.end()) return;  // tied: already listed
    seen.push_back(impl);
    out.emplace_back(prefix + e.name, e.tensor);
  };
  if (params)
    for (const Entry& e : parameters_) add(e);
  if (buffers)
    for (const Entry& e : buffers_) add(e);
  // A child registered under "" lends its tensors to this module's names (a shared module whose owner
  // keeps the names of a reference implementation, e.g. SRU++'s attention projections).
  for (const auto& [name, child] : children_)
    child->collect(name.empty() ? prefix : prefix + name + ".", params, buffers, out, seen);
}

NamedTensors Module::state() const {
  NamedTensors out;
  std::vector<const TensorImpl*> seen;
  collect("", true, true, out, seen);
  return out;
}

NamedTensors Module::named_parameters() const {
  NamedTensors out;
  std::vector<const TensorImpl*> seen;
  collect("", true, false, out, seen);
  return out;
}

NamedTensors Module::named_buffers() const {
  NamedTensors out;
  std::vector<const TensorImpl*> seen;
  collect("", false, true, out, seen);
  return out;
}

std::vector<Tensor> Module::trainable_parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters())
    if (t.requires_grad()) out.push_back(t);
  return out;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const Tensor& t : trainable_parameters()) n += t.numel();
  return n;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

void Module::after_update() {
  on_after_update();
  for (auto& [name, child] : children_) child->after_update();
}

std::vector<Tensor> Module::random_states() const {
  std::vector<Tensor> states = own_random_states();
  for (const auto& [name, child] : children_)
    for (Tensor& t : child->random_states()) states.push_back(std::move(t));
  return states;
}

void Module::to(Device device) {
  SRU_CHECK(!layout_fixed_ || flat_ || device == this->device(), "Module::to(", device.str(), "): '",
            path_.substr(0, path_.empty() ? 0 : path_.size() - 1), "' is part of a model whose parameters lie in flat buffers (nn::Module::flatten_parameters); move the "
            "root module, which moves the buffers whole");
  if (flat_) flat_->to(device);  // the flat buffers whole; their members are then already there
  for (auto& [name, t] : state()) t.to_(device);
}

std::shared_ptr<FlatParameters> Module::flatten_parameters() {
  if (flat_) return flat_;
  SRU_CHECK(!layout_fixed_, "flatten_parameters: this module ('", path_,
            "') is part of a model whose parameters are already flat; call it on the root");
  flat_ = std::make_shared<FlatParameters>(named_parameters());
  fix_layout("");
  return flat_;
}

void Module::fix_layout(const std::string& prefix) {
  layout_fixed_ = true;
  path_ = prefix;
  for (auto& [name, child] : children_) child->fix_layout(name.empty() ? prefix : prefix + name + ".");
}

Device Module::device() const {
  const NamedTensors params = named_parameters();
  return params.empty() ? Device::cpu() : params.front().second.device();
}

void Module::zero_grad() {
  for (Tensor& t : trainable_parameters()) t.set_grad(Tensor());
}

}  // namespace sru::nn
