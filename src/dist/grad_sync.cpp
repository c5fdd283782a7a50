// Data-parallel gradient averaging (see grad_sync.h).
#include "dist/grad_sync.h"

#include "ops/elementwise.h"
#include "ops/reduce.h"

namespace sru::dist {

GradientSync::GradientSync(Communicator& comm, const nn::NamedTensors& params, double bucket_mb, int votes,
                           const std::shared_ptr<nn::FlatParameters>& flat)
    : comm_(comm), params_(params), votes_(votes) {
  SRU_CHECK(!params_.empty(), "data parallel: the model has no trainable parameters");
  const DType dtype = params_[0].second.dtype();
  const Device device = params_[0].second.device();
  for (const auto& [name, p] : params_)
    SRU_CHECK(p.dtype() == dtype && p.device() == device, "data parallel: parameter '", name, "' is ",
              dtype_name(p.dtype()), " on ", p.device().str(), " but '", params_[0].first, "' is ", dtype_name(dtype),
              " on ", device.str(), "; the gradient buckets need one dtype and one device");
  for (size_t i = 0; i < params_.size(); ++i) index_of_[params_[i].second.impl().get()] = static_cast<int>(i);
  plan_buckets(static_cast<int64_t>(bucket_mb * (1 << 20)));
  // The flat buffer serves when its one group is exactly these parameters, in this order.
  flat_ = flat && flat->groups().size() == 1 && flat->group_of(params_) == 0;
  if (flat_) lay_out_flat(*flat);
  else lay_out_packed();
  packed_.assign(params_.size(), false);
  reached_.assign(params_.size(), false);
}

void GradientSync::plan_buckets(int64_t limit) {
  const int n = static_cast<int>(params_.size());
  const int64_t element = static_cast<int64_t>(dtype_size(params_[0].second.dtype()));
  bucket_of_.assign(n, 0);
  int64_t bytes = 0;
  for (int i = n - 1; i >= 0; --i) {  // reverse order: the order backward completes the gradients
    const int64_t add = params_[i].second.numel() * element;
    if (buckets_.empty() || (limit > 0 && bytes > 0 && bytes + add > limit)) {
      buckets_.emplace_back();
      bytes = 0;
    }
    bucket_of_[i] = static_cast<int>(buckets_.size()) - 1;
    buckets_.back().params.push_back(i);
    bytes += add;
  }
}

void GradientSync::lay_out_packed() {
  const DType dtype = params_[0].second.dtype();
  const Device device = params_[0].second.device();
  const int64_t n = static_cast<int64_t>(params_.size());
  segments_.resize(params_.size());
  for (Bucket& b : buckets_) {
    int64_t size = 0;
    for (int i : b.params) size += params_[i].second.numel();
    const int64_t extras = &b == &buckets_.back() ? 1 + votes_ + n : 0;
    b.buffer = Tensor::zeros({size + extras}, dtype, device);
    b.gradients = b.buffer.narrow0(0, size);
    int64_t at = 0;
    for (int i : b.params) {
      segments_[i] = b.buffer.narrow0(at, params_[i].second.numel());
      at += params_[i].second.numel();
    }
    if (extras > 0) extras_ = b.buffer.narrow0(size, extras);
  }
}

void GradientSync::lay_out_flat(nn::FlatParameters& flat) {
  // [extras | the flat gradients]: bucket k covers its parameters' places and the padding after them;
  // the last bucket (the first parameters) also the extras in front.
  const int64_t head = 1 + votes_ + static_cast<int64_t>(params_.size());
  const Tensor whole = flat.widen_gradients(0, head);
  const nn::FlatParameters::Group& group = flat.groups()[0];
  const auto offset_of = [&](int i) { return head + flat.members()[group.members[i]].offset; };
  segments_.resize(params_.size());
  for (size_t i = 0; i < params_.size(); ++i)
    segments_[i] = Tensor(params_[i].second.impl()->grad_home).view({-1});
  const int n = static_cast<int>(params_.size());
  for (Bucket& b : buckets_) {
    const int lowest = b.params.back(), highest = b.params.front();
    const int64_t begin = offset_of(lowest), end = highest == n - 1 ? whole.numel() : offset_of(highest + 1);
    b.gradients = whole.narrow0(begin, end - begin);
    b.buffer = lowest == 0 ? whole.narrow0(0, end) : b.gradients;
  }
  extras_ = whole.narrow0(0, head);
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
  const auto& [name, p] = params_[i];
  const Tensor& segment = segments_[i];
  const Tensor g = p.grad();
  if (g.defined()) {
    SRU_CHECK(g.dtype() == p.dtype() && g.device() == p.device() && g.numel() == p.numel(), "data parallel: the gradient of '",
              name, "' is ", g.str(), " on ", g.device().str(), ", its parameter ", p.str());
    if (!g.same_data(segment)) Tensor(segment).copy_(g.view({-1}));
    if (share_ != 1.0 && !flat_) Tensor(segment).mul_(share_);
  } else {
    Tensor(segment).zero_();
  }
  packed_[i] = true;
}

void GradientSync::start(int bucket) {
  // Flat: the rank's share, once over the bucket's gradients (its padding is zero).
  if (flat_ && share_ != 1.0) Tensor(buckets_[bucket].gradients).mul_(share_);
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
  Tensor loss_slot = extras_.narrow0(0, 1);
  loss_slot.copy_(loss.detach().to(extras_.dtype()).view({1}));
  if (share_ != 1.0) loss_slot.mul_(share_);
  std::vector<double> extras = votes;
  for (bool reached : reached_) extras.push_back(reached ? 1.0 : 0.0);
  const int64_t n = static_cast<int64_t>(extras.size());
  extras_.narrow0(1, n).copy_(Tensor::from_vector(extras, {n}, extras_.dtype()).to(extras_.device()));
  for (; started_ < static_cast<int>(buckets_.size()); ++started_) start(started_);
  comm_.wait_all();

  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i].second;
    p.set_grad(reached_[i] ? segments_[i].view(p.shape()) : Tensor());
  }
  Result r;
  r.loss = loss_slot.view({});
  for (int k = 0; k < votes_; ++k) r.votes.push_back(extras_.narrow0(1 + k, 1).view({}));
  autograd::NoGradGuard no_grad;
  const Tensor flags = extras_.narrow0(1 + votes_, static_cast<int64_t>(params_.size()));
  r.disagreement = sum(flags * (static_cast<double>(comm_.size()) - flags));
  return r;
}

}  // namespace sru::dist
