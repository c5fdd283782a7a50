// Dropout and dropout masks; the product and its gradient reuse mul().
#include "ops/dropout.h"
#include "ops/dispatch.h"

#include "ops/elementwise.h"

namespace sru {

Tensor dropout_mask(const Shape& shape, double p, DType dtype, Generator& gen, Device device) {
  SRU_CHECK(p >= 0.0 && p < 1.0, "dropout probability must be in [0, 1), got ", p);
  Tensor mask = Tensor::empty(shape, dtype, device);
  const uint64_t seed = gen.seed(), offset = gen.reserve(mask.numel());
  SRU_KERNEL(mask.device(), fill_dropout_mask, seed, offset, p, mask);
  return mask;
}

Tensor dropout(const Tensor& x, double p, bool training, Generator& gen) {
  check_floating(x, "dropout");
  if (!training || p == 0.0) return x;
  return mul(x, dropout_mask(x.shape(), p, x.dtype(), gen, x.device()));
}

}  // namespace sru
