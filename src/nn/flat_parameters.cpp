// Flat parameter and gradient buffers (see flat_parameters.h).
#include "nn/flat_parameters.h"

#include <algorithm>

namespace sru::nn {

namespace {

constexpr size_t kAlignmentBytes = 64;

// Whether t is a whole tensor that nothing else views: its storage can be replaced under it.
bool owns_storage_alone(const Tensor& t) { return t.is_whole() && t.impl()->storage.use_count() == 1; }

// Points `impl` at `numel` elements of `buffer` from `offset` (keeping its shape and dtype).
void rebind(TensorImpl& impl, const Tensor& buffer, int64_t offset) {
  impl.storage = buffer.impl()->storage;
  impl.offset = buffer.impl()->offset + offset;
}

}  // namespace

FlatParameters::FlatParameters(const NamedTensors& params) {
  std::vector<int64_t> sizes;  // per group: elements so far
  for (const auto& [name, p] : params) {
    if (!p.requires_grad() || !p.is_leaf() || !owns_storage_alone(p)) continue;
    if (find(p)) continue;  // listed twice
    const DType dtype = p.dtype();
    const Device device = p.device();
    auto group = std::find_if(groups_.begin(), groups_.end(),
                              [&](const Group& g) { return g.dtype == dtype && g.device == device; });
    if (group == groups_.end()) {
      groups_.push_back({p.dtype(), p.device(), Tensor(), Tensor(), {}});
      sizes.push_back(0);
      group = groups_.end() - 1;
    }
    const size_t g = static_cast<size_t>(group - groups_.begin());
    const int64_t step = static_cast<int64_t>(kAlignmentBytes / dtype_size(p.dtype()));
    const int64_t offset = (sizes[g] + step - 1) / step * step;
    sizes[g] = offset + p.numel();
    group->members.push_back(members_.size());
    members_.push_back({name, p, offset, g});
  }
  for (size_t g = 0; g < groups_.size(); ++g) {
    Group& group = groups_[g];
    group.values = Tensor::zeros({sizes[g]}, group.dtype, group.device);
    group.gradients = Tensor::zeros({sizes[g]}, group.dtype, group.device);
    for (size_t m : group.members) {
      Member& member = members_[m];
      Tensor& p = member.parameter;
      group.values.narrow0(member.offset, p.numel()).copy_(p.view({-1}));
      rebind(*p.impl(), group.values, member.offset);
      Tensor home = group.gradients.narrow0(member.offset, p.numel()).view(p.shape());
      const Tensor grad = p.grad();
      if (grad.defined()) {
        home.copy_(grad);
        p.set_grad(home);
      }
      p.impl()->grad_home = home.impl();
    }
  }
}

const FlatParameters::Member* FlatParameters::find(const Tensor& t) const {
  for (const Member& m : members_)
    if (m.parameter.impl() == t.impl()) return &m;
  return nullptr;
}

Tensor FlatParameters::zeros_like(size_t group) const {
  const Group& g = groups_.at(group);
  return Tensor::zeros({g.values.numel()}, g.dtype, g.device);
}

std::vector<Tensor> FlatParameters::member_views(size_t group, const Tensor& buffer) const {
  const Group& g = groups_.at(group);
  SRU_CHECK(buffer.numel() == g.values.numel() && buffer.dtype() == g.dtype, "flat parameters: a buffer ",
            buffer.str(), " is not laid out as group ", group, " (", g.values.str(), ")");
  std::vector<Tensor> views;
  for (size_t m : g.members) {
    const Member& member = members_[m];
    views.push_back(buffer.narrow0(member.offset, member.parameter.numel()).view(member.parameter.shape()));
  }
  return views;
}

bool FlatParameters::gradients_in_place(size_t group) const {
  for (size_t m : groups_.at(group).members) {
    const TensorImpl& p = *members_[m].parameter.impl();
    if (!p.grad || !Tensor(p.grad).same_data(Tensor(p.grad_home))) return false;
  }
  return true;
}

int FlatParameters::group_of(const NamedTensors& params) const {
  for (size_t g = 0; g < groups_.size(); ++g) {
    const std::vector<size_t>& members = groups_[g].members;
    if (members.size() != params.size()) continue;
    bool same = true;
    for (size_t i = 0; same && i < members.size(); ++i)
      same = members_[members[i]].parameter.impl() == params[i].second.impl();
    if (same) return static_cast<int>(g);
  }
  return -1;
}

void FlatParameters::exchange_values(size_t group, Tensor& buffer) {
  Group& g = groups_.at(group);
  SRU_CHECK(buffer.matches(g.values.shape(), g.dtype, g.device) && buffer.is_whole(),
            "flat parameters: exchange_values with ", buffer.str(), ", not a whole buffer laid out as ", g.values.str());
  g.values.swap_data_(buffer);
  for (size_t m : g.members) rebind(*members_[m].parameter.impl(), g.values, members_[m].offset);
}

void FlatParameters::to(Device device) {
  for (Group& group : groups_) {
    if (group.device == device) continue;
    group.values = group.values.to(device);
    const int64_t n = group.gradients.numel();
    group.gradients = Tensor::zeros({group.gradient_head + n}, group.dtype, device).narrow0(group.gradient_head, n);
    group.device = device;
    for (size_t m : group.members) {
      Member& member = members_[m];
      TensorImpl& p = *member.parameter.impl();
      rebind(p, group.values, member.offset);
      p.grad = nullptr;
      rebind(*p.grad_home, group.gradients, member.offset);
    }
  }
}

Tensor FlatParameters::widen_gradients(size_t group, int64_t head) {
  Group& g = groups_.at(group);
  SRU_CHECK(head >= 0, "flat parameters: a negative gradient head");
  const int64_t n = g.gradients.numel();
  Tensor whole = Tensor::zeros({head + n}, g.dtype, g.device);
  Tensor gradients = whole.narrow0(head, n);
  gradients.copy_(g.gradients);
  g.gradients = gradients;
  g.gradient_head = head;
  for (size_t m : g.members) {
    const Member& member = members_[m];
    rebind(*member.parameter.impl()->grad_home, g.gradients, member.offset);  // .grad, when it is the place, follows
  }
  return whole;
}

}  // namespace sru::nn
