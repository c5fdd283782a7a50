// Data-parallel gradient averaging for the shared training step (train/step.h), on any communicator.
//
// The trainable gradients, in reverse parameter order (the order backward finishes them), are packed
// into flat buckets of about bucket_mb MiB each (0 = one bucket) and summed over the ranks with one
// all-reduce per bucket. A rank's gradient enters scaled by its share of the global batch's loss
// terms (tasks::StepResult::share: its predictions over the whole batch's), so the sum is the gradient
// of the global batch's mean loss even when the shares differ (the last, short batch of a classifier).
// The last bucket also carries the rank's share of the loss, the step's votes (e.g. "stop": any rank's
// Ctrl-C stops every rank after the same step) and one flag per parameter (did backward reach it), so
// when everything fits one bucket a step makes exactly one all-reduce.
//
// Overlap: buckets but the last are started from the backward pass as soon as their gradients are
// complete (autograd's LeafGradientHook), always in bucket order so that every rank starts the same
// sums in the same order; on a GPU with NCCL those sums run beside the rest of backward. The last
// bucket starts in finish(), when its loss and votes are known.
//
// Gradient accumulation (train.accumulate, train/step.h): each rank sums its batches' gradients in
// .grad first, each batch weighted by its loss terms; begin() comes before the last batch's backward
// with the factor 1 / (the step's terms over all ranks), so the ranks still sum once per step.
//
// Flat gradients (nn/flat_parameters.h: the model's parameters laid out in one buffer, as make_optimizer
// does): the buckets are ranges of the flat gradient buffer itself, widened by a head that holds the
// loss, votes and flags and rides with the last bucket (the first parameters), so backward writes every
// gradient where it is summed: no packing copy, and a rank's share is one multiply per bucket. After
// finish() the .grad are the flat places again, for the optimiser's one-call update. Otherwise each
// gradient is copied into its bucket (and scaled there).
//
// After finish() each parameter's .grad is a view of its summed segment (clipping and the optimiser
// use it in place), or none when this rank's backward did not reach it — what one process would have.
// Every rank must agree on that: the flags' sum is in `disagreement` (0 when they do), which the step
// reads with the loss.
#pragma once

#include <memory>
#include <unordered_map>
#include <vector>

#include "autograd/node.h"
#include "dist/communicator.h"
#include "nn/module.h"

namespace sru::dist {

class GradientSync {
 public:
  // params: the optimiser's trainable parameters (one dtype, one device); `votes`: how many votes a
  // step carries; flat: the model's flat layout (Module::flat_parameters), null for none: used when its
  // one group holds exactly params.
  GradientSync(Communicator& comm, const nn::NamedTensors& params, double bucket_mb, int votes,
               const std::shared_ptr<nn::FlatParameters>& flat = nullptr);

  // Before backward: this rank's share of the global batch's loss terms (with accumulation: the factor
  // its summed gradients and loss enter with). Keep the returned scope alive for the backward pass (it
  // starts buckets as they complete; null when there is one bucket).
  std::unique_ptr<autograd::LeafGradientHookScope> begin(double share);

  struct Result {
    Tensor loss;                // the global batch's mean loss (one element, on the parameters' device)
    std::vector<Tensor> votes;  // each vote summed over the ranks (how many ranks voted 1)
    Tensor disagreement;        // 0 when every rank's backward reached the same parameters
  };
  // After backward: starts what is left, waits for every sum, and points each parameter's .grad at its
  // summed segment. `loss`: this rank's mean loss (scaled by the factor of begin() like the gradients);
  // `votes`: this rank's votes (0 or 1 each).
  Result finish(const Tensor& loss, const std::vector<double>& votes);

  int64_t buckets() const { return static_cast<int64_t>(buckets_.size()); }
  // Whether the buckets are the flat gradient buffer (no packing copies).
  bool flat() const { return flat_; }

 private:
  struct Bucket {
    std::vector<int> params;  // indices into params_
    Tensor buffer;            // what one all-reduce sums
    Tensor gradients;         // the part of buffer that holds gradients (flat: scaled by the share at start)
    int ready = 0;
  };
  // Assigns params (reverse order) to buckets of about `limit` bytes (0: one bucket).
  void plan_buckets(int64_t limit);
  void lay_out_packed();
  void lay_out_flat(nn::FlatParameters& flat);
  void on_gradient(const Tensor& leaf);
  void pack(int param);
  void start(int bucket);

  Communicator& comm_;
  nn::NamedTensors params_;
  int votes_;
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_;
  std::vector<Tensor> segments_;  // per parameter: its place in its bucket's buffer
  Tensor extras_;                 // the loss, the votes, one flag per parameter: summed with the last bucket
  bool flat_ = false;
  std::unordered_map<const void*, int> index_of_;  // parameter TensorImpl -> index
  std::vector<bool> packed_, reached_;
  int started_ = 0;
  double share_ = 1.0;
};

}  // namespace sru::dist
