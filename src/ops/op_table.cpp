// The op table's entries (ops/op_table.h): every differentiable op with its kernels, dtypes and cases.
#include "ops/op_table.h"

#include <cctype>

#include "core/philox.h"
#include "ops/embed_sru_recurrence.h"
#include "ops/ssru_recurrence.h"
#include "ops/lstm_recurrence.h"
#include "ops/ops.h"
#include "ops/sru_recurrence.h"

namespace sru {

namespace {

using Inputs = std::vector<Tensor>;
using Outputs = std::vector<Tensor>;
using Run = std::function<Outputs(const Inputs&)>;

const std::vector<DType> kFloat = {DType::F32, DType::F64};
// The ops whose kernels also take bfloat16 storage (SRU_DISPATCH_FLOATING_BF16).
const std::vector<DType> kFloatBf16 = {DType::F32, DType::F64, DType::BF16};

OpInput in(Shape shape, double low = -1.0, double high = 1.0) { return OpInput{std::move(shape), low, high, true}; }
// An operand that stays in the compute dtype under 16-bit storage.
OpInput in32(Shape shape, double low = -1.0, double high = 1.0) { return OpInput{std::move(shape), low, high, false}; }

using Fixed = std::function<Inputs(const Inputs&)>;

// A case with one output and no fixed operands.
OpCase one(std::string label, std::vector<OpInput> inputs, std::function<Tensor(const Inputs&)> f) {
  return OpCase{std::move(label), std::move(inputs), nullptr,
                [f = std::move(f)](const Inputs& x, const Inputs&) { return Outputs{f(x)}; }};
}

// A case with one output and fixed operands (made by `fixed` from the inputs, passed to f as fx).
OpCase one_fixed(std::string label, std::vector<OpInput> inputs, Fixed fixed,
                 std::function<Tensor(const Inputs& x, const Inputs& fx)> f) {
  return OpCase{std::move(label), std::move(inputs), std::move(fixed),
                [f = std::move(f)](const Inputs& x, const Inputs& fx) { return Outputs{f(x, fx)}; }};
}

// A case with several outputs and no fixed operands.
OpCase many(std::string label, std::vector<OpInput> inputs, std::function<Outputs(const Inputs&)> f) {
  return OpCase{std::move(label), std::move(inputs), nullptr,
                [f = std::move(f)](const Inputs& x, const Inputs&) { return f(x); }};
}

// An element-wise op of one operand: small and bench cases over the same function.
OpEntry unary_entry(std::string name, std::function<Tensor(const Tensor&)> f, double low = -1.0, double high = 1.0) {
  const auto g = [f](const Inputs& x) { return f(x[0]); };
  return OpEntry{std::move(name), {"unary", "unary_backward"}, kFloatBf16, true, 1e-4,
                 {one("(3, 4)", {in({3, 4}, low, high)}, g), one("(2, 3, 5)", {in({2, 3, 5}, low, high)}, g)},
                 one("(128, 32, 1024)", {in({128, 32, 1024}, low, high)}, g)};
}

// A two-operand element-wise op with broadcasting (its backward sums over the broadcast dims).
OpEntry binary_entry(std::string name, std::function<Tensor(const Tensor&, const Tensor&)> f, double low = -1.0,
                     double high = 1.0) {
  const auto g = [f](const Inputs& x) { return f(x[0], x[1]); };
  return OpEntry{std::move(name), {"binary", "sum_rows"}, kFloatBf16, true, 1e-4,
                 {one("(3, 4) (3, 4)", {in({3, 4}, low, high), in({3, 4}, low, high)}, g),
                  one("(2, 3, 4) (4)", {in({2, 3, 4}, low, high), in({4}, low, high)}, g),
                  one("(4) (2, 3, 4)", {in({4}, low, high), in({2, 3, 4}, low, high)}, g)},
                 one("(4096, 1024) (1024)", {in({4096, 1024}, low, high), in({1024}, low, high)}, g)};
}

std::vector<OpEntry> build() {
  std::vector<OpEntry> t;
  // Element-wise.
  t.push_back(binary_entry("add", [](const Tensor& a, const Tensor& b) { return add(a, b); }));
  t.push_back(binary_entry("sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); }));
  t.push_back(binary_entry("mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); }));
  t.push_back(binary_entry("div", [](const Tensor& a, const Tensor& b) { return div(a, b); }, 0.5, 2.0));
  t.push_back(unary_entry("add_scalar", [](const Tensor& x) { return add_scalar(x, 0.7); }));
  t.push_back(unary_entry("mul_scalar", [](const Tensor& x) { return mul_scalar(x, -1.3); }));
  t.push_back(unary_entry("pow_scalar", [](const Tensor& x) { return pow_scalar(x, 1.5); }, 0.2, 2.0));
  t.push_back(unary_entry("rsub_scalar", [](const Tensor& x) { return rsub_scalar(2.0, x); }));
  t.push_back(unary_entry("rdiv_scalar", [](const Tensor& x) { return rdiv_scalar(2.0, x); }, 0.5, 2.0));
  t.push_back(unary_entry("exp", [](const Tensor& x) { return exp(x); }));
  t.push_back(unary_entry("log", [](const Tensor& x) { return log(x); }, 0.2, 3.0));
  t.push_back(unary_entry("tanh", [](const Tensor& x) { return tanh(x); }, -2.0, 2.0));
  t.push_back(unary_entry("sigmoid", [](const Tensor& x) { return sigmoid(x); }, -3.0, 3.0));
  {
    // Both signs, away from 0 (where relu's derivative jumps and central differences would straddle it):
    // draws in [0.1, 1] times fixed alternating signs.
    const Fixed signs = [](const Inputs& x) {
      std::vector<double> v(static_cast<size_t>(x[0].numel()));
      for (size_t i = 0; i < v.size(); ++i) v[i] = i % 2 ? -1.0 : 1.0;
      return Inputs{op_fixed(v, x[0].shape(), x[0])};
    };
    // (The signs are exact in every dtype; op_fixed makes them float32 beside a bf16 input.)
    const auto g = [](const Inputs& x, const Inputs& fx) { return relu(mul(x[0], fx[0].to(x[0].dtype()))); };
    t.push_back(OpEntry{"relu", {"unary", "unary_backward"}, kFloatBf16, true, 1e-4,
                        {one_fixed("(3, 4) both signs", {in({3, 4}, 0.1, 1.0)}, signs, g)},
                        one_fixed("(128, 32, 1024) both signs", {in({128, 32, 1024}, 0.1, 1.0)}, signs, g)});
  }
  t.push_back(unary_entry("neg", [](const Tensor& x) { return neg(x); }));
  // Reductions.
  t.push_back(OpEntry{"sum(dim)", {"reduce_middle", "broadcast_middle"}, kFloatBf16, true, 1e-4,
                      {one("(3, 4, 5) dim 1", {in({3, 4, 5})}, [](const Inputs& x) { return sum(x[0], 1); }),
                       one("(3, 4) dim -1 keepdim", {in({3, 4})}, [](const Inputs& x) { return sum(x[0], -1, true); })},
                      one("(128, 32, 1024) dim 0", {in({128, 32, 1024})}, [](const Inputs& x) { return sum(x[0], 0); })});
  t.push_back(OpEntry{"mean(dim)", {"reduce_middle", "broadcast_middle"}, kFloatBf16, true, 1e-4,
                      {one("(3, 4, 5) dim 2", {in({3, 4, 5})}, [](const Inputs& x) { return mean(x[0], 2); })},
                      one("(128, 32, 1024) dim 2", {in({128, 32, 1024})}, [](const Inputs& x) { return mean(x[0], 2); })});
  t.push_back(OpEntry{"sum", {"reduce_middle", "broadcast_middle"}, kFloatBf16, true, 1e-4,
                      {one("(3, 4)", {in({3, 4})}, [](const Inputs& x) { return sum(x[0]); })},
                      one("(4096, 1024)", {in({4096, 1024})}, [](const Inputs& x) { return sum(x[0]); })});
  t.push_back(OpEntry{"mean", {"reduce_middle", "broadcast_middle"}, kFloatBf16, true, 1e-4,
                      {one("(3, 4)", {in({3, 4})}, [](const Inputs& x) { return mean(x[0]); })},
                      one("(4096, 1024)", {in({4096, 1024})}, [](const Inputs& x) { return mean(x[0]); })});
  // Products.
  t.push_back(OpEntry{"matmul", {"gemm"}, kFloatBf16, true, 1e-4,
                      {one("(2, 3, 4) @ (4, 5)", {in({2, 3, 4}), in({4, 5})},
                           [](const Inputs& x) { return matmul(x[0], x[1]); }),
                       one("(4, 3)^T @ (5, 4)^T", {in({4, 3}), in({5, 4})},
                           [](const Inputs& x) { return matmul(x[0], x[1], true, true); })},
                      one("(4096, 1024) @ (1024, 3072)", {in({4096, 1024}), in({1024, 3072})},
                          [](const Inputs& x) { return matmul(x[0], x[1]); })});
  t.push_back(OpEntry{"bmm", {"gemm"}, kFloatBf16, true, 1e-4,
                      {one("(2, 3, 4) @ (2, 5, 4)^T", {in({2, 3, 4}), in({2, 5, 4})},
                           [](const Inputs& x) { return bmm(x[0], x[1], false, true); })},
                      one("(64, 128, 64) @ (64, 128, 64)^T", {in({64, 128, 64}), in({64, 128, 64})},
                          [](const Inputs& x) { return bmm(x[0], x[1], false, true); })});
  t.push_back(OpEntry{"linear", {"linear_forward", "linear_parameter_gradients", "gemm", "sum_rows"}, kFloatBf16, true, 1e-4,
                      {one("(2, 3, 4) W (5, 4) b (5)", {in({2, 3, 4}), in({5, 4}), in({5})},
                           [](const Inputs& x) { return linear(x[0], x[1], x[2]); })},
                      one("(4096, 1024) W (3072, 1024) b (3072)", {in({4096, 1024}), in({3072, 1024}), in({3072})},
                          [](const Inputs& x) { return linear(x[0], x[1], x[2]); })});
  {
    // The pre-activations away from 0 (relu's kink, see relu's entry): small x and W, the bias drawn in
    // [0.5, 1] times fixed alternating signs, so that half the columns are clamped.
    const Fixed signs = [](const Inputs& x) {
      std::vector<double> v(static_cast<size_t>(x[2].numel()));
      for (size_t i = 0; i < v.size(); ++i) v[i] = i % 2 ? -1.0 : 1.0;
      return Inputs{op_fixed(v, x[2].shape(), x[2])};
    };
    const auto f = [](const Inputs& x, const Inputs& fx) {
      return linear_relu(x[0], x[1], mul(x[2], fx[0].to(x[2].dtype())));
    };
    t.push_back(OpEntry{"linear_relu", {"linear_forward", "linear_parameter_gradients", "unary_backward", "gemm", "sum_rows"},
                        kFloatBf16, true, 1e-4,
                        {one_fixed("(2, 3, 4) W (5, 4) b (5)", {in({2, 3, 4}, -0.1, 0.1), in({5, 4}, -0.1, 0.1), in({5}, 0.5, 1.0)},
                                   signs, f)},
                        one_fixed("(4096, 512) W (2048, 512) b (2048)",
                                  {in({4096, 512}, -0.1, 0.1), in({2048, 512}, -0.1, 0.1), in({2048}, 0.5, 1.0)}, signs, f)});
  }
  // Attention's products on the (L, B, H*d) layout (strided batched GEMMs; = bmm over split heads).
  t.push_back(OpEntry{"head_scores", {"gemm"}, kFloatBf16, true, 1e-4,
                      {one("q (3, 2, 2 x 2) k (4, 2, 2 x 2)", {in({3, 2, 4}), in({4, 2, 4})},
                           [](const Inputs& x) { return head_scores(x[0], x[1], 2); })},
                      one("q, k (64, 32, 8 x 64)", {in({64, 32, 512}), in({64, 32, 512})},
                          [](const Inputs& x) { return head_scores(x[0], x[1], 8); })});
  t.push_back(OpEntry{"head_mix", {"gemm"}, kFloatBf16, true, 1e-4,
                      {one("p (2 x 2, 3, 4) v (4, 2, 2 x 3)", {in({4, 3, 4}), in({4, 2, 6})},
                           [](const Inputs& x) { return head_mix(x[0], x[1], 2); })},
                      one("p (32 x 8, 64, 64) v (64, 32, 8 x 64)", {in({256, 64, 64}), in({64, 32, 512})},
                          [](const Inputs& x) { return head_mix(x[0], x[1], 8); })});
  {
    // The fused attention (2 heads, scale 0.5) on the projections' layout; key padding (B, Lk) where
    // batch row 1's last key is padded; causal with one key of memory and a window of 2.
    const Fixed key_padding = [](const Inputs& x) {
      const int64_t B = x[1].shape()[1], Lk = x[1].shape()[0];
      std::vector<int64_t> pad(static_cast<size_t>(B * Lk), 0);
      pad[static_cast<size_t>(2 * Lk - 1)] = 1;
      return Inputs{op_index(pad, {B, Lk}, x[0])};
    };
    const auto padded = [](const Inputs& x, const Inputs& fx) {
      return fused_attention(x[0], x[1], x[2], 2, AttentionPattern{}, fx[0], 0.5);
    };
    const auto causal = [](const Inputs& x) {
      return fused_attention(x[0], x[1], x[2], 2, AttentionPattern{true, 1, 2}, Tensor(), 0.5);
    };
    // Both masks at once, as a padded decoder's self-attention: batch row 1's last key hidden as well.
    const auto causal_padded = [](const Inputs& x, const Inputs& fx) {
      return fused_attention(x[0], x[1], x[2], 2, AttentionPattern{true, 0, -1}, fx[0], 0.5);
    };
    t.push_back(OpEntry{"fused_attention", {"fused_attention_forward", "fused_attention_backward"}, kFloatBf16, true, 1e-4,
                        {one_fixed("q (3, 2, 2 x 4), k (5, 2, 2 x 4), v (5, 2, 2 x 3), key padding",
                                   {in({3, 2, 8}), in({5, 2, 8}), in({5, 2, 6})}, key_padding, padded),
                         one("q (4, 2, 2 x 4), k, v (5, 2, 2 x 4), causal, memory 1, window 2",
                             {in({4, 2, 8}), in({5, 2, 8}), in({5, 2, 8})}, causal),
                         one_fixed("q, k, v (5, 2, 2 x 4), causal and key padding",
                                   {in({5, 2, 8}), in({5, 2, 8}), in({5, 2, 8})}, key_padding, causal_padded),
                         one("one query (1, 2, 2 x 4), k, v (5, 2, 2 x 4)", {in({1, 2, 8}), in({5, 2, 8}), in({5, 2, 8})},
                             [](const Inputs& x) {
                               return fused_attention(x[0], x[1], x[2], 2, AttentionPattern{}, Tensor(), 0.5);
                             }),
                         // Split heads, as the decoding cache holds them: (B*H, L, d).
                         one("head-major q (4, 3, 4), k (4, 5, 4), v (4, 5, 3), 2 heads",
                             {in({4, 3, 4}), in({4, 5, 4}), in({4, 5, 3})},
                             [](const Inputs& x) {
                               return fused_attention(x[0], x[1], x[2], 2, AttentionPattern{}, Tensor(), 0.5, 0.0, false,
                                                      default_generator(), HeadsLayout::HeadMajor);
                             }),
                         // Dropout on the weights in training: a generator of its own per call, so every
                         // evaluation drops the same weights (what the gradient check needs).
                         one("q (3, 2, 2 x 4), k, v (5, 2, 2 x 4), dropout 0.3", {in({3, 2, 8}), in({5, 2, 8}), in({5, 2, 8})},
                             [](const Inputs& x) {
                               Generator gen(5);
                               return fused_attention(x[0], x[1], x[2], 2, AttentionPattern{}, Tensor(), 0.5, 0.3, true, gen);
                             })},
                        // The goal shape (L 512, 8 heads of 64), B 16: scripts/gpu_peer_bench.py attention.
                        one("q, k, v (512, 16, 8 x 64) causal", {in({512, 16, 512}), in({512, 16, 512}), in({512, 16, 512})},
                            [](const Inputs& x) {
                              return fused_attention(x[0], x[1], x[2], 8, AttentionPattern{true, 0, -1}, Tensor(), 0.125);
                            })});
  }
  // Normalisation and softmax.
  // bf16: x (and y) in it, the weight and bias float32.
  t.push_back(OpEntry{"layer_norm", {"layer_norm_forward", "layer_norm_backward"}, kFloatBf16, true, 1e-4,
                      {one("(3, 2, 5) affine", {in({3, 2, 5}), in32({5}), in32({5})},
                           [](const Inputs& x) { return layer_norm(x[0], x[1], x[2]); }),
                       one("(4, 6) plain", {in({4, 6})}, [](const Inputs& x) { return layer_norm(x[0], Tensor(), Tensor()); })},
                      one("(4096, 1024) affine", {in({4096, 1024}), in32({1024}), in32({1024})},
                          [](const Inputs& x) { return layer_norm(x[0], x[1], x[2]); })});
  t.push_back(OpEntry{"softmax", {"softmax_forward", "softmax_backward"}, kFloatBf16, true, 1e-4,
                      {one("(3, 4, 5)", {in({3, 4, 5}, -3, 3)}, [](const Inputs& x) { return softmax(x[0]); })},
                      one("(4096, 1024)", {in({4096, 1024}, -3, 3)}, [](const Inputs& x) { return softmax(x[0]); })});
  t.push_back(OpEntry{"log_softmax", {"softmax_forward", "softmax_backward"}, kFloatBf16, true, 1e-4,
                      {one("(3, 4, 5)", {in({3, 4, 5}, -3, 3)}, [](const Inputs& x) { return log_softmax(x[0]); })},
                      one("(4096, 1024)", {in({4096, 1024}, -3, 3)}, [](const Inputs& x) { return log_softmax(x[0]); })});
  {
    const Fixed targets = [](const Inputs& x) {
      const int64_t rows = x[0].shape()[0], classes = x[0].shape()[1];
      std::vector<int64_t> target(static_cast<size_t>(rows));
      for (int64_t i = 0; i < rows; ++i) target[static_cast<size_t>(i)] = (i * 7 + 3) % classes;
      if (rows > 2) target[1] = -100;  // one ignored row
      return Inputs{op_index(target, {rows}, x[0])};
    };
    const auto ce = [](double smoothing, Reduction reduction) {
      return [smoothing, reduction](const Inputs& x, const Inputs& fx) {
        return cross_entropy(x[0], fx[0], -100, reduction, smoothing);
      };
    };
    t.push_back(OpEntry{"cross_entropy", {"cross_entropy_forward", "cross_entropy_backward"}, kFloatBf16, true, 1e-4,
                        {one_fixed("(5, 6) mean, one ignored", {in({5, 6}, -3, 3)}, targets, ce(0.0, Reduction::Mean)),
                         one_fixed("(5, 6) sum, label smoothing 0.1", {in({5, 6}, -3, 3)}, targets,
                                   ce(0.1, Reduction::Sum))},
                        one_fixed("(4096, 256) mean", {in({4096, 256}, -3, 3)}, targets, ce(0.0, Reduction::Mean))});
  }
  {
    // Key padding (B, 1, C) over (B, R, C): batch 1 has two keys masked.
    const Fixed key_padding = [](const Inputs& x) {
      const int64_t B = x[0].shape()[0], C = x[0].shape()[2];
      std::vector<int64_t> mask(static_cast<size_t>(B * C), 0);
      mask[static_cast<size_t>(2 * C - 1)] = mask[static_cast<size_t>(2 * C - 2)] = 1;
      return Inputs{op_index(mask, {B, 1, C}, x[0])};
    };
    const auto soft = [](const Inputs& x, const Inputs& fx) { return masked_softmax(x[0], fx[0]); };
    // exp() maps the -inf outputs to 0, so the finite differences stay finite.
    const auto log_soft = [](const Inputs& x, const Inputs& fx) { return exp(masked_log_softmax(x[0], fx[0])); };
    t.push_back(OpEntry{"masked_softmax", {"masked_softmax_forward", "masked_softmax_backward"}, kFloatBf16, true, 1e-4,
                        {one_fixed("(2, 3, 4) key padding", {in({2, 3, 4}, -3, 3)}, key_padding, soft)},
                        one_fixed("(32, 256, 256) key padding", {in({32, 256, 256}, -3, 3)}, key_padding, soft)});
    t.push_back(OpEntry{"masked_log_softmax", {"masked_softmax_forward", "masked_softmax_backward"}, kFloatBf16, true, 1e-4,
                        {one_fixed("(2, 3, 4) key padding, exp of it", {in({2, 3, 4}, -3, 3)}, key_padding, log_soft)},
                        one_fixed("(32, 256, 256) key padding, exp of it", {in({32, 256, 256}, -3, 3)}, key_padding,
                                  log_soft)});
  }
  {
    const Fixed key_mask = [](const Inputs& x) {
      const int64_t B = x[0].shape()[0], C = x[0].shape()[2];
      std::vector<int64_t> m(static_cast<size_t>(B * C), 0);
      m[static_cast<size_t>(C + 1)] = 1;  // batch 1, key 1
      return Inputs{op_index(m, {B, 1, C}, x[0])};
    };
    // offset 1: each query also sees one key of memory before its own position.
    const auto causal = [](const Inputs& x) { return causal_softmax(x[0], 0.5, 1); };
    const auto causal_masked = [](const Inputs& x, const Inputs& fx) { return causal_softmax(x[0], 0.5, 1, -1, fx[0]); };
    t.push_back(OpEntry{"causal_softmax", {"causal_softmax_forward", "causal_softmax_backward"}, kFloatBf16, true, 1e-4,
                        {one("(2, 3, 4) offset 1", {in({2, 3, 4}, -3, 3)}, causal)},
                        one("(32, 256, 257) offset 1", {in({32, 256, 257}, -3, 3)}, causal)});
    t.push_back(OpEntry{"causal_softmax (key mask)", {"causal_masked_softmax_forward", "causal_masked_softmax_backward"},
                        kFloatBf16, true, 1e-4,
                        {one_fixed("(2, 3, 4) offset 1, key mask", {in({2, 3, 4}, -3, 3)}, key_mask, causal_masked)},
                        one_fixed("(32, 256, 257) offset 1, key mask", {in({32, 256, 257}, -3, 3)}, key_mask,
                                  causal_masked)});
  }
  // Lookups and selections.
  {
    const Fixed few_ids = [](const Inputs& x) {
      const int64_t V = x[0].shape()[0];
      return Inputs{op_index({1, 0, V - 1, 1, 2, 1}, {3, 2}, x[0])};
    };
    const Fixed many_ids = [](const Inputs& x) {
      std::vector<int64_t> ids(128 * 32);
      for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>((i * 2654435761u) % 10000);
      return Inputs{op_index(ids, {128, 32}, x[0])};
    };
    const auto lookup = [](const Inputs& x, const Inputs& fx) { return embedding(x[0], fx[0]); };
    t.push_back(OpEntry{"embedding", {"embedding_forward", "embedding_backward"}, kFloat, true, 1e-4,
                        // (padding_idx: its row's gradient is 0 by contract, as PyTorch's, not the derivative,
                        // so no finite-difference case; tests/gradcheck/test_gradcheck_ops.cpp checks it.)
                        {one_fixed("(5, 3) table, repeated ids", {in({5, 3})}, few_ids, lookup)},
                        one_fixed("(10000, 1024) table, (128, 32) ids", {in({10000, 1024})}, many_ids, lookup)});
  }
  {
    const auto drop = [](const Inputs& x) {
      Generator gen(7);  // the same mask at every evaluation
      return dropout(x[0], 0.25, true, gen);
    };
    t.push_back(OpEntry{"dropout", {"apply_dropout"}, kFloatBf16, true, 1e-4,
                        {one("(4, 3, 5) p 0.25", {in({4, 3, 5})}, drop)},
                        one("(128, 32, 1024) p 0.25", {in({128, 32, 1024})}, drop)});
  }
  {
    const auto pick = [](const Inputs& x, const Inputs& fx) { return index_select(x[0], 1, fx[0]); };
    t.push_back(OpEntry{"index_select", {"index_select_forward", "index_add"}, kFloat, true, 1e-4,
                        {one_fixed("(4, 3, 2) dim 1, repeats", {in({4, 3, 2})},
                                   [](const Inputs& x) { return Inputs{op_index({2, 0, 2, 1}, {4}, x[0])}; }, pick)},
                        one_fixed("(128, 512, 256) dim 1", {in({128, 512, 256})},
                                  [](const Inputs& x) {
                                    std::vector<int64_t> ids(256);
                                    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>((i * 37) % 512);
                                    return Inputs{op_index(ids, {256}, x[0])};
                                  },
                                  pick)});
  }
  t.push_back(OpEntry{"topk", {"topk_forward", "topk_backward"}, kFloat, true, 1e-4,
                      {one("(2, 3, 6) k 3", {in({2, 3, 6})}, [](const Inputs& x) { return topk(x[0], 3).values; })},
                      one("(512, 10000) k 5", {in({512, 10000})}, [](const Inputs& x) { return topk(x[0], 5).values; })});
  {
    // Writes into the first input's values (a cache, as the decoders' key/value caches), not differentiable.
    const Fixed index = [](const Inputs& x) { return Inputs{op_index({3, 0}, {2}, x[0])}; };
    const auto copy_into = [](const Inputs& x, const Inputs& fx) {
      Tensor dst = x[0].detach();
      index_copy_(dst, 1, fx[0], x[1].detach());
      return dst;
    };
    t.push_back(OpEntry{"index_copy_", {"index_copy_forward"}, kFloat, false, 1e-4,
                        {one_fixed("(2, 4, 3) <- (2, 2, 3) dim 1", {in({2, 4, 3}), in({2, 2, 3})}, index, copy_into)},
                        one_fixed("(64, 1024, 64) <- (64, 2, 64) dim 1", {in({64, 1024, 64}), in({64, 2, 64})}, index,
                                  copy_into)});
  }
  {
    // Every third element selected, in the inputs' shape.
    const Fixed pattern = [](const Inputs& x) {
      const int64_t n = x[0].numel();
      std::vector<int64_t> mask(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) mask[static_cast<size_t>(i)] = (i % 3) == 1;
      return Inputs{op_index(mask, x[0].shape(), x[0])};
    };
    const auto fill = [](const Inputs& x, const Inputs& fx) { return masked_fill(x[0], fx[0], -5.0); };
    const auto pick = [](const Inputs& x, const Inputs& fx) { return where(fx[0], x[0], x[1]); };
    t.push_back(OpEntry{"masked_fill", {"select"}, kFloatBf16, true, 1e-4,
                        {one_fixed("(4, 2, 3)", {in({4, 2, 3})}, pattern, fill)},
                        one_fixed("(4096, 1024)", {in({4096, 1024})}, pattern, fill)});
    t.push_back(OpEntry{"where", {"select"}, kFloatBf16, true, 1e-4,
                        {one_fixed("(2, 3)", {in({2, 3}), in({2, 3})}, pattern, pick)},
                        one_fixed("(4096, 1024)", {in({4096, 1024}), in({4096, 1024})}, pattern, pick)});
  }
  // Shapes.
  t.push_back(OpEntry{"slice", {"copy_middle"}, kFloatBf16, true, 1e-4,
                      {one("(3, 5, 2) dim 1 [1, 4)", {in({3, 5, 2})}, [](const Inputs& x) { return slice(x[0], 1, 1, 4); })},
                      one("(128, 32, 3072) dim 2 [1024, 2048)", {in({128, 32, 3072})},
                          [](const Inputs& x) { return slice(x[0], 2, 1024, 2048); })});
  t.push_back(OpEntry{"concat", {"copy_pieces"}, kFloatBf16, true, 1e-4,
                      {one("(2, 3) (2, 1) dim 1", {in({2, 3}), in({2, 1})},
                           [](const Inputs& x) { return concat({x[0], x[1]}, 1); })},
                      one("(128, 32, 1024) x 2 dim 2", {in({128, 32, 1024}), in({128, 32, 1024})},
                          [](const Inputs& x) { return concat({x[0], x[1]}, 2); })});
  t.push_back(OpEntry{"split", {"copy_middle"}, kFloatBf16, true, 1e-4,
                      {many("(2, 5) into 2 + 3 dim 1", {in({2, 5})}, [](const Inputs& x) { return split(x[0], {2, 3}, 1); })},
                      many("(128, 32, 3072) into 3 x 1024", {in({128, 32, 3072})},
                           [](const Inputs& x) { return split(x[0], {1024, 1024, 1024}, 2); })});
  t.push_back(OpEntry{"transpose", {"transpose_copy"}, kFloatBf16, true, 1e-4,
                      {one("(2, 3, 4) 0 <-> 2, made contiguous", {in({2, 3, 4})},
                           [](const Inputs& x) { return reshape(transpose(x[0], 0, 2), {-1}); })},
                      one("(128, 32, 1024) 0 <-> 1", {in({128, 32, 1024})},
                          [](const Inputs& x) { return reshape(transpose(x[0], 0, 1), {-1}); })});
  t.push_back(OpEntry{"unbind", {"copy_pieces"}, kFloatBf16, true, 1e-4,
                      {many("(3, 2, 2)", {in({3, 2, 2})}, [](const Inputs& x) { return unbind(x[0]); })},
                      many("(128, 32, 1024)", {in({128, 32, 1024})}, [](const Inputs& x) { return unbind(x[0]); })});
  // The recurrences.
  {
    // U (L, B, 3 d), x (L, B, d), weight_c and bias (2 d), c0 (B, d); fixed: the dropout mask on c (B, d)
    // and padding (L, B) where sequence 1 ends a step early.
    const Fixed masks = [](const Inputs& x) {
      const int64_t L = x[1].shape()[0], B = x[1].shape()[1], d = x[1].shape()[2];
      std::vector<double> m(static_cast<size_t>(B * d), 1.0);
      m[1] = 0.0;
      m[2] = 2.0;
      std::vector<int64_t> pad(static_cast<size_t>(L * B), 0);
      pad[static_cast<size_t>((L - 1) * B + 1)] = 1;
      return Inputs{op_fixed(m, {B, d}, x[2]), op_index(pad, {L, B}, x[2])};
    };
    const auto sru = [](const Inputs& x, const Inputs& fx) {
      SruRecurrenceOptions o;
      o.hidden_size = x[1].shape()[2];
      o.scale_x = 1.3;
      const bool extras = !fx.empty();
      auto [h, c] = sru_recurrence(x[0], x[1], x[2], x[3], extras ? x[4] : Tensor(), extras ? fx[0] : Tensor(),
                                   extras ? fx[1] : Tensor(), o);
      return Outputs{h, c};
    };
    const int64_t d = 3, L = 4, B = 2, D = 1024, LB = 128, BB = 32;
    t.push_back(OpEntry{"sru_recurrence",
                        {"sru_recurrence_forward", "sru_recurrence_backward"},
                        {DType::F32, DType::F64, DType::BF16},
                        true,
                        1e-4,
                        {OpCase{"L 4, B 2, d 3", {in({L, B, 3 * d}), in({L, B, d}), in32({2 * d}), in32({2 * d})}, nullptr, sru},
                         OpCase{"L 4, B 2, d 3, c0, dropout mask, padding",
                                {in({L, B, 3 * d}), in({L, B, d}), in32({2 * d}), in32({2 * d}), in32({B, d})}, masks,
                                sru}},
                        OpCase{"L 128, B 32, d 1024", {in({LB, BB, 3 * D}), in({LB, BB, D}), in32({2 * D}), in32({2 * D})},
                               nullptr, sru}});
  }
  {
    const auto esru = [](const Inputs& x) {
      EmbedSruRecurrenceOptions o;
      auto [h, c] = embed_sru_recurrence(x[0], x[1], x[2], x[3], x[4], Tensor(), Tensor(), o);
      return Outputs{h, c};
    };
    // Gates inside (0, 1), as the clipped tables keep them.
    const auto shapes = [](int64_t L, int64_t B, int64_t d) {
      return std::vector<OpInput>{in({L, B, d}), in({L, B, d}, 0.05, 0.95), in({L, B, d}, 0.05, 0.95), in({L, B, d}),
                                  in({B, d})};
    };
    t.push_back(OpEntry{"embed_sru_recurrence", {"embed_sru_recurrence_forward", "embed_sru_recurrence_backward"},
                        kFloat, true, 1e-4, {many("L 4, B 2, d 3, c0", shapes(4, 2, 3), esru)},
                        many("L 128, B 32, d 1024", shapes(128, 32, 1024), esru)});
  }
  {
    // U (L, B, 2d) = [z | u_f], forget_bias (d), c0 (B, d); fixed: padding (L, B) where sequence 1 ends a
    // step early.
    const Fixed padding = [](const Inputs& x) {
      const int64_t L = x[0].shape()[0], B = x[0].shape()[1];
      std::vector<int64_t> pad(static_cast<size_t>(L * B), 0);
      pad[static_cast<size_t>((L - 1) * B + 1)] = 1;
      return Inputs{op_index(pad, {L, B}, x[0])};
    };
    const auto ssru = [](const Inputs& x, const Inputs& fx) {
      auto [h, c] = ssru_recurrence(x[0], x.size() > 1 ? x[1] : Tensor(), x.size() > 2 ? x[2] : Tensor(),
                                    fx.empty() ? Tensor() : fx[0]);
      return Outputs{h, c};
    };
    t.push_back(OpEntry{"ssru_recurrence", {"ssru_recurrence_forward", "ssru_recurrence_backward"}, kFloat, true, 1e-4,
                        {OpCase{"L 4, B 2, d 3", {in({4, 2, 6}, -2, 2)}, nullptr, ssru},
                         OpCase{"L 5, B 3, d 4, bias, c0, padding", {in({5, 3, 8}, -2, 2), in({4}), in({3, 4})}, padding,
                                ssru}},
                        OpCase{"L 128, B 32, d 1024", {in({128, 32, 2048}), in({1024}), in({32, 1024})}, nullptr, ssru}});
  }
  {
    const auto lstm = [](const Inputs& x) {
      const LstmRecurrenceResult r = lstm_recurrence(x[0], x[1], x[2], x[3], x[4], Tensor(), false);
      return Outputs{r.output, r.h, r.c};
    };
    const auto shapes = [](int64_t L, int64_t B, int64_t H) {
      return std::vector<OpInput>{in({L, B, 4 * H}, -2, 2), in({4 * H, H}), in({4 * H}), in({B, H}), in({B, H})};
    };
    t.push_back(OpEntry{"lstm_recurrence", {"lstm_recurrence_forward", "lstm_recurrence_backward"}, kFloat, true, 1e-4,
                        {many("L 5, B 3, H 2, bias, h0, c0", shapes(5, 3, 2), lstm)},
                        many("L 128, B 32, H 512", shapes(128, 32, 512), lstm)});
  }
  return t;
}

}  // namespace

const std::vector<OpEntry>& op_table() {
  static const std::vector<OpEntry> table = build();
  return table;
}

std::string op_table_identifier(size_t i) {
  std::string name = op_table().at(i).name;
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
}

const std::vector<KernelOutsideTable>& kernels_outside_op_table() {
  static const std::vector<KernelOutsideTable> kernels = {
      {"optimizer_update", "tests/unit/test_optim.cpp and the optimiser cases of tests/parity/test_cuda_parity.cpp"},
      {"optimizer_update_segments", "the whole-buffer update of a flat group: tests/unit/test_flat_parameters.cpp, "
                                    "tests/parity/test_cuda_parity.cpp (WholeBufferUpdateAndNormThroughTheSegmentTable)"},
      {"sum_squares_blocks", "gradient clipping: tests/unit/test_optim.cpp, tests/parity/test_cuda_parity.cpp"},
      {"sum_squares_segments", "gradient clipping over a flat gradient buffer: tests/unit/test_flat_parameters.cpp, "
                               "tests/parity/test_cuda_parity.cpp (WholeBufferUpdateAndNormThroughTheSegmentTable)"},
      {"finish_grad_norm", "gradient clipping: tests/unit/test_optim.cpp, tests/parity/test_cuda_parity.cpp"},
      {"scale_by_clip_factor", "gradient clipping: tests/unit/test_optim.cpp, tests/parity/test_cuda_parity.cpp"},
      {"fill_dropout_mask", "the variational masks (ops/dropout.h dropout_mask): tests/unit/test_ops_forward.cpp, "
                            "CudaParity.DropoutMasksAreBitIdentical"},
  };
  return kernels;
}

std::vector<Tensor> make_op_inputs(const OpCase& c, DType dtype, Device device, uint64_t seed) {
  std::vector<Tensor> inputs;
  const bool storage16 = dtype == DType::BF16 || dtype == DType::F16;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const OpInput& spec = c.inputs[i];
    Generator gen(seed + i);
    // Drawn in float64 and converted, so every dtype sees the same values up to its rounding.
    Tensor x = Tensor::uniform(spec.shape, spec.low, spec.high, DType::F64, gen);
    x = x.to(storage16 ? (spec.storage16 ? dtype : DType::F32) : dtype).to(device);
    x.set_requires_grad(true);
    inputs.push_back(x);
  }
  return inputs;
}

std::vector<Tensor> make_op_fixed(const OpCase& c, const std::vector<Tensor>& inputs) {
  return c.fixed ? c.fixed(inputs) : std::vector<Tensor>{};
}

Tensor op_fixed(const std::vector<double>& values, const Shape& shape, const Tensor& like) {
  const DType dtype = like.dtype() == DType::F64 ? DType::F64 : DType::F32;
  return Tensor::from_vector(values, shape).to(dtype).to(like.device());
}

Tensor op_index(const std::vector<int64_t>& values, const Shape& shape, const Tensor& like) {
  return Tensor::from_vector(values, shape).to(like.device());
}

}  // namespace sru
