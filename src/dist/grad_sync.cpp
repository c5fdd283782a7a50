// Data-parallel gradient averaging (see grad_sync.h).
#include "dist/grad_sync.h"

#include "ops/elementwise.h"
#include "ops/reduce.h"

namespace sru::dist {

GradientSync::GradientSync(Communicator& comm, const nn::NamedTensors& params, double bucket_mb, int votes)
    : comm_(comm), params_(params), votes_(votes) {
  SRU_CHECK(!params_.empty(), "data parallel: the model has no trainable parameters");
  const DType dtype = params_[0].second.dtype();
  const Device device = params_[0].second.device();
  for (const auto& [name, p] : params_)
    SRU_CHECK(p.dtype() == dtype && p.device() == device, "data parallel: parameter '", name, "' is ",
              dtype_name(p.dtype()), " on ", p.device().str(), " but '", params_[0].first, "' is ", dtype_name(dtype),
              " on ", device.str(), "; the gradient buckets need one dtype and one device");
  const int64_t limit = static_cast<int64_t>(bucket_mb * (1 << 20));
  const int n = static_cast<int>(params_.size());
  bucket_of_.assign(n, 0);
  slot_of_.assign(n, 0);
  int64_t bytes = 0;
  for (int i = n - 1; i >= 0; --i) {  // reverse order: the order backward completes the gradients
    const int64_t size = params_[i].second.numel();
    const int64_t add = size * static_cast<int64_t>(dtype_size(dtype));
    if (buckets_.empty() || (limit > 0 && bytes > 0 && bytes + add > limit)) {
      buckets_.emplace_back();
      bytes = 0;
    }
    Bucket& b = buckets_.back();
    bucket_of_[i] = static_cast<int>(buckets_.size()) - 1;
    slot_of_[i] = static_cast<int>(b.params.size());
    b.offsets.push_back(b.params.empty() ? 0 : b.offsets.back() + params_[b.params.back()].second.numel());
    b.params.push_back(i);
    bytes += add;
    index_of_[params_[i].second.impl().get()] = i;
  }
  for (Bucket& b : buckets_) {
    b.extras = b.offsets.back() + params_[b.params.back()].second.numel();
    const int64_t extras = &b == &buckets_.back() ? 1 + votes_ + n : 0;
    b.buffer = Tensor::zeros({b.extras + extras}, dtype, device);
  }
  packed_.assign(n, false);
  reached_.assign(n, false);
}

std::unique_ptr<autograd::LeafGradientHookScope> GradientSync::begin(double share) {
  share_ = share;
  started_ = 0;
  packed_.assign(params_.size(), false);
  reached_.assign(params_.size(), false);
  for (Bucket& b : buckets_) b.ready = 0;
  if (buckets_.size() == 1) return nullptr;
  return std::make_unique<autograd::LeafGradientHookScope>([this](const Tensor& leaf) { on_gradient(leaf); });
}

void GradientSync::on_gradient(const Tensor& leaf) {
  const auto it = index_of_.find(leaf.impl().get());
  if (it == index_of_.end()) return;  // not a trainable parameter
  const int i = it->second;
  reached_[i] = true;
  pack(i);
  ++buckets_[bucket_of_[i]].ready;
  // Start every complete bucket whose predecessors have started, the last one excepted.
  const int last = static_cast<int>(buckets_.size()) - 1;
  while (started_ < last &&
         buckets_[started_].ready == static_cast<int>(buckets_[started_].params.size()))
    start(started_++);
}

void GradientSync::pack(int i) {
  const Bucket& b = buckets_[bucket_of_[i]];
  const auto& [name, p] = params_[i];
  Tensor segment = b.buffer.narrow0(b.offsets[slot_of_[i]], p.numel());
  const Tensor g = p.grad();
  if (g.defined()) {
    SRU_CHECK(g.dtype() == p.dtype() && g.device() == p.device() && g.numel() == p.numel(), "data parallel: the gradient of '",
              name, "' is ", g.str(), " on ", g.device().str(), ", its parameter ", p.str());
    segment.copy_(g.view({-1}));
    if (share_ != 1.0) segment.mul_(share_);
  } else {
    segment.zero_();
  }
  packed_[i] = true;
}

void GradientSync::start(int bucket) {
  comm_.start_all_reduce_sum(buckets_[bucket].buffer, "gradient bucket " + std::to_string(bucket + 1) + " of " +
                                                          std::to_string(buckets_.size()));
}

GradientSync::Result GradientSync::finish(const Tensor& loss, const std::vector<double>& votes) {
  SRU_CHECK(static_cast<int>(votes.size()) == votes_, "data parallel: ", votes.size(), " votes, expected ", votes_);
  for (size_t i = 0; i < params_.size(); ++i)
    if (!packed_[i]) {
      reached_[i] = params_[i].second.grad().defined();
      pack(static_cast<int>(i));
    }
  Bucket& last = buckets_.back();
  const Tensor buffer = last.buffer;
  Tensor loss_slot = buffer.narrow0(last.extras, 1);
  loss_slot.copy_(loss.detach().to(buffer.dtype()).view({1}));
  if (share_ != 1.0) loss_slot.mul_(share_);
  std::vector<double> extras = votes;
  for (bool reached : reached_) extras.push_back(reached ? 1.0 : 0.0);
  const int64_t n = static_cast<int64_t>(extras.size());
  buffer.narrow0(last.extras + 1, n).copy_(Tensor::from_vector(extras, {n}, buffer.dtype()).to(buffer.device()));
  for (; started_ < static_cast<int>(buckets_.size()); ++started_) start(started_);
  comm_.wait_all();

  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i].second;
    const Bucket& b = buckets_[bucket_of_[i]];
    p.set_grad(reached_[i] ? b.buffer.narrow0(b.offsets[slot_of_[i]], p.numel()).view(p.shape()) : Tensor());
  }
  Result r;
  r.loss = loss_slot.view({});
  for (int k = 0; k < votes_; ++k) r.votes.push_back(buffer.narrow0(last.extras + 1 + k, 1).view({}));
  autograd::NoGradGuard no_grad;
  const Tensor flags = buffer.narrow0(last.extras + 1 + votes_, static_cast<int64_t>(params_.size()));
  r.disagreement = sum(flags * (static_cast<double>(comm_.size()) - flags));
  return r;
}

}  // namespace sru::dist
