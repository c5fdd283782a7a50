// Autograd wrapper of the cuDNN LSTM layer (ops/lstm_cudnn.h): argument checks, outputs, backward.
#include "ops/lstm_cudnn.h"

#include "autograd/node.h"
#include "core/cuda/device_info.h"

namespace sru {

bool cuda::lstm_cudnn_supports_bf16(int index) { return compute_capability(index) >= 80; }

LstmLayerResult lstm_cudnn_layer(const Tensor& x, const Tensor& h0, const Tensor& c0,
                                 const std::vector<LstmDirectionWeights>& dirs, const std::vector<int32_t>& lengths) {
  SRU_CHECK(x.device().is_cuda(), "lstm_cudnn_layer: x must be on a CUDA device, got ", x.device().str());
  SRU_CHECK(x.dim() == 3, "lstm_cudnn_layer: x must be (L, B, n_in), got ", shape_str(x.shape()));
  SRU_CHECK(dirs.size() == 1 || dirs.size() == 2, "lstm_cudnn_layer: 1 or 2 directions, got ", dirs.size());
  SRU_CHECK(x.dtype() != DType::BF16 || cuda::lstm_cudnn_supports_bf16(x.device().index),
            "lstm_cudnn_layer: cuDNN's LSTM takes bf16 from compute capability 8.0, ", x.device().str(), " has ",
            cuda::compute_capability(x.device().index) / 10, ".", cuda::compute_capability(x.device().index) % 10);
  const int64_t L = x.size(0), B = x.size(1), n_in = x.size(2), H = dirs[0].weight_hh.size(1);
  const int64_t D = static_cast<int64_t>(dirs.size());
  for (const LstmDirectionWeights& p : dirs) {
    SRU_CHECK(p.weight_ih.shape() == (Shape{4 * H, n_in}) && p.weight_hh.shape() == (Shape{4 * H, H}) &&
                  p.bias_ih.shape() == (Shape{4 * H}) && p.bias_hh.shape() == (Shape{4 * H}),
              "lstm_cudnn_layer: weights must be (4H, n_in), (4H, H), (4H), (4H) with H = ", H, ", n_in = ", n_in);
    for (const Tensor* t : {&p.weight_ih, &p.weight_hh, &p.bias_ih, &p.bias_hh}) {
      check_same_dtype(x, *t, "lstm_cudnn_layer");
      check_same_device(x, *t, "lstm_cudnn_layer");
    }
  }
  for (const Tensor* s : {&h0, &c0})
    if (s->defined()) {
      SRU_CHECK(s->shape() == (Shape{D, B, H}), "lstm_cudnn_layer: initial state must be (", D, ", ", B, ", ", H,
                "), got ", shape_str(s->shape()));
      check_same_dtype(x, *s, "lstm_cudnn_layer");
      check_same_device(x, *s, "lstm_cudnn_layer");
    }
  SRU_CHECK(static_cast<int64_t>(lengths.size()) == B, "lstm_cudnn_layer: ", lengths.size(), " lengths for batch ", B);
  for (int64_t b = 0; b < B; ++b)
    SRU_CHECK(lengths[b] >= 1 && lengths[b] <= L, "lstm_cudnn_layer: sequence ", b, " has length ", lengths[b],
              ", outside [1, ", L, "]");

  std::vector<Tensor> inputs{x, h0, c0};
  for (const LstmDirectionWeights& p : dirs)
    for (const Tensor& t : {p.weight_ih, p.weight_hh, p.bias_ih, p.bias_hh}) inputs.push_back(t);
  const bool training = autograd::needs_grad(inputs);

  LstmLayerResult r{Tensor::empty({L, B, D * H}, x.dtype(), x.device()), Tensor::empty({D, B, H}, x.dtype(), x.device()),
                    Tensor::empty({D, B, H}, x.dtype(), x.device())};
  const cuda::CudnnLstmSaved saved = cuda::lstm_cudnn_forward(x, h0, c0, dirs, lengths, training, r.output, r.h, r.c);
  if (training) {
    auto detach = [](const Tensor& t) { return t.defined() ? t.detach() : Tensor(); };
    std::vector<LstmDirectionWeights> kept;
    for (const LstmDirectionWeights& p : dirs)
      kept.push_back({p.weight_ih.detach(), p.weight_hh.detach(), p.bias_ih.detach(), p.bias_hh.detach()});
    const bool need_h0 = h0.defined() && h0.requires_grad(), need_c0 = c0.defined() && c0.requires_grad();
    autograd::record("CudnnLstmBackward", inputs, {r.output, r.h, r.c},
                     [=, x = x.detach(), h0 = detach(h0), c0 = detach(c0), y = r.output.detach()](
                         const std::vector<Tensor>& g) {
                       Tensor dx = Tensor::empty(x.shape(), x.dtype(), x.device());
                       Tensor dh0 = need_h0 ? Tensor::empty(h0.shape(), h0.dtype(), h0.device()) : Tensor();
                       Tensor dc0 = need_c0 ? Tensor::empty(c0.shape(), c0.dtype(), c0.device()) : Tensor();
                       // The weight gradients where the engine offers the parameters' flat places (cuDNN's
                       // copies out of its weight space write every element), else new buffers.
                       std::vector<LstmDirectionWeights> dw;
                       for (size_t d = 0; d < kept.size(); ++d) {
                         auto place = [&](size_t k, const Tensor& w) {
                           return autograd::gradient_buffer(3 + 4 * d + k, w.shape(), w.dtype(), w.device());
                         };
                         dw.push_back({place(0, kept[d].weight_ih), place(1, kept[d].weight_hh), place(2, kept[d].bias_ih),
                                       place(3, kept[d].bias_hh)});
                       }
                       cuda::lstm_cudnn_backward(x, h0, c0, kept, lengths, saved, y, g[0], g[1], g[2], dx, dh0, dc0, dw);
                       std::vector<Tensor> grads{dx, dh0, dc0};
                       for (const LstmDirectionWeights& p : dw)
                         for (const Tensor& t : {p.weight_ih, p.weight_hh, p.bias_ih, p.bias_hh}) grads.push_back(t);
                       return grads;
                     },
                     {/* h, c: cuDNN takes null dhy / dcy as zero */ 1, 2});
  }
  return r;
}

}  // namespace sru
