// Autograd wrappers of softmax, log_softmax and cross_entropy.
#include "ops/softmax.h"
#include "ops/dispatch.h"

#include "autograd/node.h"

namespace sru {

namespace {

Tensor softmax_impl(const Tensor& x, bool log, const char* name) {
  check_floating16(x, name);
  SRU_CHECK(x.dim() >= 1, name, ": needs a tensor of rank >= 1");
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  SRU_KERNEL(x.device(), softmax_forward, x, log, y);
  if (autograd::needs_grad({x})) {
    autograd::record(log ? "LogSoftmaxBackward" : "SoftmaxBackward", {x}, {y},
                     [log, y = y.detach()](const std::vector<Tensor>& g) {
                       Tensor gx = Tensor::empty(y.shape(), y.dtype(), y.device());
                       SRU_KERNEL(gx.device(), softmax_backward, g[0], y, log, gx);
                       return std::vector<Tensor>{gx};
                     });
  }
  return y;
}

}  // namespace

Tensor softmax(const Tensor& x) { return softmax_impl(x, false, "softmax"); }
Tensor log_softmax(const Tensor& x) { return softmax_impl(x, true, "log_softmax"); }

Tensor cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index, Reduction reduction,
                     double label_smoothing) {
  check_floating16(logits, "cross_entropy");
  SRU_CHECK(logits.dim() == 2, "cross_entropy: logits must be (N, C), got ", shape_str(logits.shape()));
  SRU_CHECK(target.dtype() == DType::I64 || target.dtype() == DType::I32,
            "cross_entropy: targets must be i64 or i32, got ", dtype_name(target.dtype()));
  check_same_device(logits, target, "cross_entropy");
  SRU_CHECK(target.numel() == logits.size(0), "cross_entropy: ", target.numel(), " targets for ", logits.size(0),
            " rows of logits");
  SRU_CHECK(label_smoothing >= 0.0 && label_smoothing < 1.0, "cross_entropy: label_smoothing ", label_smoothing,
            " is outside [0, 1)");
  // bf16 logits: the row logsumexps and the loss in float32 (autocast's policy: the loss is float32, and
  // a logsumexp rounded to bf16 would put 2^-8 relative error into every gradient).
  const DType compute = logits.dtype() == DType::BF16 ? DType::F32 : logits.dtype();
  Tensor lse = Tensor::empty({logits.size(0)}, compute, logits.device());
  Tensor share = label_smoothing > 0 ? Tensor::empty({logits.size(0)}, DType::F64, logits.device()) : Tensor();
  Tensor loss = Tensor::empty({}, compute, logits.device());
  Tensor scale = Tensor::empty({}, DType::F64, logits.device());
  SRU_KERNEL(logits.device(), cross_entropy_forward, logits, target, ignore_index, reduction, label_smoothing, lse,
             share, loss, scale);
  if (autograd::needs_grad({logits})) {
    autograd::record("CrossEntropyBackward", {logits, target}, {loss},
                     [=, logits = logits.detach(), target = target.detach()](const std::vector<Tensor>& g) {
                       Tensor gx = Tensor::empty(logits.shape(), logits.dtype(), logits.device());
                       SRU_KERNEL(gx.device(), cross_entropy_backward, logits, target, lse, ignore_index,
                                  label_smoothing, share, scale, g[0], gx);
                       return std::vector<Tensor>{gx, Tensor()};
                     });
  }
  return loss;
}

std::string cross_entropy_target_error(int64_t k, int64_t n, int64_t C, int64_t ignore_index) {
  return detail::concat("cross_entropy: target ", k, " at row ", n, " is outside [0, ", C,
                        ") and is not the ignore index ", ignore_index);
}

}  // namespace sru
