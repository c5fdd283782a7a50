// The shared training step (see step.h).
#include "train/step.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <cstring>

#include <spdlog/spdlog.h>

#include "autograd/engine.h"
#include "autograd/node.h"
#include "core/cuda/runtime.h"
#include "core/host_sync.h"
#include "core/kernel_count.h"
#include "ops/elementwise.h"

namespace sru::train {

// The memory every captured step's replay reads, written by the host before each replay, on the
// model's device, in 8-byte words: the step's first Philox counter value (u64), the optimiser's
// StepScalars, then for the pieces of an accumulated step (train.accumulate > 1) the batch's loss
// weight (as f32, then as f64) and the step's 1 / terms so far (f64), then the update's gate pair (f64
// 1 and the gate: train.launch_ahead). Beside it, the accumulated step's weighted loss sum, which its
// batches' graphs add to and its update's graph reads.
// The gate: a one-batch graph multiplies its [norm, clip factor] by the pair before its update, and
// leaves in the gate its own verdict, 1 when its factor is finite, else NaN (factor x 0 + 1). The host
// writes the pair as [1, 1] before a replay that follows a read step, and leaves the gate alone for a
// replay launched behind an unread one: that replay's update then takes place only if the step before
// it updated (a NaN factor makes the update change nothing), and x 1 leaves every bit as it was.
struct TrainingStep::ReplayInputs {
  static constexpr int64_t kScalarWords = (sizeof(optim::StepScalars) + 7) / 8;
  static constexpr int64_t kLossWeightF32 = 1 + kScalarWords, kLossWeightF64 = kLossWeightF32 + 1,
                           kGradScale = kLossWeightF64 + 1, kGatePair = kGradScale + 1, kWords = kGatePair + 2;
  Tensor memory;
  Tensor loss_sum;  // f64, 0-d
  explicit ReplayInputs(Device device)
      : memory(Tensor::zeros({kWords}, DType::I64, device)), loss_sum(Tensor::zeros({}, DType::F64, device)) {}
  const uint64_t* philox_base() const { return reinterpret_cast<const uint64_t*>(memory.data<int64_t>()); }
  const optim::StepScalars* step_scalars() const {
    return reinterpret_cast<const optim::StepScalars*>(memory.data<int64_t>() + 1);
  }
  const double* grad_scale() const { return reinterpret_cast<const double*>(memory.data<int64_t>() + kGradScale); }
  // The loss weight as a 0-d tensor of the loss's dtype (f32 or f64) that views the memory.
  Tensor loss_weight(DType dtype) const {
    SRU_CHECK(dtype == DType::F32 || dtype == DType::F64, "a captured accumulated step needs an f32 or f64 loss, got ",
              dtype_name(dtype));
    return scalar_view(dtype == DType::F32 ? kLossWeightF32 : kLossWeightF64, dtype);
  }
  Tensor grad_scale_tensor() const { return scalar_view(kGradScale, DType::F64); }
  // [norm, factor] gated by the pair, the gate set to this step's verdict (captured in one-batch graphs).
  Tensor gated(const Tensor& norm_and_factor) const {
    autograd::NoGradGuard no_grad;
    const Tensor out = norm_and_factor * words_view(kGatePair, 2, DType::F64);
    Tensor gate = words_view(kGatePair + 1, 1, DType::F64);
    gate.copy_(out.narrow0(1, 1) * 0.0 + 1.0);
    return out;
  }
  enum class Gate { Open, FromDevice };
  // One host-to-device copy (queued, no host wait; a plain copy on the CPU). Gate::FromDevice leaves
  // the gate pair as the graph before wrote it.
  void write(uint64_t philox_start, const optim::StepScalars& scalars, double loss_weight = 1.0,
             double grad_scale = 1.0, Gate gate = Gate::Open) {
    Tensor host = Tensor::empty({kWords}, DType::I64);
    int64_t* words = host.data<int64_t>();
    std::memset(words, 0, static_cast<size_t>(host.nbytes()));
    std::memcpy(words, &philox_start, sizeof philox_start);
    std::memcpy(words + 1, &scalars, sizeof scalars);
    const float weight_f32 = static_cast<float>(loss_weight);
    std::memcpy(words + kLossWeightF32, &weight_f32, sizeof weight_f32);
    std::memcpy(words + kLossWeightF64, &loss_weight, sizeof loss_weight);
    std::memcpy(words + kGradScale, &grad_scale, sizeof grad_scale);
    const double open[2] = {1.0, 1.0};
    std::memcpy(words + kGatePair, open, sizeof open);
    if (gate == Gate::Open)
      memory.copy_(host);
    else
      memory.narrow0(0, kGatePair).copy_(host.narrow0(0, kGatePair));
  }

 private:
  // A 0-d tensor of `dtype` over the 8-byte word `word` of the memory (its first bytes).
  Tensor scalar_view(int64_t word, DType dtype) const {
    auto impl = std::make_shared<TensorImpl>();
    impl->storage = memory.impl()->storage;
    impl->offset = (memory.impl()->offset * 8 + word * 8) / static_cast<int64_t>(dtype_size(dtype));
    impl->dtype = dtype;
    return Tensor(std::move(impl));
  }
  // `n` consecutive 8-byte words from `word` as a 1-d tensor of an 8-byte `dtype`.
  Tensor words_view(int64_t word, int64_t n, DType dtype) const {
    Tensor t = scalar_view(word, dtype);
    t.impl()->shape = Shape{n};
    return t;
  }
};

// One batch shape's captured step: its graph and its outputs, which each replay writes again in place
// (a CUDA graph's; the twin's are new tensors each replay).
struct TrainingStep::Captured {
  std::unique_ptr<StepGraph> graph;
  Tensor loss, norm_and_factor;
  uint64_t draws = 0;  // how far a step advances the generator's counter
  bool draws_known = false;
};

// A replayed step launched, its loss and norm queued to be read (ScalarsReadLater).
struct TrainingStep::Launched {
  StepOutcome out;             // step, lr, tokens; votes once asked
  uint64_t offset_before = 0;  // the generator's counter before the replay (take_back sets it again)
  double loss = 0, norm = 0;   // filled by values->wait()
  std::unique_ptr<ScalarsReadLater> values;
  bool hooks_applied = false;  // the model's after-update hooks queued behind the replay (launching ahead)
};

// After kMaxFailedCaptures failed captures (train.cuda_graphs auto), no new graph key is tried.
constexpr size_t kMaxFailedCaptures = 3;

namespace {

// The keys of the graphs a step replays: a one-batch step's by its shape; an accumulated step's per
// batch (by shape: its batches all add to the gradients, train.accumulate) and its update's.
std::string step_key(const std::string& shape) { return "the step of shape " + shape; }
std::string batch_key(const std::string& shape) { return "a batch of an accumulated step of shape " + shape; }
const std::string kUpdateKey = "the update of an accumulated step";

// Whether parameter p's .grad is its flat place itself (nn/flat_parameters.h), as a backward pass leaves it.
bool gradient_in_flat_place(const Tensor& p) {
  return p.impl()->grad_home && p.grad().defined() && p.grad().impl() == p.impl()->grad_home;
}

// For the captured step's host code (and each piece of an accumulated one): the generator's counter
// and base, the optimiser's step count and in-memory scalars, and the parameters' .grad handles are left
// as they were found (also when a capture fails after its host code ran: an accumulated step's later
// batches and its update then run eagerly on the gradients summed so far), so that the runner advances
// the counts itself after each replay, alike for a CUDA graph (whose replays run no host code) and the
// CPU twin (whose replays run it all again). A .grad found in its flat place is put back as that place
// (no extra handle is held meanwhile: the engine's choices look at who holds a gradient).
class HostCountersRewind {
 public:
  HostCountersRewind(Generator& gen, optim::Optimizer& optimizer)
      : gen_(gen), optimizer_(optimizer), offset_(gen.offset()), steps_(optimizer.steps()) {
    for (const auto& [name, p] : optimizer.parameters()) {
      const Tensor g = p.grad();
      grads_.push_back(!g.defined() ? Found::None : gradient_in_flat_place(p) ? Found::Home : Found::Other);
      others_.push_back(grads_.back() == Found::Other ? g : Tensor());
    }
  }
  ~HostCountersRewind() {
    gen_.set_offset_base(nullptr);
    gen_.set_state(gen_.seed(), offset_);
    optimizer_.set_scalars_in_memory(nullptr);
    optimizer_.set_grad_scale_in_memory(nullptr);
    while (optimizer_.steps() > steps_) optimizer_.forget_step();
    const nn::NamedTensors& params = optimizer_.parameters();
    for (size_t k = 0; k < params.size(); ++k) {
      Tensor p = params[k].second;
      p.set_grad(grads_[k] == Found::Home ? Tensor(p.impl()->grad_home) : others_[k]);
    }
  }
  HostCountersRewind(const HostCountersRewind&) = delete;
  HostCountersRewind& operator=(const HostCountersRewind&) = delete;
  uint64_t draws() const { return gen_.offset() - offset_; }

 private:
  enum class Found { None, Home, Other };
  Generator& gen_;
  optim::Optimizer& optimizer_;
  uint64_t offset_;
  int64_t steps_;
  std::vector<Found> grads_;    // per parameter: what its .grad was
  std::vector<Tensor> others_;  // a .grad outside the flat place, held (none in a captured step's start)
};

}  // namespace

optim::ScheduleOptions schedule_options(const config::TrainConfig& train, int64_t model_size, int64_t total_steps) {
  return {train.schedule,   train.lr,    train.warmup_steps, train.decay_steps, train.decay_rate,
          train.min_lr,     model_size,  total_steps,        train.epochs_before_decay};
}

TrainingStep::TrainingStep(tasks::Task& task, optim::Optimizer& optimizer, const config::TrainConfig& train,
                           optim::ScheduleOptions schedule, dist::Communicator* comm)
    : task_(task),
      optimizer_(optimizer),
      clip_grad_norm_(train.clip_grad_norm),
      skip_nonfinite_(train.on_nonfinite == "skip"),
      schedule_(std::move(schedule)),
      comm_(comm) {
  if (comm_ && comm_->size() > 1)
    sync_ = std::make_unique<dist::GradientSync>(*comm_, optimizer_.parameters(), train.dist_bucket_mb, 2,
                                                 task_.model().flat_parameters());
  if (train.ema_decay > 0)
    ema_ = std::make_unique<WeightEma>(optimizer_.parameters(), train.ema_decay, train.ema_start_step, train.ema_warmup,
                                       task_.model().flat_parameters());
  if (const auto& flat = task_.model().flat_parameters()) shadows_ = std::make_unique<nn::WeightShadows>(flat);
  cuda_graphs_ = train.cuda_graphs;
  SRU_CHECK(cuda_graphs_ == "auto" || cuda_graphs_ == "on" || cuda_graphs_ == "off",
            "train.cuda_graphs must be auto, on or off, got '", cuda_graphs_, "'");
  SRU_CHECK(train.cuda_graphs_max >= 1, "train.cuda_graphs_max must be >= 1, got ", train.cuda_graphs_max);
  max_graphs_ = static_cast<size_t>(train.cuda_graphs_max);
  accumulate_ = train.accumulate;
  decide_launch_ahead(train.launch_ahead);
  if (cuda_graphs_ == "off") {
    SRU_CHECK(train.launch_ahead != "on", "train.launch_ahead: on, but train.cuda_graphs is off (only replayed steps "
              "are launched ahead)");
    return;
  }
  const Device device = task_.model().device();
  std::string why_eager;
  if (!device.is_cuda())
    why_eager = "the model is on " + device.str() + " (a CUDA graph replays GPU work)";
  else if (sync_)
    why_eager = "data-parallel training (the ranks' gradient sums are not captured)";
  else if (!task_.staged_steps())
    why_eager = "task " + task_.name() + " does not stage its steps (tasks::StagesSteps)";
  else if (const std::string why = task_.staged_steps()->why_not_staged(); !why.empty())
    why_eager = why;
  else if (!cuda::allocator_caches())
    why_eager = "SRU_CUDA_NO_CACHING=1 (a graph keeps its memory in the caching allocator's private pool)";
  SRU_CHECK(why_eager.empty() || cuda_graphs_ != "on", "train.cuda_graphs: on, but ", why_eager);
  SRU_CHECK(why_eager.empty() || train.launch_ahead != "on", "train.launch_ahead: on, but no step replays: ", why_eager);
  if (!why_eager.empty()) return;
  if (train.accumulate > 1) {
    why_accumulated_eager_ = why_not_accumulated();
    SRU_CHECK(why_accumulated_eager_.empty() || cuda_graphs_ != "on", "train.cuda_graphs: on, but ", why_accumulated_eager_);
    if (!why_accumulated_eager_.empty()) spdlog::info("train.cuda_graphs auto: {}", why_accumulated_eager_);
  }
  // One pool for the run's graphs (captured one after another, replayed one at a time on the stream).
  make_graph_ = [device, memory = step_graph_memory(device)] { return cuda_step_graph(device, memory); };
  replay_inputs_ = std::make_unique<ReplayInputs>(device);
  if (!why_not_ahead_.empty() && train.launch_ahead == "auto")
    spdlog::info("train.launch_ahead auto: {}, so each replayed step is read before the next is launched", why_not_ahead_);
}

TrainingStep::~TrainingStep() = default;

void TrainingStep::decide_launch_ahead(const std::string& key) {
  SRU_CHECK(key == "auto" || key == "on" || key == "off", "train.launch_ahead must be auto, on or off, got '", key, "'");
  if (ema_)
    why_not_ahead_ = "train.ema_decay averages the weights after each update, before the next step may start";
  else if (accumulate_ > 1)
    why_not_ahead_ = "train.accumulate > 1 (only steps of one batch are launched ahead)";
  SRU_CHECK(why_not_ahead_.empty() || key != "on", "train.launch_ahead: on, but ", why_not_ahead_);
  launch_ahead_ = key != "off" && why_not_ahead_.empty();
}

void TrainingStep::convert_weights_at_each_call() { shadows_.reset(); }

void TrainingStep::replay_through(std::function<std::unique_ptr<StepGraph>()> make_graph) {
  SRU_CHECK(task_.staged_steps() && !sync_, "replay_through: the task must stage its steps, in one process");
  make_graph_ = std::move(make_graph);
  replay_inputs_ = std::make_unique<ReplayInputs>(task_.model().device());
  why_accumulated_eager_ = why_not_accumulated();
}

std::string TrainingStep::why_not_accumulated() const {
  for (const auto& [name, p] : optimizer_.parameters())
    if (!p.impl()->grad_home)
      return "parameter " + name + " is not in flat storage (it shares its storage with another tensor), so steps of "
             "several batches (train.accumulate) are not captured";
  return "";
}

int64_t TrainingStep::replayed_steps() const { return replays_; }

int64_t steps_per_epoch(int64_t batches, int64_t accumulate) {
  SRU_CHECK(accumulate >= 1, "train.accumulate must be >= 1, got ", accumulate);
  return (batches + accumulate - 1) / accumulate;
}

int64_t batches_of_step(int64_t first, int64_t batches, int64_t accumulate) {
  SRU_CHECK(accumulate >= 1, "train.accumulate must be >= 1, got ", accumulate);
  return std::min(accumulate, batches - first);
}

TrainingStep::Backward TrainingStep::forward_backward(int64_t first, int64_t count, StepOutcome& out) {
  const nn::WeightShadows::Scope bf16_weights(shadows_.get());
  Tensor loss;  // the step's mean loss (this rank's, scaled as its gradients, in data-parallel training)
  double grad_scale = 1.0;
  if (count == 1) {
    const tasks::StepResult r = task_.forward_step(first);
    out.tokens = r.tokens;
    loss = r.loss;
    const auto overlap = sync_ ? sync_->begin(r.share) : nullptr;  // starts finished buckets during backward
    autograd::backward(r.loss);
  } else {
    // Accumulation: backward of w_i L_i per batch, w_i = this rank's share of batch i's loss terms
    // times their number (its terms, in one process); the summed gradients are then scaled by 1 / T,
    // T = all the step's terms (every rank's): by the ranks' sum, or in one process by the update (the
    // factor it multiplies each gradient by, grad_norm_and_clip_factor: no pass over the gradients here).
    // The loss is sum_i w_i L_i / T.
    int64_t terms = 0;
    for (int64_t i = 0; i < count; ++i) {
      const tasks::StepResult r = task_.forward_step(first + i);
      out.tokens += r.tokens;
      terms += r.loss_terms();
      const double w = r.share * static_cast<double>(r.loss_terms());
      {
        autograd::NoGradGuard no_grad;
        const Tensor weighted = r.loss.detach().to(DType::F64) * w;
        loss = i == 0 ? weighted : loss + weighted;
      }
      const double scale = terms > 0 ? 1.0 / static_cast<double>(terms) : 0.0;  // the mean over no terms is 0
      // The ranks' buckets start from the last batch's backward, when every gradient is summed here.
      std::unique_ptr<autograd::LeafGradientHookScope> overlap;
      if (sync_ && i == count - 1) overlap = sync_->begin(scale);
      autograd::backward(w == 1.0 ? r.loss : r.loss * w);
      if (!sync_ && i == count - 1) {
        autograd::NoGradGuard no_grad;
        loss = loss * scale;
        grad_scale = scale;
      }
    }
  }
  return {loss, grad_scale};
}

StepOutcome TrainingStep::run(int64_t first, int64_t count, int64_t step, int64_t epoch,
                              const std::function<StepVotes()>& votes) {
  SRU_CHECK(!launched_, "TrainingStep::run: step ", launched_ ? launched_->out.step : 0, " was launched by run_ahead "
            "and not read yet");
  return *start(first, count, step, epoch, votes, false);
}

std::vector<StepOutcome> TrainingStep::run_ahead(int64_t first, int64_t count, int64_t step, int64_t epoch,
                                                 const std::function<StepVotes()>& votes, bool may_stay_launched) {
  const bool ahead = may_stay_launched && launches_ahead() && count == 1;
  std::vector<StepOutcome> done;
  if (launched_) {
    std::unique_ptr<Launched> behind;
    if (ahead && epoch == plan_.epoch && replays_captured(first)) {
      // The handles the read step's end leaves (its replay ran no host code; the twin's runs backward).
      optimizer_.zero_grad();
      // Random states outside the Philox counters, as the step before leaves them (a copy queued behind
      // it), for take_back.
      random_states_before_.clear();
      for (const Tensor& state : task_.model().random_states()) random_states_before_.emplace_back(state, state.clone());
      behind = launch_replayed(first, step, epoch, /*gate_from_device=*/true);
    }
    const std::unique_ptr<Launched> previous = std::move(launched_);
    done.push_back(read(*previous));
    if (behind && done.back().kind != StepOutcome::Kind::Updated) {
      take_back(*behind);  // its update held itself; it runs again after the policy, below
      behind.reset();
    }
    if (done.back().kind == StepOutcome::Kind::NonFinite) return done;  // on_nonfinite stop: this step is not run
    if (behind) {
      if (std::optional<StepOutcome> now = settle(std::move(behind), votes, true)) done.push_back(std::move(*now));
      return done;
    }
  }
  if (std::optional<StepOutcome> now = start(first, count, step, epoch, votes, ahead)) done.push_back(std::move(*now));
  return done;
}

std::optional<StepOutcome> TrainingStep::settle(std::unique_ptr<Launched> launched,
                                                const std::function<StepVotes()>& votes, bool may_stay_launched) {
  launched->out.votes = votes ? votes() : StepVotes{};
  if (!may_stay_launched || launched->out.votes.stop || launched->out.votes.out_of_time) return read(*launched);
  launched_ = std::move(launched);
  ++left_launched_;
  return std::nullopt;
}

bool TrainingStep::replays_captured(int64_t index) {
  const std::optional<std::vector<std::string>> keys = graph_keys(index, 1, false);
  return keys && captured_.count(keys->front()) && ready_to_replay(*keys);  // (no counts change for a captured key)
}

void TrainingStep::take_back(const Launched& launched) {
  Generator& gen = task_.staged_steps()->step_generator();
  gen.set_state(gen.seed(), launched.offset_before);
  for (auto& [state, before] : random_states_before_) state.copy_(before);  // queued behind the step's replay
  optimizer_.forget_step();
  --replays_;
}

StepOutcome TrainingStep::read(Launched& launched) {
  launched.values->wait();
  return after_read(std::move(launched.out), launched.loss, launched.norm, launched.hooks_applied);
}

StepOutcome TrainingStep::after_read(StepOutcome out, double loss, double norm, bool hooks_applied) {
  out.loss = loss;
  out.grad_norm = std::isfinite(out.loss) ? norm : std::numeric_limits<double>::quiet_NaN();
  if (!(std::isfinite(out.loss) && std::isfinite(out.grad_norm))) return not_updated(std::move(out), true);
  const int64_t step = out.step;
  return updated(std::move(out), step, hooks_applied);
}

std::optional<StepOutcome> TrainingStep::start(int64_t first, int64_t count, int64_t step, int64_t epoch,
                                               const std::function<StepVotes()>& votes, bool may_stay_launched) {
  SRU_CHECK(count >= 1, "a training step needs at least one batch, got ", count);
  if (make_graph_) {
    if (epoch != plan_.epoch) plan_graphs(epoch, first);
    if (count > 1) {
      if (std::optional<StepOutcome> replayed = run_replayed_accumulated(first, count, step, epoch, votes)) {
        replayed->step = step;
        return replayed;
      }
    } else if (std::unique_ptr<Launched> launched = launch_replayed(first, step, epoch, false)) {
      return settle(std::move(launched), votes, may_stay_launched);
    }
  }
  StepOutcome out;
  out.step = step;
  out.lr = optim::learning_rate(schedule_, step, epoch);
  // Backward, clipping and (in one process) the update run before the loss is looked at, so that the
  // loss and the gradient norm come to the host together: the step's one host wait on a GPU. A
  // non-finite loss or norm makes the clip factor NaN, and the update then changes nothing.
  const Backward backward = forward_backward(first, count, out);
  const Tensor& loss = backward.loss;
  const StepVotes mine = votes ? votes() : StepVotes{};
  // What the step reads back, by name, with one host wait: the loss and the gradient norm, and in
  // data-parallel training the ranks' vote counts and their disagreement.
  double loss_value = 0, norm_value = 0, stop_votes = 0, out_of_time_votes = 0, disagreement = 0;
  std::vector<ScalarRead> reads;
  if (sync_) {
    // The sums over the ranks: gradients (each parameter's .grad now views its sum), loss, votes.
    const dist::GradientSync::Result sums = sync_->finish(loss, {mine.stop ? 1.0 : 0.0, mine.out_of_time ? 1.0 : 0.0});
    reads = {{sums.loss, &loss_value}, {sums.votes[0], &stop_votes}, {sums.votes[1], &out_of_time_votes},
             {sums.disagreement, &disagreement}};
  } else {
    reads = {{loss, &loss_value}};
  }
  // The norm and the clip factor (with accumulation's 1 / terms) stay on the device; the update applies
  // the factor (no scaling pass). One process: the update is issued before the host reads anything and
  // skips itself when the loss or the norm is not finite (the factor is NaN then), so the device never
  // waits for the host inside a step. Data parallel reads first: the ranks' disagreement must stop the
  // update.
  const Tensor norm_and_factor =
      optimizer_.grad_norm_and_clip_factor(clip_grad_norm_, backward.grad_scale, reads.front().value /* the loss */);
  const Tensor norm = norm_and_factor.narrow0(0, 1).view({});
  reads.push_back({norm, &norm_value});
  const bool update_first = !sync_;
  if (update_first) optimizer_.step(out.lr, norm_and_factor);
  if (sync_) comm_->await_device(norm.device());
  read_scalars(reads);
  out.loss = loss_value;
  out.grad_norm = std::isfinite(out.loss) ? norm_value : std::numeric_limits<double>::quiet_NaN();
  out.votes = mine;
  if (sync_) {
    out.votes = {stop_votes > 0, out_of_time_votes > 0};
    dist::check_collective(disagreement == 0, "data parallel: the ranks' backward passes reached different parameters "
                                              "(a parameter got a gradient on some ranks only), so their updates would differ");
  }
  if (!(std::isfinite(out.loss) && std::isfinite(out.grad_norm))) return not_updated(std::move(out), update_first);
  if (!update_first) optimizer_.step(out.lr, norm_and_factor);
  return updated(std::move(out), step);
}

StepOutcome TrainingStep::not_updated(StepOutcome out, bool update_issued) {
  // Never update with a non-finite value (the update skipped itself); a carried state may hold one too.
  if (update_issued) optimizer_.forget_step();
  optimizer_.zero_grad();
  out.nonfinite = std::isfinite(out.loss) ? "gradient norm" : "loss";
  out.kind = skip_nonfinite_ ? StepOutcome::Kind::Skipped : StepOutcome::Kind::NonFinite;
  if (skip_nonfinite_) task_.reset_carried_state();
  return out;
}

StepOutcome TrainingStep::updated(StepOutcome out, int64_t step, bool hooks_applied) {
  // e.g. gate clipping: after every update, before anything reads the weights
  if (!hooks_applied) task_.model().after_update();
  if (ema_) ema_->update(step);
  optimizer_.zero_grad();
  return out;
}

std::unique_ptr<TrainingStep::Launched> TrainingStep::launch_replayed(int64_t index, int64_t step, int64_t epoch,
                                                                      bool gate_from_device) {
  tasks::StagesSteps& staged = *task_.staged_steps();
  const std::optional<std::vector<std::string>> keys = graph_keys(index, 1, false);
  if (!keys || !ready_to_replay(*keys)) return nullptr;
  const std::string& key = keys->front();
  const tasks::StagedStep staged_step = staged.stage_step(index);
  Generator& gen = staged.step_generator();
  auto launched = std::make_unique<Launched>();
  StepOutcome& out = launched->out;
  out.step = step;
  out.lr = optim::learning_rate(schedule_, step, epoch);
  launched->offset_before = gen.offset();
  replay_inputs_->write(gen.offset(), optimizer_.scalars_of_step(out.lr, optimizer_.steps() + 1), 1.0, 1.0,
                        gate_from_device ? ReplayInputs::Gate::FromDevice : ReplayInputs::Gate::Open);
  Captured* c = graph_of(key, step, [this, &staged](Captured& made) { captured_step(staged, made); });
  if (!c) return nullptr;  // the staged step runs eagerly
  c->graph->replay();
  ++replays_;
  gen.set_state(gen.seed(), gen.offset() + c->draws);  // the replay's draws, counted on the host
  optimizer_.advance_step();                            // the update the replay applied, counted on the host
  out.tokens = staged_step.tokens;
  // Read later (the next replay of this graph writes its outputs again): queued behind this replay.
  launched->values = std::make_unique<ScalarsReadLater>(std::vector<ScalarRead>{
      {c->loss, &launched->loss}, {c->norm_and_factor.narrow0(0, 1).view({}), &launched->norm}});
  // Launching ahead, the hooks go right behind the replay, before the next step is launched, whatever
  // the update did: they are projections (nn::Module::on_after_update), which change nothing on weights
  // an update skipped.
  if (launch_ahead_) {
    task_.model().after_update();
    launched->hooks_applied = true;
  }
  return launched;
}

std::optional<std::vector<std::string>> step_graph_keys(const tasks::StagesSteps& staged, int64_t first, int64_t count,
                                                       bool planned) {
  std::vector<std::string> keys;
  for (int64_t i = 0; i < count; ++i) {
    const std::optional<std::string> shape = planned ? staged.planned_shape(first + i) : staged.staged_shape(first + i);
    if (!shape) return std::nullopt;
    keys.push_back(count == 1 ? step_key(*shape) : batch_key(*shape));
  }
  if (count > 1) keys.push_back(kUpdateKey);
  return keys;
}

TrainingStep::GraphPlan plan_graph_keys(const std::vector<std::vector<std::string>>& steps_keys, int64_t steps,
                                        size_t max_graphs, const std::set<std::string>& captured,
                                        const std::set<std::string>& failed) {
  TrainingStep::GraphPlan plan;
  plan.steps = steps;
  struct Count {
    int64_t batches = 0, first_seen = 0;
  };
  std::map<std::string, Count> counts;
  for (const std::vector<std::string>& keys : steps_keys)
    for (const std::string& key : keys) {
      const int64_t order = static_cast<int64_t>(counts.size());
      ++counts.try_emplace(key, Count{0, order}).first->second.batches;
    }
  // The keys with a graph keep it; the room left goes to the most frequent others (ties: the one met
  // first), not to keys whose capture failed.
  std::vector<std::pair<std::string, Count>> ranked;
  for (const auto& [key, count] : counts) {
    if (captured.count(key))
      plan.admitted.insert(key);
    else if (!failed.count(key))
      ranked.emplace_back(key, count);
  }
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    return a.second.batches != b.second.batches ? a.second.batches > b.second.batches
                                                : a.second.first_seen < b.second.first_seen;
  });
  const size_t room = max_graphs > captured.size() ? max_graphs - captured.size() : 0;
  for (size_t i = 0; i < ranked.size() && i < room; ++i) plan.admitted.insert(ranked[i].first);
  plan.keys = static_cast<int64_t>(counts.size());
  for (const std::vector<std::string>& keys : steps_keys)
    plan.covered_steps += std::all_of(keys.begin(), keys.end(), [&](const std::string& key) {
      return plan.admitted.count(key) > 0;
    });
  return plan;
}

std::optional<std::vector<std::string>> TrainingStep::graph_keys(int64_t first, int64_t count, bool planned) const {
  return step_graph_keys(*task_.staged_steps(), first, count, planned);
}

void TrainingStep::plan_graphs(int64_t epoch, int64_t from) {
  std::vector<std::vector<std::string>> stageable;  // the keys of each step that may replay
  const int64_t batches = task_.steps_per_epoch();
  int64_t steps = 0;
  for (int64_t first = from; first < batches; first += accumulate_, ++steps) {
    const int64_t count = batches_of_step(first, batches, accumulate_);
    if (count > 1 && !why_accumulated_eager_.empty()) continue;
    if (std::optional<std::vector<std::string>> keys = graph_keys(first, count, true)) stageable.push_back(std::move(*keys));
  }
  std::set<std::string> captured;
  for (const auto& [key, graph] : captured_) captured.insert(key);
  GraphPlan plan = plan_graph_keys(stageable, steps, max_graphs_, captured, failed_keys_);
  plan.epoch = epoch;
  const double covered =
      plan.steps > 0 ? 100.0 * static_cast<double>(plan.covered_steps) / static_cast<double>(plan.steps) : 0.0;
  const std::string hint = plan.covered_steps < static_cast<int64_t>(stageable.size())
                               ? "; a larger train.cuda_graphs_max covers more, and so do fewer batch shapes "
                                 "(data.pad_to_multiple; for translation data.length_buckets)"
                               : "";
  spdlog::log(plan_.epoch < 0 ? spdlog::level::info : spdlog::level::debug,
              "train.cuda_graphs: epoch {}'s {} steps (from batch {}) have {} graph keys (batch shapes); {} of them "
              "have or may get a graph (train.cuda_graphs_max {}), covering {:.1f}% of the steps{}", epoch + 1,
              plan.steps, from, plan.keys, plan.admitted.size(), max_graphs_, covered, hint);
  plan_ = std::move(plan);
}

bool TrainingStep::ready_to_replay(const std::vector<std::string>& keys) {
  // Keys outside the epoch's plan (and not captured before) run eagerly, and so do failed ones.
  for (const std::string& key : keys)
    if (failed_keys_.count(key) || (!captured_.count(key) && !plan_.admitted.count(key))) return false;
  // A key's first step runs eagerly, unstaged: its warm-up (cuBLAS plans, the allocator's cache).
  bool warm = true;
  size_t new_graphs = 0;
  for (const std::string& key : std::set<std::string>(keys.begin(), keys.end())) {
    if (captured_.count(key)) continue;
    warm = seen_keys_[key]++ > 0 && warm;
    ++new_graphs;
  }
  if (new_graphs == 0) return true;
  return warm && captured_.size() + new_graphs <= max_graphs_ && failed_keys_.size() < kMaxFailedCaptures;
}

TrainingStep::Captured* TrainingStep::graph_of(const std::string& key, int64_t step,
                                              std::function<void(Captured&)> body) {
  if (const auto found = captured_.find(key); found != captured_.end()) return found->second.get();
  auto c = std::make_unique<Captured>();
  const uint64_t dispatches_before = kernel_dispatches();
  try {
    c->graph = make_graph_();
    Captured& made = *c;
    // (The twin keeps the function for its replays: body is moved into it.)
    c->graph->capture([body = std::move(body), &made] { body(made); });
  } catch (const Error& e) {
    if (cuda_graphs_ == "on") throw;
    // auto: this key's steps run eagerly; after a few failures no new key is tried (the graphs
    // captured so far keep replaying).
    failed_keys_.insert(key);
    spdlog::warn("train.cuda_graphs auto: {} could not be captured, so its steps run eagerly{}: {}", key,
                 failed_keys_.size() < kMaxFailedCaptures ? "" : " (and nothing else is tried)", e.what());
    return nullptr;
  }
  // (A CUDA graph's capture runs the host code, dispatching its kernels into the graph; the CPU twin's
  // runs at each replay.)
  spdlog::info("train.cuda_graphs: {} is captured at step {} ({} kernel dispatches into the graph); its steps "
               "replay it", key, step, kernel_dispatches() - dispatches_before);
  return (captured_[key] = std::move(c)).get();
}

StepOutcome TrainingStep::replayed_update(StepOutcome out, const Captured& c, int64_t step,
                                          const std::function<StepVotes()>& votes) {
  optimizer_.advance_step();  // the update the replay applied, counted on the host
  out.votes = votes ? votes() : StepVotes{};
  double loss_value = 0, norm_value = 0;
  read_scalars({{c.loss, &loss_value}, {c.norm_and_factor.narrow0(0, 1).view({}), &norm_value}});
  out.step = step;
  return after_read(std::move(out), loss_value, norm_value, false);
}

void TrainingStep::captured_step(tasks::StagesSteps& staged, Captured& c) {
  Generator& gen = staged.step_generator();
  const HostCountersRewind rewind(gen, optimizer_);
  gen.set_offset_base(replay_inputs_->philox_base());
  optimizer_.set_scalars_in_memory(replay_inputs_->step_scalars());
  const cuda::CallerCheckedInputs staged_ids_checked;
  Tensor loss;
  {
    const nn::WeightShadows::Scope bf16_weights(shadows_.get());  // forward and backward, not the update
    loss = staged.forward_staged().loss;
    autograd::backward(loss);
  }
  Tensor norm_and_factor = optimizer_.grad_norm_and_clip_factor(clip_grad_norm_, 1.0, loss);
  if (launch_ahead_) norm_and_factor = replay_inputs_->gated(norm_and_factor);  // see ReplayInputs
  optimizer_.step(0.0 /* the learning rate comes from memory */, norm_and_factor);
  c.loss = loss.detach();
  c.norm_and_factor = norm_and_factor;
  record_draws(c, rewind.draws());
}

void TrainingStep::record_draws(Captured& c, uint64_t draws) {
  SRU_CHECK(!c.draws_known || draws == c.draws, "the captured training step drew ", draws,
            " Philox blocks where its capture drew ", c.draws, ": its random numbers depend on more than its shapes");
  c.draws = draws;
  c.draws_known = true;
}

// ---- accumulated steps (train.accumulate > 1) ----
// The step starts from zeroed gradients in their flat places and a zero loss sum
// (start_accumulated_gradients). Batch i of T_i loss terms: the staged forward, then (accumulated_batch)
// the loss sum S += T_i L_i (f64) and backward of L_i seeded with T_i (as backward of T_i L_i: the
// gradients add up in .grad), with T_i read from memory. Every batch adds, the first too, so a batch's
// graph depends on its shape only: one graph per batch shape, whatever the batch's place in its step
// (half the graphs of a graph for first batches and one for later ones, so that train.cuda_graphs_max
// covers twice the shapes). Then one graph for the update: loss S / T and the norm and clip factor with
// grad_scale 1 / T (both read from memory), and the optimiser's step. The values of forward_backward's
// accumulation followed by run()'s update, which writes a step's first gradients where these add them to
// zeros (0 + g is g but for -0, which reads +0: a difference an update shows only where the parameter
// or a moment it adds to is itself zero; the tests find the two equal to the bit).

namespace {
// The factor that makes the summed gradients of `terms` loss terms their mean's (the mean over no
// terms is 0, as forward_backward has it).
double inverse_terms(int64_t terms) { return terms > 0 ? 1.0 / static_cast<double>(terms) : 0.0; }
}  // namespace

std::optional<StepOutcome> TrainingStep::run_replayed_accumulated(int64_t first, int64_t count, int64_t step,
                                                                  int64_t epoch, const std::function<StepVotes()>& votes) {
  if (!why_accumulated_eager_.empty()) return std::nullopt;
  tasks::StagesSteps& staged = *task_.staged_steps();
  const std::optional<std::vector<std::string>> step_keys = graph_keys(first, count, false);
  if (!step_keys || !ready_to_replay(*step_keys)) return std::nullopt;
  const std::vector<std::string>& keys = *step_keys;
  Generator& gen = staged.step_generator();
  StepOutcome out;
  out.lr = optim::learning_rate(schedule_, step, epoch);
  const optim::StepScalars scalars = optimizer_.scalars_of_step(out.lr, optimizer_.steps() + 1);
  int64_t terms = 0;
  bool all_replayed = true;
  start_accumulated_gradients();
  for (int64_t i = 0; i < count; ++i) {
    if (all_replayed) {
      const tasks::StagedStep s = staged.stage_step(first + i);
      const int64_t weight = s.loss_terms();
      replay_inputs_->write(gen.offset(), scalars, static_cast<double>(weight), inverse_terms(terms + weight));
      Captured* c = graph_of(keys[i], step, [this, &staged](Captured& made) { captured_batch(staged, made); });
      if (c) {
        c->graph->replay();
        gen.set_state(gen.seed(), gen.offset() + c->draws);
        keep_gradients_in_place();
        out.tokens += s.tokens;
        terms += weight;
        continue;
      }
      // Its capture failed. As the step's first batch: the whole step runs as an eager one (from no
      // gradients: a parameter no batch reaches then gets none, where the zeroed start would give it a
      // zero one that the update would decay). Later: every batch replayed so far reached every
      // parameter (captured_batch), so this batch and the rest run eagerly, unstaged, adding to them.
      if (i == 0) {
        optimizer_.zero_grad();
        return std::nullopt;
      }
      all_replayed = false;
    }
    const nn::WeightShadows::Scope bf16_weights(shadows_.get());
    const tasks::StepResult r = task_.forward_step(first + i);
    out.tokens += r.tokens;
    terms += r.loss_terms();
    replay_inputs_->write(gen.offset(), scalars, static_cast<double>(r.loss_terms()), inverse_terms(terms));
    accumulated_batch(r.loss);
  }
  Captured eager;  // the update's outputs when its capture failed: its function then runs as it is
  Captured* update = graph_of(kUpdateKey, step, [this](Captured& made) { captured_update(made); });
  if (update) {
    update->graph->replay();
    if (all_replayed) ++replays_;
  } else {
    captured_update(*(update = &eager));
  }
  return replayed_update(std::move(out), *update, step, votes);
}

void TrainingStep::start_accumulated_gradients() {
  if (const std::shared_ptr<nn::FlatParameters>& flat = task_.model().flat_parameters()) {
    for (const nn::FlatParameters::Group& group : flat->groups()) {
      Tensor gradients = group.gradients;
      gradients.zero_();
    }
  }
  keep_gradients_in_place();
  if (replay_inputs_) replay_inputs_->loss_sum.zero_();
}

void TrainingStep::accumulated_batch(const Tensor& loss) {
  {
    autograd::NoGradGuard no_grad;
    replay_inputs_->loss_sum.add_(loss.detach().to(DType::F64) * replay_inputs_->loss_weight(DType::F64));
  }
  autograd::backward(loss, replay_inputs_->loss_weight(loss.dtype()));
}

void TrainingStep::captured_batch(tasks::StagesSteps& staged, Captured& c) {
  Generator& gen = staged.step_generator();
  const HostCountersRewind rewind(gen, optimizer_);
  gen.set_offset_base(replay_inputs_->philox_base());
  const cuda::CallerCheckedInputs staged_ids_checked;
  const nn::WeightShadows::Scope bf16_weights(shadows_.get());
  const tasks::StepResult r = staged.forward_staged();
  std::set<const TensorImpl*> reached;  // the parameters this batch's backward sends a gradient
  {
    const autograd::LeafGradientHookScope record([&reached](const Tensor& leaf) { reached.insert(leaf.impl().get()); });
    accumulated_batch(r.loss);
  }
  // Every batch's graph and the update's are captured with every gradient in its flat place
  // (start_accumulated_gradients, keep_gradients_in_place), which the step zeroed first: a batch must
  // reach every parameter, or a parameter an eager step leaves without a gradient would get a zero one.
  for (const auto& [name, p] : optimizer_.parameters())
    SRU_CHECK(reached.count(p.impl().get()) && gradient_in_flat_place(p), "parameter ", name, " got no gradient "
              "in its flat place from a batch (a captured accumulated step needs every batch to reach every "
              "parameter, in flat storage)");
  record_draws(c, rewind.draws());
}

void TrainingStep::keep_gradients_in_place() {
  for (const auto& [name, p] : optimizer_.parameters()) {
    Tensor parameter = p;
    parameter.set_grad(Tensor(p.impl()->grad_home));
  }
}

void TrainingStep::captured_update(Captured& c) {
  Generator& gen = task_.staged_steps()->step_generator();
  const HostCountersRewind rewind(gen, optimizer_);
  optimizer_.set_scalars_in_memory(replay_inputs_->step_scalars());
  optimizer_.set_grad_scale_in_memory(replay_inputs_->grad_scale());
  Tensor loss;
  {
    autograd::NoGradGuard no_grad;
    loss = replay_inputs_->loss_sum * replay_inputs_->grad_scale_tensor();
  }
  const Tensor norm_and_factor = optimizer_.grad_norm_and_clip_factor(clip_grad_norm_, 1.0 /* from memory */, loss);
  optimizer_.step(0.0 /* the learning rate comes from memory */, norm_and_factor);
  c.loss = loss;
  c.norm_and_factor = norm_and_factor;
}

}  // namespace sru::train
