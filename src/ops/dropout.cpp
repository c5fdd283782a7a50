// Dropout and dropout masks; the product and its gradient reuse mul().
#include "ops/dropout.h"
#include "ops/dispatch.h"

#include "ops/elementwise.h"
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

Tensor dropout_mask(const Shape& shape, double p, DType dtype, Generator& gen, Device device, int batch_dim) {
  SRU_CHECK(p >= 0.0 && p < 1.0, "dropout probability must be in [0, 1), got ", p);
  Tensor mask = Tensor::empty(shape, dtype, device);
  int64_t words = 0;
  const MaskWindow window = mask_window(shape, gen.batch_shard(), batch_dim, words);
  const uint64_t seed = gen.seed(), offset = gen.reserve(static_cast<uint64_t>(words));
  SRU_KERNEL(mask.device(), fill_dropout_mask, seed, offset, p, mask, window);
  return mask;
}

Tensor dropout(const Tensor& x, double p, bool training, Generator& gen, int batch_dim) {
  check_floating16(x, "dropout");
  if (!training || p == 0.0) return x;
  // bf16: the product in float32 with a float32 mask (1 / (1 - p) is not a bf16 value: a bf16 mask would
  // scale every kept element by its rounding), rounded once; the same mask as float32's.
  if (x.dtype() == DType::BF16)
    return cast(mul(cast(x, DType::F32), dropout_mask(x.shape(), p, DType::F32, gen, x.device(), batch_dim)),
                DType::BF16);
  return mul(x, dropout_mask(x.shape(), p, x.dtype(), gen, x.device(), batch_dim));
}

}  // namespace sru
