// A stack of LSTM layers through cuDNN's v8 RNN API in one call, forward and backward, uni- or
// bidirectional (as torch.nn.LSTM calls cuDNN), without dropout between the layers or with cuDNN's own
// (CudnnStackDropout): the GPU path of nn::LSTM (whose CPU path, the fused recurrence per layer, is
// this op's CPU twin and parity reference), which otherwise calls one layer at a time where its own
// dropout goes between them.
// Gate order i, f, g, o in PyTorch's layout (weight_ih (4H, n_in), weight_hh (4H, H), two biases).
// Per step: [i f g o] = x_t W_ih^T + b_ih + h W_hh^T + b_hh; c = f c + i g; h = o tanh(c).
//
// Shapes: x (L, B, n_in); N layers, layers[l] one LstmDirectionWeights per direction (D = 1 or 2),
// layer 0's weight_ih (4H, n_in), the others' (4H, D*H); h0, c0 (N*D, B, H) (cuDNN's order: layer
// major, then direction) or undefined (zeros). lengths: B sequence lengths in [1, L]; steps past a
// sequence's length output 0 and leave its state alone (= the CPU LSTM's mask_pad with padding at the
// end). Returns the top layer's output (L, B, D*H) and the last h and c (N*D, B, H). Layer l's output
// feeds layer l + 1 as it is: one call equals N calls of one layer each, to cuDNN's rounding (which may
// schedule the layers as a wavefront). Built only with the CUDA backend.
//
// cuDNN keeps the weights in one flat buffer: each call packs the named parameters into it (16 device
// copies per layer and direction, the 8 gate matrices and 8 gate biases; bytes small next to the
// layer's GEMMs) and backward unpacks the flat weight gradient into per-parameter gradients. Math: FP32 with FMA only (no TF32), like the SRU's GEMMs;
// TF32 tensor cores allowed at matmul precision high or medium. bf16 tensors (all of them: cuDNN has
// one data type per call) run at CUDNN_DATA_BFLOAT16 with FP32 math on tensor cores, on devices where
// lstm_cudnn_supports_bf16; float64 at double.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/tensor.h"

namespace sru {

struct LstmDirectionWeights {
  Tensor weight_ih, weight_hh, bias_ih, bias_hh;
};

struct LstmLayerResult {
  Tensor output, h, c;
};

// cuDNN's dropout between the stacked layers, as torch.nn.LSTM has it on a GPU: probability p on every
// layer's output but the last, in training calls (those that need gradients), from cuDNN's RNG states
// on the device, seeded once (cudnn_stack_dropout: a kernel, refused inside a CUDA graph capture) and
// advanced by every training call, replays included. So its masks are cuDNN's: not the CPU's, and not
// restored by a checkpoint; two objects made with one seed draw the same sequence of masks. One
// object per module (it also keeps the descriptors of its calls per shape), which must outlive the
// CUDA graphs that captured its calls (they write its states: the model outlives its run's graphs).
// CUDA builds only.
class CudnnStackDropout;
std::shared_ptr<CudnnStackDropout> cudnn_stack_dropout(Device device, double p, uint64_t seed);
// Whether `dropout` draws with probability p on `device` (else a module makes a new one).
bool cudnn_stack_dropout_serves(const CudnnStackDropout& dropout, Device device, double p);
// Its random-number states on the device (cuDNN's, advanced by every training call that draws).
Tensor cudnn_stack_dropout_states(const CudnnStackDropout& dropout);

LstmLayerResult lstm_cudnn_stack(const Tensor& x, const Tensor& h0, const Tensor& c0,
                                 const std::vector<std::vector<LstmDirectionWeights>>& layers,
                                 const std::vector<int32_t>& lengths,
                                 const std::shared_ptr<CudnnStackDropout>& dropout = nullptr);
// One layer (N = 1; h0, c0 (D, B, H)).
inline LstmLayerResult lstm_cudnn_layer(const Tensor& x, const Tensor& h0, const Tensor& c0,
                                        const std::vector<LstmDirectionWeights>& dirs,
                                        const std::vector<int32_t>& lengths) {
  return lstm_cudnn_stack(x, h0, c0, {dirs}, lengths);
}

namespace cuda {

// Whether cuDNN's LSTM takes bf16 on CUDA device `index`: compute capability 8.0 or later (bf16 tensor
// cores; PyTorch's supportsBFloat16RNNWithCuDNN draws the same line).
bool lstm_cudnn_supports_bf16(int index);

// What the forward pass leaves for backward: the packed weights, cuDNN's reserve space, and whether
// the forward's descriptor allowed tensor-op math (the backward's must be the same descriptor, whatever
// the matmul precision is by then).
struct CudnnLstmSaved {
  // device_lengths: the sequence lengths on the device, for cuDNN before 8.9.1 only (later ones read the
  // data descriptors' host lengths, and a device copy made the host wait: see ops/cuda/lstm_cudnn.cu).
  Tensor weight_space, reserve_space, device_lengths;
  bool tensor_op_math = false;
  std::shared_ptr<CudnnStackDropout> dropout;  // the forward's (backward's descriptor must be the same)
};

// y (L, B, D*H), hy and cy (N*D, B, H) must be allocated by the caller. training: keep a reserve space.
CudnnLstmSaved lstm_cudnn_forward(const Tensor& x, const Tensor& h0, const Tensor& c0,
                                  const std::vector<std::vector<LstmDirectionWeights>>& layers,
                                  const std::vector<int32_t>& lengths, bool training, const Tensor& y, const Tensor& hy,
                                  const Tensor& cy, const std::shared_ptr<CudnnStackDropout>& dropout = nullptr);

// Writes dx, and dh0 / dc0 when defined, and every element of the weight gradients per layer and
// direction, dweights (shaped as layers: the caller's buffers, e.g. the parameters' flat gradient places).
void lstm_cudnn_backward(const Tensor& x, const Tensor& h0, const Tensor& c0,
                         const std::vector<std::vector<LstmDirectionWeights>>& layers,
                         const std::vector<int32_t>& lengths, const CudnnLstmSaved& saved, const Tensor& y,
                         const Tensor& dy, const Tensor& dhy, const Tensor& dcy, const Tensor& dx, const Tensor& dh0,
                         const Tensor& dc0, const std::vector<std::vector<LstmDirectionWeights>>& dweights);

}  // namespace cuda

}  // namespace sru
