// Module bookkeeping: registration, recursive name collection, train/eval, gradient reset.
#include "nn/module.h"

namespace sru::nn {

Tensor Module::register_parameter(const std::string& name, Tensor t, bool trainable) {
  SRU_CHECK(t.defined(), "register_parameter: '", name, "' is undefined");
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

void Module::collect(const std::string& prefix, bool params, bool buffers, NamedTensors& out) const {
  if (params)
    for (const Entry& e : parameters_) out.emplace_back(prefix + e.name, e.tensor);
  if (buffers)
    for (const Entry& e : buffers_) out.emplace_back(prefix + e.name, e.tensor);
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", params, buffers, out);
}

NamedTensors Module::state() const {
  NamedTensors out;
  collect("", true, true, out);
  return out;
}

NamedTensors Module::named_parameters() const {
  NamedTensors out;
  collect("", true, false, out);
  return out;
}

NamedTensors Module::named_buffers() const {
  NamedTensors out;
  collect("", false, true, out);
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

void Module::to(Device device) {
  for (auto& [name, t] : state()) t.to_(device);
}

Device Module::device() const {
  const NamedTensors params = named_parameters();
  return params.empty() ? Device::cpu() : params.front().second.device();
}

void Module::zero_grad() {
  for (Tensor& t : trainable_parameters()) t.set_grad(Tensor());
}

}  // namespace sru::nn
