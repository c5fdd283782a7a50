// Autograd wrapper of the embedding lookup.
#include "ops/embedding.h"
#include "ops/dispatch.h"

#include "autograd/node.h"

namespace sru {

Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx) {
  check_floating(weight, "embedding");
  SRU_CHECK(weight.dim() == 2, "embedding: weight must be (V, D), got ", shape_str(weight.shape()));
  SRU_CHECK(indices.dtype() == DType::I64 || indices.dtype() == DType::I32, "embedding: indices must be i64 or i32, got ",
            dtype_name(indices.dtype()));
  check_same_device(weight, indices, "embedding");
  SRU_CHECK(padding_idx < weight.size(0), "embedding: padding_idx ", padding_idx, " >= vocabulary size ", weight.size(0));
  Shape out_shape = indices.shape();
  out_shape.push_back(weight.size(1));
  Tensor out = Tensor::empty(out_shape, weight.dtype(), weight.device());
  SRU_KERNEL(weight.device(), embedding_forward, weight, indices, out);
  if (autograd::needs_grad({weight})) {
    autograd::record("EmbeddingBackward", {weight, indices}, {out},
                     [padding_idx, wshape = weight.shape(), dtype = weight.dtype(), device = weight.device(), indices = indices.detach()](
                         const std::vector<Tensor>& g) {
                       Tensor gw = autograd::gradient_buffer(0, wshape, dtype, device);  // a flat slot serves
                       gw.zero_();
                       SRU_KERNEL(gw.device(), embedding_backward, g[0], indices, padding_idx, gw);
                       return std::vector<Tensor>{gw, Tensor()};
                     });
  }
  return out;
}

std::string embedding_index_error(int64_t k, int64_t i, int64_t V) {
  return detail::concat("embedding: index ", k, " at position ", i, " is outside the vocabulary [0, ", V, ")");
}

}  // namespace sru
