// LSTM baseline, on the CPU through the fused recurrence op (ops/lstm_recurrence.h: per step one GEMM
// for the four gates and one gate kernel) and through cuDNN (ops/lstm_cudnn.h: the whole stack in one
// call where no dropout goes between layers or cuDNN's own does, model.cudnn_dropout; else one call per
// layer) on a CUDA device, with PyTorch's nn.LSTM parameter names, shapes,
// gate order (i, f, g, o — also cuDNN's) and initialisation U(-1/sqrt(H), 1/sqrt(H)):
//   weight_ih_l{k}[_reverse] (4H, n_in)   weight_hh_l{k}[_reverse] (4H, H)
//   bias_ih_l{k}[_reverse]   (4H)         bias_hh_l{k}[_reverse]   (4H)
// Per step: [i f g o] = x_t W_ih^T + b_ih + h W_hh^T + b_hh; i, f, o = sigmoid, g = tanh;
//   c = f c + i g;  h = o tanh(c).  The input projection for all steps is one GEMM.
// Shapes: x (L, B, n_in); initial h0, c0 (layers, B, out) with out = D*H; mask_pad (L, B): a padded
// step keeps (h, c) and outputs 0, as the SRU does. Returns the top layer's h (L, B, out) and the
// last h and c of every layer (layers, B, out). Dropout (training only) between layers, as PyTorch, the
// same masks on both devices. On CUDA, padding must sit at the end of each sequence (cuDNN's lengths),
// and mask_pad is best made on the CPU: cuDNN takes the lengths on the host, so a device mask costs a
// host wait to read back. set_implementation(Composed) runs the recurrence as basic autograd ops per
// step instead (the previous CPU implementation, kept as the fused op's test oracle and benchmark row).
//
// train.precision bf16 (autocast_bf16, float32 parameters): on a GPU of compute capability 8.0 or later
// cuDNN runs at CUDNN_DATA_BFLOAT16 (x, the weights cast per call, h0 / c0 and the outputs in bf16; FP32
// math and tensor cores), older cards keep float32 at TF32 math. The CPU (fused) is its twin: x and
// the weights rounded to bf16, the input projection a bf16 GEMM, h_t rounded to bf16 values at every
// step (ops/lstm_recurrence.h, LstmHidden::Bf16Values), c in float32; layer outputs bf16 between layers
// (dropout included), the returned output and states float32. Parameters and their gradients stay
// float32 (the casts' backward widens). PyTorch's autocast instead runs its cuDNN LSTM at fp16 under
// either autocast dtype (aten/src/ATen/cudnn/AutocastRNN.cpp).
#pragma once

#include <memory>
#include <vector>

#include "core/rng.h"
#include "nn/encoder.h"
#include "nn/module.h"

namespace sru {
class CudnnStackDropout;  // ops/lstm_cudnn.h
}  // namespace sru

namespace sru::nn {

struct LSTMOptions {
  int64_t input_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 1;
  double dropout = 0.0;
  bool bidirectional = false;
  DType dtype = DType::F32;
  // model.cudnn_dropout: on a GPU, training with dropout between layers runs the stack in one cuDNN
  // call with cuDNN's own dropout, as torch.nn.LSTM does (ops/lstm_cudnn.h CudnnStackDropout: not the
  // CPU's masks, not restored by a checkpoint; drawn in passes that compute gradients); the CPU ignores it.
  bool cudnn_dropout = false;
};

enum class LSTMImplementation { Fused, Composed };

struct RecurrentOutput {
  Tensor output;  // (L, B, out)
  Tensor h;       // (layers, B, out), last hidden state per layer
  Tensor c;       // (layers, B, out), last cell state per layer
};

// The LSTM's carried state: h and c (layers, B, out).
struct LstmState : BatchAtDim1State<LstmState> {
  Tensor h, c;
  LstmState(Tensor h_, Tensor c_) : h(std::move(h_)), c(std::move(c_)) {}
  template <typename F>
  void each(F&& f) {
    f(h);
    f(c);
  }
};

class LSTM : public SequenceEncoder {
 public:
  explicit LSTM(const LSTMOptions& options, Generator& gen = default_generator());
  RecurrentOutput forward(const Tensor& x, const Tensor& h0 = Tensor(), const Tensor& c0 = Tensor(),
                          const Tensor& mask_pad = Tensor()) const;
  // The encoder interface: state LstmState {h, c}, each (layers, B, out).
  Tensor forward_sequence(const EncoderInput& input, EncoderStatePtr& state) const override;
  EncoderStatePtr state_from(const std::vector<Tensor>& tensors) const override;
  // Captured on every device. On a GPU, cuDNN's calls without padding keep their descriptors for the
  // process (ops/cuda/lstm_cudnn.cu), so a replay finds them; a padding mask becomes per-sequence host
  // lengths that a graph would freeze, so a padded step's capture is refused (reading a device mask is
  // a host wait; a host mask is refused by name) and, under train.cuda_graphs auto, runs eagerly.
  int64_t output_size() const override { return directions() * options.hidden_size; }
  int64_t directions() const override { return options.bidirectional ? 2 : 1; }
  // The CPU implementation (a CUDA device always uses cuDNN).
  void set_implementation(LSTMImplementation impl) { implementation_ = impl; }

  LSTMOptions options;

 protected:
  // cuDNN's dropout states, once a training call on a GPU made them (model.cudnn_dropout).
  std::vector<Tensor> own_random_states() const override;

 private:
  struct Direction {
    Tensor weight_ih, weight_hh, bias_ih, bias_hh;
  };
  struct DirectionResult {
    Tensor output, h, c;  // (L, B, H), (B, H), (B, H)
  };
  RecurrentOutput forward_cudnn(const Tensor& x, const Tensor& h0, const Tensor& c0, const Tensor& mask_pad,
                                bool bf16) const;
  // One direction of one layer on the CPU; h0, c0 (B, H) or undefined. bf16: cuDNN's bf16 LSTM's twin
  // (output bf16, h and c float32 holding bf16 values).
  DirectionResult direction_fused(const Direction& p, const Tensor& input, const Tensor& h0, const Tensor& c0,
                                  const Tensor& mask_pad, bool reverse, bool bf16) const;
  DirectionResult direction_composed(const Direction& p, const Tensor& input, const Tensor& h0, const Tensor& c0,
                                     const std::vector<Tensor>& pad, bool reverse) const;
  LSTMImplementation implementation_ = LSTMImplementation::Fused;
  std::vector<std::vector<Direction>> layers_;  // [layer][direction]
  Generator* gen_;
  // cuDNN's dropout states (options.cudnn_dropout), made at the first training call on a GPU and again
  // when the device or the probability changes.
  mutable std::shared_ptr<CudnnStackDropout> cudnn_dropout_;
};

// The registry entry "lstm" (its key: model.cudnn_dropout).
EncoderSpec lstm_encoder();

}  // namespace sru::nn
