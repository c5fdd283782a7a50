// Autograd wrapper of the cuDNN LSTM stack (ops/lstm_cudnn.h): argument checks, outputs, backward.
#include "ops/lstm_cudnn.h"

#include "autograd/node.h"
#include "core/cuda/device_info.h"

namespace sru {

bool cuda::lstm_cudnn_supports_bf16(int index) { return compute_capability(index) >= 80; }

namespace {

// Refuses what lstm_cudnn_stack cannot run, naming the argument.
void check_stack_arguments(const Tensor& x, const Tensor& h0, const Tensor& c0,
                           const std::vector<std::vector<LstmDirectionWeights>>& layers,
                           const std::vector<int32_t>& lengths) {
  SRU_CHECK(x.device().is_cuda(), "lstm_cudnn_stack: x must be on a CUDA device, got ", x.device().str());
  SRU_CHECK(x.dim() == 3, "lstm_cudnn_stack: x must be (L, B, n_in), got ", shape_str(x.shape()));
  SRU_CHECK(!layers.empty(), "lstm_cudnn_stack: no layers");
  SRU_CHECK(layers[0].size() == 1 || layers[0].size() == 2, "lstm_cudnn_stack: 1 or 2 directions, got ",
            layers[0].size());
  SRU_CHECK(x.dtype() != DType::BF16 || cuda::lstm_cudnn_supports_bf16(x.device().index),
            "lstm_cudnn_stack: cuDNN's LSTM takes bf16 from compute capability 8.0, ", x.device().str(), " has ",
            cuda::compute_capability(x.device().index) / 10, ".", cuda::compute_capability(x.device().index) % 10);
  const int64_t L = x.size(0), B = x.size(1), n_in = x.size(2), H = layers[0][0].weight_hh.size(1);
  const int64_t D = static_cast<int64_t>(layers[0].size()), N = static_cast<int64_t>(layers.size());
  for (int64_t l = 0; l < N; ++l) {
    SRU_CHECK(static_cast<int64_t>(layers[l].size()) == D, "lstm_cudnn_stack: layer ", l, " has ", layers[l].size(),
              " directions, layer 0 ", D);
    const int64_t inputs = l == 0 ? n_in : D * H;
    for (const LstmDirectionWeights& p : layers[l]) {
      SRU_CHECK(p.weight_ih.shape() == (Shape{4 * H, inputs}) && p.weight_hh.shape() == (Shape{4 * H, H}) &&
                    p.bias_ih.shape() == (Shape{4 * H}) && p.bias_hh.shape() == (Shape{4 * H}),
                "lstm_cudnn_stack: layer ", l, "'s weights must be (4H, ", l == 0 ? "n_in" : "D*H",
                "), (4H, H), (4H), (4H) with H = ", H, ", ", l == 0 ? "n_in" : "D*H", " = ", inputs);
      for (const Tensor* t : {&p.weight_ih, &p.weight_hh, &p.bias_ih, &p.bias_hh}) {
        check_same_dtype(x, *t, "lstm_cudnn_stack");
        check_same_device(x, *t, "lstm_cudnn_stack");
      }
    }
  }
  for (const Tensor* s : {&h0, &c0})
    if (s->defined()) {
      SRU_CHECK(s->shape() == (Shape{N * D, B, H}), "lstm_cudnn_stack: initial state must be (", N * D, ", ", B, ", ",
                H, "), got ", shape_str(s->shape()));
      check_same_dtype(x, *s, "lstm_cudnn_stack");
      check_same_device(x, *s, "lstm_cudnn_stack");
    }
  SRU_CHECK(static_cast<int64_t>(lengths.size()) == B, "lstm_cudnn_stack: ", lengths.size(), " lengths for batch ", B);
  for (int64_t b = 0; b < B; ++b)
    SRU_CHECK(lengths[b] >= 1 && lengths[b] <= L, "lstm_cudnn_stack: sequence ", b, " has length ", lengths[b],
              ", outside [1, ", L, "]");
}

}  // namespace

LstmLayerResult lstm_cudnn_stack(const Tensor& x, const Tensor& h0, const Tensor& c0,
                                 const std::vector<std::vector<LstmDirectionWeights>>& layers,
                                 const std::vector<int32_t>& lengths,
                                 const std::shared_ptr<CudnnStackDropout>& dropout) {
  check_stack_arguments(x, h0, c0, layers, lengths);
  const int64_t L = x.size(0), B = x.size(1), H = layers[0][0].weight_hh.size(1);
  const int64_t D = static_cast<int64_t>(layers[0].size()), N = static_cast<int64_t>(layers.size());
  // Autograd inputs: x, h0, c0, then each layer's directions' four weights (input 3 + 4 (l D + d) + k).
  std::vector<Tensor> inputs{x, h0, c0};
  for (const std::vector<LstmDirectionWeights>& dirs : layers)
    for (const LstmDirectionWeights& p : dirs)
      for (const Tensor& t : {p.weight_ih, p.weight_hh, p.bias_ih, p.bias_hh}) inputs.push_back(t);
  const bool training = autograd::needs_grad(inputs);

  LstmLayerResult r{Tensor::empty({L, B, D * H}, x.dtype(), x.device()),
                    Tensor::empty({N * D, B, H}, x.dtype(), x.device()),
                    Tensor::empty({N * D, B, H}, x.dtype(), x.device())};
  // (Without gradients cuDNN runs inference, which draws no dropout: a dropout object asks for none then.)
  const cuda::CudnnLstmSaved saved =
      cuda::lstm_cudnn_forward(x, h0, c0, layers, lengths, training, r.output, r.h, r.c, training ? dropout : nullptr);
  if (training) {
    auto detach = [](const Tensor& t) { return t.defined() ? t.detach() : Tensor(); };
    std::vector<std::vector<LstmDirectionWeights>> kept;
    for (const std::vector<LstmDirectionWeights>& dirs : layers) {
      kept.emplace_back();
      for (const LstmDirectionWeights& p : dirs)
        kept.back().push_back({p.weight_ih.detach(), p.weight_hh.detach(), p.bias_ih.detach(), p.bias_hh.detach()});
    }
    const bool need_h0 = h0.defined() && h0.requires_grad(), need_c0 = c0.defined() && c0.requires_grad();
    autograd::record("CudnnLstmBackward", inputs, {r.output, r.h, r.c},
                     [=, x = x.detach(), h0 = detach(h0), c0 = detach(c0), y = r.output.detach()](
                         const std::vector<Tensor>& g) {
                       Tensor dx = Tensor::empty(x.shape(), x.dtype(), x.device());
                       Tensor dh0 = need_h0 ? Tensor::empty(h0.shape(), h0.dtype(), h0.device()) : Tensor();
                       Tensor dc0 = need_c0 ? Tensor::empty(c0.shape(), c0.dtype(), c0.device()) : Tensor();
                       // The weight gradients where the engine offers the parameters' flat places (cuDNN's
                       // copies out of its weight space write every element), else new buffers.
                       std::vector<std::vector<LstmDirectionWeights>> dw;
                       size_t input = 3;
                       for (const std::vector<LstmDirectionWeights>& dirs : kept) {
                         dw.emplace_back();
                         for (const LstmDirectionWeights& p : dirs) {
                           auto place = [&](const Tensor& w) {
                             return autograd::gradient_buffer(input++, w.shape(), w.dtype(), w.device());
                           };
                           // (each place in input order: the braces evaluate left to right)
                           dw.back().push_back(LstmDirectionWeights{place(p.weight_ih), place(p.weight_hh),
                                                                    place(p.bias_ih), place(p.bias_hh)});
                         }
                       }
                       cuda::lstm_cudnn_backward(x, h0, c0, kept, lengths, saved, y, g[0], g[1], g[2], dx, dh0, dc0, dw);
                       std::vector<Tensor> grads{dx, dh0, dc0};
                       for (const std::vector<LstmDirectionWeights>& dirs : dw)
                         for (const LstmDirectionWeights& p : dirs)
                           for (const Tensor& t : {p.weight_ih, p.weight_hh, p.bias_ih, p.bias_hh}) grads.push_back(t);
                       return grads;
                     },
                     {/* h, c: cuDNN takes null dhy / dcy as zero */ 1, 2});
  }
  return r;
}

}  // namespace sru
