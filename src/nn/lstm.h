// LSTM baseline, built from autograd ops on the CPU and through cuDNN (ops/lstm_cudnn.h, one call per
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
// host wait to read back.
#pragma once

#include <memory>
#include <vector>

#include "core/rng.h"
#include "nn/encoder.h"
#include "nn/module.h"

namespace sru::nn {

struct LSTMOptions {
  int64_t input_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 1;
  double dropout = 0.0;
  bool bidirectional = false;
  DType dtype = DType::F32;
};

struct RecurrentOutput {
  Tensor output;  // (L, B, out)
  Tensor h;       // (layers, B, out), last hidden state per layer
  Tensor c;       // (layers, B, out), last cell state per layer
};

class LSTM : public SequenceEncoder {
 public:
  explicit LSTM(const LSTMOptions& options, Generator& gen = default_generator());
  RecurrentOutput forward(const Tensor& x, const Tensor& h0 = Tensor(), const Tensor& c0 = Tensor(),
                          const Tensor& mask_pad = Tensor()) const;
  // The encoder interface: state {h, c}, each (layers, B, out).
  Tensor forward_sequence(const EncoderInput& input, std::vector<Tensor>& state) const override;
  int64_t output_size() const override { return directions() * options.hidden_size; }
  int64_t directions() const override { return options.bidirectional ? 2 : 1; }

  LSTMOptions options;

 private:
  struct Direction {
    Tensor weight_ih, weight_hh, bias_ih, bias_hh;
  };
  RecurrentOutput forward_cudnn(const Tensor& x, const Tensor& h0, const Tensor& c0, const Tensor& mask_pad) const;
  std::vector<std::vector<Direction>> layers_;  // [layer][direction]
  Generator* gen_;
};

// The registry entry "lstm" (no keys of its own).
EncoderSpec lstm_encoder();

}  // namespace sru::nn
