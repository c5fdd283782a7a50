// Module: the base of every model part. It owns named parameters (trainable or frozen) and buffers,
// and child modules; names nest with dots ("rnn.rnn_lst.0.weight"), exactly as PyTorch's
// state_dict() names them, which is what makes checkpoints portable (docs/checkpoint-format.md).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "nn/flat_parameters.h"

namespace sru::nn {

class Module {
 public:
  virtual ~Module() = default;
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // Every parameter (trainable or not) then every buffer, children after their parent's own
  // entries, in registration order: the tensors a checkpoint holds. A tensor registered under several
  // names (a tied weight) appears once, under the first name met.
  NamedTensors state() const;
  NamedTensors named_parameters() const;  // trainable and frozen
  NamedTensors named_buffers() const;
  std::vector<Tensor> trainable_parameters() const;  // requires_grad: what an optimiser updates
  int64_t num_parameters() const;                    // elements of trainable parameters

  // Training mode switches dropout on; evaluation mode off. Applies to all children.
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  void zero_grad();
  // Moves every parameter and buffer (children included) to `device`, in place (flat buffers whole).
  void to(Device device);
  // Lays the trainable parameters out in flat buffers (nn/flat_parameters.h), once: later calls return
  // the same layout. From then on no module of this tree registers or replaces a parameter (refused,
  // naming it): one outside the buffers would be left out of the one-pass update. On the root module.
  std::shared_ptr<FlatParameters> flatten_parameters();
  // The layout flatten_parameters made, or null.
  const std::shared_ptr<FlatParameters>& flat_parameters() const { return flat_; }
  // Where the parameters live (the first parameter's device; the CPU for a module without any).
  Device device() const;
  // Restores what must hold after every optimiser update (e.g. the Embed-SRU's gates clipped into
  // range): this module's hook, then its children's. train::TrainingStep calls it after each update,
  // so srutrain, srubench train-epoch and the tests all apply it.
  void after_update();
  // Device buffers of random-number state that a training step advances outside the run's Philox
  // counters (cuDNN's dropout states, model.cudnn_dropout): this module's, then its children's. A step
  // launched behind an unread one (train.launch_ahead) and then taken back must leave them as it found
  // them, so train::TrainingStep saves them before such a launch and puts them back.
  std::vector<Tensor> random_states() const;

 protected:
  // This module's own part of after_update(); nothing by default. A hook must be a projection: run
  // again on weights no update has changed since it last ran (or since initialisation), it changes no
  // bit. The trainer launching steps ahead (train.launch_ahead) runs the hooks behind each replayed
  // step before it knows whether that step updated (a non-finite one did not).
  virtual void on_after_update() {}
  // This module's own part of random_states(); none by default.
  virtual std::vector<Tensor> own_random_states() const { return {}; }
  // Registers t under `name` and returns it. Trainable parameters are marked requires_grad.
  Tensor register_parameter(const std::string& name, Tensor t, bool trainable = true);
  Tensor register_buffer(const std::string& name, Tensor t);
  // Makes the registered parameter `name` the tensor t (same shape and dtype), for weight tying.
  void replace_parameter(const std::string& name, const Tensor& t);
  // An empty name puts the child's tensors under this module's own prefix.
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    children_.emplace_back(name, module);
    return module;
  }

 private:
  void collect(const std::string& prefix, bool params, bool buffers, NamedTensors& out,
               std::vector<const TensorImpl*>& seen) const;

  struct Entry {
    std::string name;
    Tensor tensor;
  };
  std::vector<Entry> parameters_, buffers_;
  void fix_layout(const std::string& prefix);

  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
  std::shared_ptr<FlatParameters> flat_;  // the root's, after flatten_parameters
  bool layout_fixed_ = false;  // flatten_parameters ran on the tree this module is in
  std::string path_;           // then: this module's name prefix in that tree ("" for the root)
};

}  // namespace sru::nn
