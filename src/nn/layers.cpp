// Linear, Embedding and LayerNorm modules on top of the ops.
#include "nn/layers.h"

#include <cmath>
#include <cstring>

#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/layer_norm.h"
#include "ops/matmul.h"
#include "ops/shape_ops.h"

namespace sru::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool with_bias, DType dtype, Generator& gen) {
  SRU_CHECK(in_features > 0 && out_features > 0, "Linear: sizes must be positive, got ", in_features, " -> ",
            out_features);
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  weight = register_parameter("weight", Tensor::uniform({out_features, in_features}, -bound, bound, dtype, gen));
  if (with_bias) bias = register_parameter("bias", Tensor::uniform({out_features}, -bound, bound, dtype, gen));
}

// The linear op (ops/matmul.h): the bias rides in the GEMM's epilogue. train.precision bf16
// (autocast_bf16), PyTorch autocast's policy for linear: x, W and b as bf16, the products summed in
// float32, the answer in bf16 (so the activations that only feed the next GEMM, and those saved for
// backward, take half the bytes); W, b and their gradients stay float32 (the casts' backward widens).
// A consumer that needs float32 (layer norm's statistics, a residual add: ops promote bf16 beside
// float32) gets it there. Float64 layers stay float64.
Tensor Linear::forward(const Tensor& x) const { return linear(x, weight, bias); }
Tensor Linear::forward_relu(const Tensor& x) const { return linear_relu(x, weight, bias); }

Embedding::Embedding(int64_t num_embeddings, int64_t dim, int64_t padding, DType dtype, Generator& gen)
    : padding_idx(padding) {
  SRU_CHECK(num_embeddings > 0 && dim > 0, "Embedding: sizes must be positive, got (", num_embeddings, ", ", dim, ")");
  Tensor w = Tensor::randn({num_embeddings, dim}, dtype, gen);
  if (padding >= 0) std::memset(static_cast<char*>(w.data_ptr()) + padding * dim * dtype_size(dtype), 0, dim * dtype_size(dtype));
  weight = register_parameter("weight", w);
}

Tensor Embedding::forward(const Tensor& indices) const { return embedding(weight, indices, padding_idx); }

LayerNorm::LayerNorm(int64_t dim, double epsilon, DType dtype) : eps(epsilon) {
  weight = register_parameter("weight", Tensor::ones({dim}, dtype));
  bias = register_parameter("bias", Tensor::zeros({dim}, dtype));
}

void Linear::tie_weight(const Tensor& w) {
  replace_parameter("weight", w);
  weight = w;
}

Tensor LayerNorm::forward(const Tensor& x) const { return layer_norm(x, weight, bias, eps); }

}  // namespace sru::nn
