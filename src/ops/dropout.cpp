// Dropout (the mask drawn inside apply_dropout, forward and backward) and dropout masks.
#include "ops/dropout.h"
#include "ops/dispatch.h"

#include "autograd/node.h"

#include "ops/shape_ops.h"

namespace sru {

MaskWindow mask_window(const Shape& shape, const BatchShard& shard, int batch_dim, int64_t& words) {
  const int64_t numel = shape_numel(shape);
  words = numel;
  if (!shard.active() || numel == 0) return {std::max<int64_t>(numel, 1), std::max<int64_t>(numel, 1), 0};
  SRU_CHECK(batch_dim >= 0 && batch_dim < static_cast<int>(shape.size()), "dropout mask ", shape_str(shape),
            ": batch_dim ", batch_dim, " is not one of its dims");
  SRU_CHECK(shard.count > 0 && shard.first >= 0 && shard.first + shard.count <= shard.rows, "dropout: batch shard rows [",
            shard.first, ", ", shard.first + shard.count, ") do not lie in a batch of ", shard.rows);
  int64_t outer = 1;
  for (int d = 0; d < batch_dim; ++d) outer *= shape[d];
  SRU_CHECK(shape[batch_dim] % shard.count == 0, "dropout mask ", shape_str(shape), " under a batch shard of ",
            shard.count, " rows: dim ", batch_dim, " (", shape[batch_dim],
            ") is not a multiple of the rows, so the mask does not scale with the batch (pass the batch's dim)");
  const int64_t inner = numel / (outer * shard.count);
  words = outer * shard.rows * inner;
  return {shard.count * inner, shard.rows * inner, shard.first * inner};
}

MaskDraw draw_dropout_mask(const Shape& shape, double p, Generator& gen, int batch_dim) {
  SRU_CHECK(p >= 0.0 && p < 1.0, "dropout probability must be in [0, 1), got ", p);
  MaskDraw draw;
  int64_t words = 0;
  draw.window = mask_window(shape, gen.batch_shard(), batch_dim, words);
  draw.seed = gen.seed();
  draw.offset = gen.draw(static_cast<uint64_t>(words));
  draw.p = p;
  draw.keep = 1.0 / (1.0 - p);
  draw.on = true;
  return draw;
}

Tensor mask_of(const MaskDraw& draw, const Shape& shape, DType dtype, Device device) {
  Tensor mask = Tensor::empty(shape, dtype, device);
  SRU_KERNEL(mask.device(), fill_dropout_mask, draw.seed, draw.offset, draw.p, mask, draw.window);
  return mask;
}

Tensor dropout_mask(const Shape& shape, double p, DType dtype, Generator& gen, Device device, int batch_dim) {
  return mask_of(draw_dropout_mask(shape, p, gen, batch_dim), shape, dtype, device);
}

Tensor dropout(const Tensor& x, double p, bool training, Generator& gen, int batch_dim) {
  check_floating16(x, "dropout");
  if (!training || p == 0.0) return x;
  SRU_CHECK(p > 0.0 && p < 1.0, "dropout probability must be in [0, 1), got ", p);
  // The numbers of the mask dropout_mask would draw here (same window, same words reserved), applied in
  // the kernel. bf16: float math with a float scale (1 / (1 - p) is not a bf16 value), rounded once.
  int64_t words = 0;
  const MaskWindow window = mask_window(x.shape(), gen.batch_shard(), batch_dim, words);
  const uint64_t seed = gen.seed();
  const PhiloxOffset offset = gen.draw(static_cast<uint64_t>(words));
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  SRU_KERNEL(x.device(), apply_dropout, seed, offset, p, x, y, window);
  if (autograd::needs_grad({x})) {
    autograd::record("DropoutBackward", {x}, {y}, [seed, offset, p, window](const std::vector<Tensor>& g) {
      Tensor gx = Tensor::empty(g[0].shape(), g[0].dtype(), g[0].device());
      SRU_KERNEL(g[0].device(), apply_dropout, seed, offset, p, g[0], gx, window);
      return std::vector<Tensor>{gx};
    });
  }
  return y;
}

}  // namespace sru
