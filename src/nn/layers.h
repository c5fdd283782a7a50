// Basic layers with PyTorch's parameter names, shapes and default initialisation:
//   Linear:    weight (out, in), bias (out);      y = x W^T + b over the last dim of x (..., in)
//   Embedding: weight (num, dim);                 y = weight[indices]
//   LayerNorm: weight (d), bias (d);              over the last dim, eps 1e-5
// (Dropout has no module: models call the dropout op with their is_training() and generator.)
#pragma once

#include "core/rng.h"
#include "nn/module.h"

namespace sru::nn {

class Linear : public Module {
 public:
  // weight, bias ~ U(-1/sqrt(in), 1/sqrt(in)) as torch.nn.Linear.
  Linear(int64_t in_features, int64_t out_features, bool bias = true, DType dtype = DType::F32,
         Generator& gen = default_generator());
  Tensor forward(const Tensor& x) const;
  // relu(forward(x)) as one op (ops/matmul.h linear_relu: the ReLU in the bias epilogue).
  Tensor forward_relu(const Tensor& x) const;
  // Uses w (out, in) as this layer's weight from now on, e.g. an embedding matrix (weight tying).
  void tie_weight(const Tensor& w);
  Tensor weight, bias;
};

class Embedding : public Module {
 public:
  // weight ~ N(0, 1) as torch.nn.Embedding; the padding row (if any) starts at zero.
  Embedding(int64_t num_embeddings, int64_t dim, int64_t padding_idx = -1, DType dtype = DType::F32,
            Generator& gen = default_generator());
  Tensor forward(const Tensor& indices) const;
  Tensor weight;
  int64_t padding_idx;
};

class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t dim, double eps = 1e-5, DType dtype = DType::F32);
  Tensor forward(const Tensor& x) const;
  Tensor weight, bias;
  double eps;
};

}  // namespace sru::nn
