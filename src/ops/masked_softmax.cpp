// Autograd wrappers of masked_softmax, masked_log_softmax and causal_softmax, and the mask's broadcast
// strides.
#include "ops/masked_softmax.h"

#include <algorithm>
#include <cmath>

#include "autograd/node.h"
#include "ops/dispatch.h"
#include "ops/softmax.h"

namespace sru {

MaskIndex broadcast_mask_index(const Shape& x, const Shape& mask, const char* op) {
  const int rx = static_cast<int>(x.size()), rm = static_cast<int>(mask.size());
  auto refuse = [&](const auto&... why) {
    SRU_FAIL(op, ": mask of shape ", shape_str(mask), " does not broadcast to x of shape ", shape_str(x), " (", why...,
             "; each mask dim must equal x's or be 1, aligned from the right)");
  };
  if (rx == 0) refuse("x has no dim to take the softmax over");
  if (rm > rx) refuse("the mask has more dims than x");
  // Mask strides aligned to x's dims (0 where broadcast), from the mask's contiguous layout.
  std::vector<long long> stride(rx, 0);
  long long step = 1;
  for (int d = rx - 1, dm = rm - 1; dm >= 0; --d, --dm) {
    if (mask[dm] != x[d] && mask[dm] != 1) refuse("dim ", dm, " of the mask is ", mask[dm], ", x has ", x[d]);
    if (mask[dm] != 1) stride[d] = step;
    step *= mask[dm];
  }
  MaskIndex index;
  index.column_stride = stride[rx - 1];
  // Leading dims of x, size-1 dims dropped, neighbours merged where the mask's strides chain.
  std::vector<long long> sizes, strides;
  for (int d = 0; d < rx - 1; ++d) {
    if (x[d] == 1) continue;
    if (!sizes.empty() && strides.back() == stride[d] * x[d]) {
      sizes.back() *= x[d];
      strides.back() = stride[d];
    } else {
      sizes.push_back(x[d]);
      strides.push_back(stride[d]);
    }
  }
  SRU_CHECK(sizes.size() <= static_cast<size_t>(MaskIndex::kMaxDims), op, ": the broadcast of mask ", shape_str(mask),
            " over x ", shape_str(x), " needs ", sizes.size(), " index dims, more than the ", MaskIndex::kMaxDims,
            " supported");
  index.rank = static_cast<int>(sizes.size());
  for (int d = 0; d < index.rank; ++d) {
    index.size[d] = sizes[d];
    index.stride[d] = strides[d];
  }
  return index;
}

namespace {

Tensor masked_softmax_impl(const Tensor& x, const Tensor& mask, bool log, const char* name) {
  if (!mask.defined()) return log ? log_softmax(x) : softmax(x);
  check_floating16(x, name);
  check_same_device(x, mask, name);
  const MaskIndex index = broadcast_mask_index(x.shape(), mask.shape(), name);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  SRU_KERNEL(x.device(), masked_softmax_forward, x, mask, index, log, y);
  if (autograd::needs_grad({x})) {
    autograd::record(log ? "MaskedLogSoftmaxBackward" : "MaskedSoftmaxBackward", {x, mask}, {y},
                     [log, index, y = y.detach(), mask = mask.detach()](const std::vector<Tensor>& g) {
                       Tensor gx = Tensor::empty(y.shape(), y.dtype(), y.device());
                       SRU_KERNEL(gx.device(), masked_softmax_backward, g[0], y, mask, index, log, gx);
                       return std::vector<Tensor>{gx, Tensor()};
                     });
  }
  return y;
}

}  // namespace

Tensor masked_softmax(const Tensor& x, const Tensor& mask) {
  return masked_softmax_impl(x, mask, false, "masked_softmax");
}
Tensor masked_log_softmax(const Tensor& x, const Tensor& mask) {
  return masked_softmax_impl(x, mask, true, "masked_log_softmax");
}

Tensor causal_softmax(const Tensor& x, double scale, int64_t offset, int64_t window, const Tensor& mask) {
  check_floating16(x, "causal_softmax");
  SRU_CHECK(x.dim() >= 2, "causal_softmax: x must be scores (..., Lq, Lk), got ", shape_str(x.shape()));
  SRU_CHECK(offset >= 0 && window >= -1, "causal_softmax: offset must be >= 0 and window >= -1, got offset ", offset,
            ", window ", window);
  SRU_CHECK(std::isfinite(scale), "causal_softmax: scale must be finite, got ", scale);
  CausalMask causal;
  causal.query_length = std::max<int64_t>(x.size(-2), 1);
  causal.offset = offset;
  causal.window = window;
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (mask.defined()) {
    check_same_device(x, mask, "causal_softmax");
    const MaskIndex index = broadcast_mask_index(x.shape(), mask.shape(), "causal_softmax");
    SRU_KERNEL(x.device(), causal_masked_softmax_forward, x, causal, mask, index, scale, y);
    if (autograd::needs_grad({x})) {
      autograd::record("CausalMaskedSoftmaxBackward", {x, mask}, {y},
                       [causal, index, scale, y = y.detach(), mask = mask.detach()](const std::vector<Tensor>& g) {
                         Tensor gx = Tensor::empty(y.shape(), y.dtype(), y.device());
                         SRU_KERNEL(gx.device(), causal_masked_softmax_backward, g[0], y, causal, mask, index, scale, gx);
                         return std::vector<Tensor>{gx, Tensor()};
                       });
    }
    return y;
  }
  SRU_KERNEL(x.device(), causal_softmax_forward, x, causal, scale, y);
  if (autograd::needs_grad({x})) {
    autograd::record("CausalSoftmaxBackward", {x}, {y},
                     [causal, scale, y = y.detach()](const std::vector<Tensor>& g) {
                       Tensor gx = Tensor::empty(y.shape(), y.dtype(), y.device());
                       SRU_KERNEL(gx.device(), causal_softmax_backward, g[0], y, causal, scale, gx);
                       return std::vector<Tensor>{gx};
                     });
  }
  return y;
}

}  // namespace sru
