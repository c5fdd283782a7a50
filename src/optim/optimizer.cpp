// Optimisers (formulas in optimizer.h): state, checkpoints, the per-step scalars, and the dispatch of
// each parameter's update and of gradient clipping to the CPU or CUDA kernels (cpu/optimizer.cpp,
// cuda/optimizer.cu), through SRU_KERNEL_IN so that every operand is checked to share a device.
#include "optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/dispatch.h"

namespace sru::optim {

namespace {

std::vector<std::string> slots_for(const std::string& kind) {
  if (kind == "sgd") return {"momentum_buffer"};
  if (kind == "adamax") return {"exp_avg", "exp_inf"};
  if (kind == "adam" || kind == "adamw" || kind == "radam" || kind == "radamw") return {"exp_avg", "exp_avg_sq"};
  SRU_FAIL("unknown optimizer '", kind, "': expected sgd, adam, adamw, adamax, radam or radamw");
}

// The segment table of flat group g's members, pieces of `piece` elements, on the group's device.
SegmentTable make_segment_table(const nn::FlatParameters& flat, size_t g, int64_t piece,
                                const std::vector<int64_t>& flags) {
  const nn::FlatParameters::Group& group = flat.groups()[g];
  const int64_t count = static_cast<int64_t>(group.members.size());
  Tensor rows = Tensor::empty({count, 4}, DType::I64);
  auto* row = reinterpret_cast<SegmentRow*>(rows.data<int64_t>());
  int64_t pieces = 0;
  for (int64_t i = 0; i < count; ++i) {
    const nn::FlatParameters::Member& m = flat.members()[group.members[static_cast<size_t>(i)]];
    const int64_t numel = m.parameter.numel();
    row[i] = SegmentRow{m.offset, numel, pieces, flags[static_cast<size_t>(i)]};
    pieces += (numel + piece - 1) / piece;
  }
  return {rows.to(group.device), piece, pieces};
}

}  // namespace

Optimizer::Optimizer(nn::NamedTensors params, OptimizerOptions options, std::shared_ptr<const nn::FlatParameters> flat)
    : params_(std::move(params)), options_(std::move(options)), flat_(std::move(flat)),
      slot_names_(slots_for(options_.kind)) {
  // Per-parameter weight decay: excluded by a substring of the name; a string that matches nothing is
  // refused (a misspelt exclusion would otherwise decay what it meant to spare).
  decays_.assign(params_.size(), true);
  for (const std::string& pattern : options_.weight_decay_exclude) {
    SRU_CHECK(!pattern.empty(), "train.weight_decay_exclude: an empty string would match every parameter");
    bool matched = false;
    for (size_t k = 0; k < params_.size(); ++k)
      if (params_[k].first.find(pattern) != std::string::npos) {
        decays_[k] = false;
        matched = true;
      }
    if (!matched) {
      std::string names;
      for (size_t k = 0; k < params_.size() && k < 12; ++k) names += (k ? ", " : "") + params_[k].first;
      if (params_.size() > 12) names += ", ...";
      SRU_FAIL("train.weight_decay_exclude: '", pattern, "' is in no trainable parameter's name (they are: ", names,
               ")");
    }
  }
  // The flat groups whose members are all parameters of this optimiser get whole-buffer slots.
  flat_slots_of_.assign(params_.size(), -1);
  std::vector<std::vector<Tensor>> flat_views(params_.size());  // per parameter: its slot views
  if (flat_) {
    for (size_t g = 0; g < flat_->groups().size(); ++g) {
      std::vector<size_t> index;  // per member: its index in params_
      for (size_t m : flat_->groups()[g].members) {
        const auto it = std::find_if(params_.begin(), params_.end(), [&](const auto& named) {
          return named.second.impl() == flat_->members()[m].parameter.impl();
        });
        if (it == params_.end()) break;
        index.push_back(static_cast<size_t>(it - params_.begin()));
      }
      if (index.size() != flat_->groups()[g].members.size()) continue;
      FlatSlots fs{g, {}, index, {}, {}};
      for (size_t i = 0; i < slot_names_.size(); ++i) {
        fs.slots.push_back(flat_->zeros_like(g));
        const std::vector<Tensor> views = flat_->member_views(g, fs.slots.back());
        for (size_t j = 0; j < index.size(); ++j) flat_views[index[j]].push_back(views[j]);
      }
      std::vector<int64_t> flags(index.size(), 0);
      for (size_t j = 0; j < index.size(); ++j) flags[j] = decays_[index[j]] ? 0 : kSegmentNoWeightDecay;
      fs.update = make_segment_table(*flat_, g, kUpdatePiece, flags);
      fs.norm = make_segment_table(*flat_, g, kNormBlock, std::vector<int64_t>(index.size(), 0));
      for (size_t k : index) flat_slots_of_[k] = static_cast<int>(flat_slots_.size());
      flat_slots_.push_back(std::move(fs));
    }
  }
  const std::string& k = options_.kind;
  kind_ = k == "sgd"      ? OptimizerKind::Sgd
          : k == "adam"   ? OptimizerKind::Adam
          : k == "adamw"  ? OptimizerKind::AdamW
          : k == "adamax" ? OptimizerKind::Adamax
          : k == "radam"  ? OptimizerKind::RAdam
                          : OptimizerKind::RAdamW;
  for (size_t k = 0; k < params_.size(); ++k) {
    const Tensor& p = params_[k].second;
    check_floating(p, "optimizer");
    std::vector<Tensor> slots = flat_views[k];
    if (slots.empty())
      for (size_t i = 0; i < slot_names_.size(); ++i) slots.push_back(Tensor::zeros(p.shape(), p.dtype(), p.device()));
    slots_.push_back(slots);
    const auto same = [&](const std::vector<size_t>& group) {
      const Tensor& q = params_[group.front()].second;
      return q.dtype() == p.dtype() && q.device() == p.device() && decays_[group.front()] == decays_[k];
    };
    const auto group = std::find_if(groups_.begin(), groups_.end(), same);
    if (group == groups_.end()) groups_.push_back({k});
    else group->push_back(k);
  }
}

void Optimizer::zero_grad() {
  for (auto& [name, p] : params_) p.set_grad(Tensor());
}

StepScalars Optimizer::scalars_of_step(double lr, int64_t step) const {
  const double t = static_cast<double>(step);
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
  sc.first = step == 1;
  // RAdam's rectification term for this step (shared by all parameters).
  const double rho_inf = 2.0 / (1.0 - o.beta2) - 1.0;
  const double rho_t = rho_inf - 2.0 * t * std::pow(o.beta2, t) / sc.bias2;
  sc.rectify = rho_t > 5.0;
  sc.rect = sc.rectify ? std::sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) : 0.0;
  return sc;
}

void Optimizer::step(double lr, const Tensor& clip) {
  ++step_count_;
  const StepScalarsSource sc{scalars_of_step(lr, step_count_), scalars_in_memory_};

  SRU_CHECK(!clip.defined() || (clip.dtype() == DType::F64 && clip.numel() == 2), "optimizer step: clip must be the "
            "f64 (2) [norm, factor] of grad_norm_and_clip_factor, got ", dtype_name(clip.dtype()), " ",
            shape_str(clip.shape()));
  // Flat groups with every gradient in place: one call over the whole buffers.
  std::vector<bool> whole(flat_slots_.size());
  whole_buffer_updates_ = 0;
  for (size_t f = 0; f < flat_slots_.size(); ++f) {
    const FlatSlots& fs = flat_slots_[f];
    whole[f] = flat_->gradients_in_place(fs.group);
    if (!whole[f]) continue;
    const nn::FlatParameters::Group& fg = flat_->groups()[fs.group];
    const Tensor& s1 = fs.slots.size() > 1 ? fs.slots[1] : fs.slots[0];
    SRU_KERNEL_IN(::sru::optim, fg.device, optimizer_update_segments, kind_, fg.values, fg.gradients, fs.slots[0], s1,
                  fs.update.rows, fs.update.piece, fs.update.pieces, sc, clip);
    ++whole_buffer_updates_;
  }
  for (const std::vector<size_t>& group : groups_) {
    std::vector<Tensor> p, g, s0, s1;
    for (size_t k : group) {
      if (flat_slots_of_[k] >= 0 && whole[static_cast<size_t>(flat_slots_of_[k])]) continue;
      const Tensor grad = params_[k].second.grad();
      if (!grad.defined()) continue;
      p.push_back(params_[k].second);
      g.push_back(grad);
      s0.push_back(slots_[k][0]);
      s1.push_back(slots_[k].size() > 1 ? slots_[k][1] : slots_[k][0]);  // SGD: one slot, s1 unused
    }
    if (p.empty()) continue;
    const Device device = p.front().device();
    StepScalarsSource group_scalars = sc;
    group_scalars.no_weight_decay = !decays_[group.front()];
    SRU_KERNEL_IN(::sru::optim, device, optimizer_update, kind_, p, g, s0, s1, group_scalars, clip);
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

namespace {

// The gradients of one dtype whose blocks' sums come next in the norm's partial buffer: a list of
// tensors, or (whole set) one flat buffer read through its segment table, blocks in the same order.
struct NormPart {
  std::vector<Tensor> gradients;
  const Tensor* whole = nullptr;              // the flat gradient buffer
  const Tensor* segments = nullptr;           // its norm table's rows
  int64_t whole_blocks = 0;
};

Tensor norm_of_parts(const std::vector<NormPart>& parts, Device device, double max_norm,
                     const GradScaleSource& grad_scale, const Tensor& loss) {
  int64_t blocks = 0;
  std::vector<int64_t> part_blocks;
  for (const NormPart& part : parts) {
    int64_t n = part.whole_blocks;
    if (!part.whole)
      for (const Tensor& g : part.gradients) n += (g.numel() + kNormBlock - 1) / kNormBlock;
    part_blocks.push_back(n);
    blocks += n;
  }
  const Tensor partial = Tensor::empty({blocks}, DType::F64, device);
  int64_t at = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const Tensor slice = partial.narrow0(at, part_blocks[i]);
    if (parts[i].whole)
      SRU_KERNEL_IN(::sru::optim, device, sum_squares_segments, *parts[i].whole, *parts[i].segments, kNormBlock,
                    part_blocks[i], slice);
    else
      SRU_KERNEL_IN(::sru::optim, device, sum_squares_blocks, parts[i].gradients, kNormBlock, slice);
    at += part_blocks[i];
  }
  const Tensor result = Tensor::empty({2}, DType::F64, device);
  SRU_KERNEL_IN(::sru::optim, device, finish_grad_norm, partial, max_norm, grad_scale, loss, result);
  return result;
}

// The indices k of params with a gradient, grouped by its dtype in order of first appearance (each
// group one reduction dispatch; the blocks' sums in this order).
std::vector<std::vector<size_t>> gradients_by_dtype(const nn::NamedTensors& params) {
  std::vector<std::vector<size_t>> groups;
  for (size_t k = 0; k < params.size(); ++k) {
    const Tensor g = params[k].second.grad();
    if (!g.defined()) continue;
    const auto same = [&](const std::vector<size_t>& group) {
      return params[group.front()].second.grad().dtype() == g.dtype();
    };
    const auto group = std::find_if(groups.begin(), groups.end(), same);
    if (group == groups.end()) groups.push_back({k});
    else group->push_back(k);
  }
  return groups;
}

Device gradients_device(const nn::NamedTensors& params, const std::vector<std::vector<size_t>>& groups) {
  if (!groups.empty()) return params[groups[0][0]].second.grad().device();
  return params.empty() ? Device::cpu() : params[0].second.device();
}

std::vector<Tensor> gradients_of(const nn::NamedTensors& params, const std::vector<size_t>& group) {
  std::vector<Tensor> out;
  for (size_t k : group) out.push_back(params[k].second.grad());
  return out;
}

}  // namespace

Tensor grad_norm_and_clip_factor(const nn::NamedTensors& params, double max_norm, double grad_scale) {
  const std::vector<std::vector<size_t>> groups = gradients_by_dtype(params);
  std::vector<NormPart> parts;
  for (const std::vector<size_t>& group : groups) parts.push_back({gradients_of(params, group)});
  return norm_of_parts(parts, gradients_device(params, groups), max_norm, {grad_scale}, Tensor());
}

Tensor Optimizer::grad_norm_and_clip_factor(double max_norm, double grad_scale, const Tensor& loss) const {
  const std::vector<std::vector<size_t>> groups = gradients_by_dtype(params_);
  std::vector<NormPart> parts;
  for (const std::vector<size_t>& group : groups) {
    // A flat group holding exactly these gradients, in this order, in place: one buffer.
    const auto whole = std::find_if(flat_slots_.begin(), flat_slots_.end(), [&](const FlatSlots& fs) {
      return fs.params == group && flat_->gradients_in_place(fs.group);
    });
    if (whole != flat_slots_.end())
      parts.push_back({{}, &flat_->groups()[whole->group].gradients, &whole->norm.rows, whole->norm.pieces});
    else
      parts.push_back({gradients_of(params_, group)});
  }
  SRU_CHECK(!loss.defined() || loss.numel() == 1, "grad_norm_and_clip_factor: the loss must be one value, got ",
            shape_str(loss.shape()));
  return norm_of_parts(parts, gradients_device(params_, groups), max_norm, {grad_scale, grad_scale_in_memory_}, loss);
}

Tensor clip_grad_norm_tensor(const nn::NamedTensors& params, double max_norm) {
  const Tensor result = grad_norm_and_clip_factor(params, max_norm);
  if (max_norm > 0)
    for (const auto& [name, p] : params)
      if (p.grad().defined()) SRU_KERNEL_IN(::sru::optim, p.device(), scale_by_clip_factor, p.grad(), result);
  return result.narrow0(0, 1).view({});
}

double clip_grad_norm(const nn::NamedTensors& params, double max_norm) {
  return clip_grad_norm_tensor(params, max_norm).item<double>();
}

}  // namespace sru::optim
