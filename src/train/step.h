// One training step — forward, loss, backward, the non-finite policy, gradient clipping, the
// optimiser update at the scheduled learning rate, the model's after-update hooks (nn::Module::
// after_update), the moving average of the weights (train.ema_decay, train/ema.h) — shared by srutrain's loop, srubench train-epoch and the tests, so that all three
// train the same way.
// Gradient accumulation (train.accumulate): one step (one optimiser update) may run forward and
// backward on several training batches. Batch i's mean loss L_i over its T_i loss terms
// (StepResult::loss_terms) enters weighted by T_i / sum_j T_j — fairseq's sum over the terms divided
// by their number — so the update is the one step on the union of the batches' loss terms would
// take: backward of T_i L_i for each batch (the gradients add up in .grad), then the gradients are
// scaled by 1 / sum_j T_j once. Clipping, the non-finite policy, the optimiser and the after-update
// hooks run once per step, after the last batch; the reported loss is the same weighted mean.
// Data parallel (a communicator of more than one rank): each rank runs forward and backward on its rows
// of the global batch, and the gradients, the loss and the step's votes are summed over the ranks
// (dist::GradientSync) before clipping, so every rank takes the same update. With accumulation each
// rank sums its batches' gradients locally and the ranks sum once per step, after the last batch.
// CUDA graphs (train.cuda_graphs): on a GPU, in one process, a task that stages its
// steps (tasks::StagesSteps) has its step captured once, after an eager one: the staged forward,
// backward, the norm and clip factor, and the update, as one graph, which each later step of the same
// shapes replays with one launch after copying its inputs into the static tensors and the step's
// [Philox base, optimiser scalars] into memory the replay reads. The host then advances the generator
// by the step's draws and the optimiser's count, reads loss and norm (the one host wait), and runs the
// after-update hooks and the weight average eagerly; the result is the eager step's. A step of several
// batches (train.accumulate) replays a graph per batch, each adding its weighted gradients in place,
// the weights and 1 / terms read from memory (the step's gradients start zeroed, so that a batch's graph
// depends only on its shape), then one graph for the update.
// Under bf16 precision every forward and backward (eager, captured or accumulated) runs inside
// nn::WeightShadows::Scope: the float32 weights converted to bf16 in one dispatch a step, the products'
// casts reading those copies.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "config/config.h"
#include "dist/grad_sync.h"
#include "nn/weight_shadows.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "tasks/task.h"
#include "train/ema.h"
#include "train/step_graph.h"

namespace sru::train {

// What a rank asks of a step's end: stop (Ctrl-C, SIGTERM) or out of time (train.max_seconds). Read
// after backward; in data-parallel training a vote of any rank holds for all, so they stop together.
struct StepVotes {
  bool stop = false;
  bool out_of_time = false;
};

struct StepOutcome {
  enum class Kind {
    Updated,    // the optimiser took the step
    Skipped,    // non-finite loss or gradient with train.on_nonfinite skip: no update, carried state reset
    NonFinite,  // non-finite with train.on_nonfinite stop: no update; the caller stops
  };
  Kind kind = Kind::Updated;
  double loss = 0, grad_norm = 0, lr = 0;  // loss: the mean over the step's batches (weighted by their terms)
  int64_t tokens = 0;                      // the step's batches' tokens
  std::string nonfinite;  // "loss" or "gradient norm" when not Updated
  StepVotes votes;        // any rank's
  int64_t step = 0;       // the step (1-based) this is the outcome of
};

// The schedule train.* describes for a model of size model_size trained for total_steps steps.
optim::ScheduleOptions schedule_options(const config::TrainConfig& train, int64_t model_size, int64_t total_steps);

// Steps (optimiser updates) in an epoch of `batches` training batches, `accumulate` batches per step;
// the epoch's last step takes the batches left (fewer when accumulate does not divide them).
int64_t steps_per_epoch(int64_t batches, int64_t accumulate);
// The batches of the step that starts at batch `first` of an epoch of `batches` batches.
int64_t batches_of_step(int64_t first, int64_t batches, int64_t accumulate);

class TrainingStep {
 public:
  // comm: the ranks of a data-parallel run (null or one rank: a single process).
  TrainingStep(tasks::Task& task, optim::Optimizer& optimizer, const config::TrainConfig& train,
               optim::ScheduleOptions schedule, dist::Communicator* comm = nullptr);
  // Takes optimiser step number `step` (1-based: the step being taken, which the schedule reads) in
  // epoch `epoch` (0-based) on the task's training batches first, ..., first + count - 1 of that epoch
  // (count >= 1; the caller groups them, batches_of_step). `votes` is asked after the last backward.
  StepOutcome run(int64_t first, int64_t count, int64_t step, int64_t epoch,
                  const std::function<StepVotes()>& votes = {});
  // One batch per step: batch `index`.
  StepOutcome run(int64_t index, int64_t step, int64_t epoch, const std::function<StepVotes()>& votes = {}) {
    return run(index, 1, step, epoch, votes);
  }
  // Launching ahead (train.launch_ahead): run() for a loop that may leave a step launched and unread.
  // With may_stay_launched, a replayed one-batch step is launched and left unread (its votes, asked at
  // once, not set); the next call launches its step behind it before reading it, so that the GPU does not
  // idle while the host reads values and stages a batch. Returns the outcomes read during the call, in
  // order: the step the previous call left launched, if any, then this step unless it stays launched.
  // Behind a non-finite step the step launched after it held its update on the device (the step's clip
  // factor times the one before it's verdict); it is taken back (the generator's counter and the
  // optimiser's count) and, under on_nonfinite skip, runs again once the policy has acted, as the eager
  // loop would run it; under stop it does not run (the last outcome is then NonFinite). Same results as
  // run() step by step. Leave no step launched before anything that reads the weights (evaluation,
  // checkpoints) or ends an epoch: call with may_stay_launched false there.
  std::vector<StepOutcome> run_ahead(int64_t first, int64_t count, int64_t step, int64_t epoch,
                                     const std::function<StepVotes()>& votes, bool may_stay_launched);
  // A step launched by run_ahead and not read yet.
  bool has_launched_step() const { return launched_ != nullptr; }
  // Whether run_ahead can leave steps launched: train.launch_ahead allows it and steps replay.
  bool launches_ahead() const { return launch_ahead_ && make_graph_ != nullptr; }
  // Steps run_ahead has left launched across a call so far.
  int64_t steps_left_launched() const { return left_launched_; }
  // The moving average of the weights, updated after every update (null with train.ema_decay 0).
  WeightEma* ema() { return ema_.get(); }
  // Replays the captured step through the CPU twin of a CUDA graph (step_graph.h host_step_graph) on
  // whatever device the model is: tests of the captured step's bookkeeping on a machine without a GPU.
  // Call before the first step; the task must stage steps (tasks::StagesSteps), in one process.
  void replay_on_the_host() { replay_through(host_step_graph); }
  // Under bf16, every product converts its weight at its call, as before nn::WeightShadows: the
  // comparison the tests make (the same steps to the bit, more dispatches).
  void convert_weights_at_each_call();
  // The same with the graphs make_graph returns (tests: a graph whose capture fails).
  void replay_through(std::function<std::unique_ptr<StepGraph>()> make_graph);
  // Steps taken by replaying the captured step (train.cuda_graphs) so far.
  int64_t replayed_steps() const;
  // The plan of the run's graphs for the latest epoch (train.cuda_graphs): its steps' graph keys,
  // counted by the batches that need them before the epoch's first step; the keys with a graph keep
  // it, and the room left of train.cuda_graphs_max goes to the most frequent others (a key outside the
  // plan runs eagerly; graphs are kept for the run, so once the room is used the first epochs' shapes
  // keep it).
  struct GraphPlan {
    int64_t epoch = -1;
    int64_t steps = 0;          // the epoch's steps from its first batch run (a resumed epoch's from there)
    int64_t keys = 0;           // the distinct graph keys of those that may replay
    int64_t covered_steps = 0;  // steps whose every key is admitted
    std::set<std::string> admitted;  // keys with a graph, or room for one
  };
  const GraphPlan& graph_plan() const { return plan_; }
  // The graph keys whose capture failed (train.cuda_graphs auto): their steps run eagerly.
  const std::set<std::string>& failed_graph_keys() const { return failed_keys_; }
  ~TrainingStep();

 private:
  // What forward_backward leaves: the step's loss on the device (the mean over every loss term), and the
  // factor that turns the summed gradients into that mean's (1 / terms after accumulation in one
  // process, applied by the update; 1 when the gradients already are the mean's).
  struct Backward {
    Tensor loss;
    double grad_scale = 1.0;
  };
  // Forward and backward of the step's `count` batches from `first` (accumulated); adds the batches'
  // tokens to out.tokens.
  Backward forward_backward(int64_t first, int64_t count, StepOutcome& out);
  // The end of a step whose loss and norm were read into out: the update's after-effects (hooks, the
  // weight average, the gradients dropped), or the non-finite policy (update_issued: the optimiser
  // already took the step, which skipped itself, and its count is taken back).
  // hooks_applied: the model's after-update hooks ran already (queued behind a replay launched ahead).
  StepOutcome updated(StepOutcome out, int64_t step, bool hooks_applied = false);
  StepOutcome not_updated(StepOutcome out, bool update_issued);
  // The end of an issued step (out.step) whose loss and norm were read: updated() or not_updated().
  StepOutcome after_read(StepOutcome out, double loss, double norm, bool hooks_applied);
  // run() and run_ahead()'s one step: nothing when it stays launched (may_stay_launched, launched_).
  std::optional<StepOutcome> start(int64_t first, int64_t count, int64_t step, int64_t epoch,
                                   const std::function<StepVotes()>& votes, bool may_stay_launched);
  // Captured steps (train.cuda_graphs; see step.cpp): step `index` launched by a replay of its shape's
  // graph, capturing it first when its shape ran eagerly once before, its loss and norm queued to be
  // read; null when the step runs eagerly (not stageable, a shape's first step, a key outside the plan
  // or past train.cuda_graphs_max, or its capture failed under auto). gate_from_device: the update waits
  // for the verdict the graph before it left on the device (launched behind an unread step).
  struct Launched;
  std::unique_ptr<Launched> launch_replayed(int64_t index, int64_t step, int64_t epoch, bool gate_from_device);
  StepOutcome read(Launched& launched);
  // Whether step `index` replays a graph captured already (it can be launched behind an unread step).
  bool replays_captured(int64_t index);
  // Undoes the host's counts of a launched step whose update held itself (behind a non-finite step), and
  // puts back the model's random states it advanced (random_states_before_).
  void take_back(const Launched& launched);
  // A step just launched: its votes asked, then read at once (when it may not stay launched, or its votes
  // stop the run), or left launched (launched_; nothing returned).
  std::optional<StepOutcome> settle(std::unique_ptr<Launched> launched, const std::function<StepVotes()>& votes,
                                    bool may_stay_launched);
  // The same for a step of `count` > 1 batches (train.accumulate): a graph per batch shape and one for
  // the update.
  std::optional<StepOutcome> run_replayed_accumulated(int64_t first, int64_t count, int64_t step, int64_t epoch,
                                                      const std::function<StepVotes()>& votes);
  struct Captured;
  // The graph keys of the step of `count` batches from `first` (by the tasks' staged_shape, or with
  // `planned` their planned_shape); nothing when a batch is not stageable.
  std::optional<std::vector<std::string>> graph_keys(int64_t first, int64_t count, bool planned) const;
  // The plan of epoch `epoch`'s graphs (plan_), before its first step, which starts at batch `from` (a
  // resumed epoch starts later).
  void plan_graphs(int64_t epoch, int64_t from);
  // Whether a step whose graphs have these keys replays: each captured, or run eagerly once before (its
  // warm-up; counted here) and within the limits on graphs and failed captures.
  bool ready_to_replay(const std::vector<std::string>& keys);
  // The graph of `key`, capturing body first if there is none yet (at step `step`); null when the
  // capture failed under auto (its steps then run eagerly).
  Captured* graph_of(const std::string& key, int64_t step, std::function<void(Captured&)> body);
  // After a replay of c: the update counted, loss and norm read, hooks or the non-finite policy.
  StepOutcome replayed_update(StepOutcome out, const Captured& c, int64_t step, const std::function<StepVotes()>& votes);
  // The work the replays repeat: a one-batch step; an accumulated step's batch (its forward staged, or
  // given) and its update.
  void captured_step(tasks::StagesSteps& staged, Captured& c);
  void captured_batch(tasks::StagesSteps& staged, Captured& c);
  void accumulated_batch(const Tensor& loss);
  // An accumulated step's start, in one process: every flat gradient zeroed in its place (a fill a
  // group) and .grad pointing there, and the loss sum zeroed, so that every batch adds to them.
  void start_accumulated_gradients();
  void captured_update(Captured& c);
  void record_draws(Captured& c, uint64_t draws);
  // Every parameter's .grad set to its flat place, as a batch's backward leaves it (a replay runs no host code).
  void keep_gradients_in_place();
  // Sets launch_ahead_ from train.launch_ahead (an error for on where it cannot be).
  void decide_launch_ahead(const std::string& key);
  // Why steps of several batches run eagerly whatever their shapes ("" when they can be captured).
  std::string why_not_accumulated() const;
  std::string why_accumulated_eager_;
  struct ReplayInputs;
  tasks::Task& task_;
  optim::Optimizer& optimizer_;
  double clip_grad_norm_;
  bool skip_nonfinite_;
  optim::ScheduleOptions schedule_;
  dist::Communicator* comm_;
  std::unique_ptr<dist::GradientSync> sync_;  // data parallel only
  std::unique_ptr<WeightEma> ema_;
  std::unique_ptr<nn::WeightShadows> shadows_;  // the bf16 weights of a step (null: parameters not flat)
  std::string cuda_graphs_;  // train.cuda_graphs
  bool launch_ahead_ = false;  // train.launch_ahead allows it (the one-batch graphs carry the update's gate)
  std::string why_not_ahead_;  // why train.launch_ahead cannot ("" when it can)
  std::unique_ptr<Launched> launched_;  // run_ahead's step launched and not read yet
  // The model's random states (nn::Module::random_states: cuDNN's dropout states) and their copies,
  // made before a step is launched behind an unread one; take_back puts them back.
  std::vector<std::pair<Tensor, Tensor>> random_states_before_;
  int64_t left_launched_ = 0;
  size_t max_graphs_ = 64;   // train.cuda_graphs_max
  int64_t accumulate_ = 1;   // train.accumulate: how the trainer groups an epoch's batches into steps
  GraphPlan plan_;
  // Null: every step eager. Else a graph for a batch shape: a CUDA graph, or the CPU twin.
  std::function<std::unique_ptr<StepGraph>()> make_graph_;
  std::unique_ptr<ReplayInputs> replay_inputs_;  // what every graph's replay reads from memory
  // Graphs by key (graph_of: a batch shape, tasks::StagedStep, and the piece of a step).
  std::map<std::string, std::unique_ptr<Captured>> captured_;
  std::map<std::string, int64_t> seen_keys_;  // steps of a key not captured yet, run eagerly: the first is its warm-up
  std::set<std::string> failed_keys_;         // keys whose capture failed (auto): their steps run eagerly
  int64_t replays_ = 0;
};

// The graph keys of the step of `count` batches from `first` (TrainingStep's: by the task's staged_shape,
// or with `planned` its planned_shape): a one-batch step's shape, or each batch's and the update's;
// nothing when a batch is not stageable.
std::optional<std::vector<std::string>> step_graph_keys(const tasks::StagesSteps& staged, int64_t first, int64_t count,
                                                       bool planned);
// The plan of an epoch of `steps` steps whose stageable ones have the graph keys `steps_keys`: the keys
// in `captured` keep their graph, the room left of max_graphs goes to the most frequent others (ties:
// the one met first) save those in `failed`; covered_steps counts the steps whose every key is admitted.
// TrainingStep plans each epoch so (train.cuda_graphs_max); srubench batch-shapes shows a config's plan.
TrainingStep::GraphPlan plan_graph_keys(const std::vector<std::vector<std::string>>& steps_keys, int64_t steps,
                                        size_t max_graphs, const std::set<std::string>& captured = {},
                                        const std::set<std::string>& failed = {});

}  // namespace sru::train
