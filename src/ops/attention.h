// Fused multi-head scaled dot-product attention, forward and backward in one op each (flash
// attention's scheme; Dao et al. 2022): per (batch row b, head h)
//   S = scale q k^T  (Lq, Lk),  P = softmax over the keys each query sees,  out = (P * Z) v
// with Z the dropout factors (0 or 1 / (1 - p), training only) and no (Lq, Lk) matrix in memory: the
// forward keeps one float32 log-sum-exp per query row (`lse`), and the backward recomputes P from it:
//   D_i = dO_i . out_i,  dV_j = sum_i P_ij Z_ij dO_i,  dS_ij = P_ij (Z_ij dO_i . v_j - D_i),
//   dQ_i = scale sum_j dS_ij k_j,  dK_j = scale sum_i dS_ij q_i.
// Heads are read in place from the projections' time-major layout (no split / merge copies):
//   q (Lq, B, H*dh), k (Lk, B, H*dh), v (Lk, B, H*dv)  ->  out (Lq, B, H*dv), q's dtype;
// or, HeadsLayout::HeadMajor, split heads and the decoding cache's buffers: q (B*H, Lq, dh), k (B*H,
// Lk, dh), v (B*H, Lk, dv) -> out (B*H, Lq, dv), row b*H + h.
// Masks: `pattern` (ops/attention_math.h: causal with offset and window, or none) and key_padding
// (B, Lk, any dtype, nonzero = a padded key hidden from every query; undefined = none). A query that
// sees no key gets a zero output and zero gradients (as masked_softmax's fully masked rows).
// Dropout draws the numbers dropout() would draw over the (B, H, Lq, Lk) weights with the batch as
// dim 0 (batch shards included), so this op and the composed attention (bmm, masked / causal softmax,
// dropout, bmm: nn/attention.h) drop the same weights for a generator state and differ by rounding
// only. f32, bf16 (float32 math and statistics) and f64 (double; the gradient checks); dh, dv <= 128
// (kFusedAttentionMaxHead; the CUDA kernels at f64: <= 64). The CPU kernels are the CUDA kernels'
// twin in arithmetic (a query row at a time, float32 sums), not in blocking. On a GPU, bf16 heads of 64
// features run on tensor cores where the card has them (ops/cuda/attention_tensor_cores.cu: the weights
// and dS rounded to bf16 before their products, as flash attention does; within the bf16 parity bounds).
#pragma once

#include <cstdint>

#include "core/rng.h"
#include "core/tensor.h"
#include "ops/attention_math.h"
#include "ops/kernels.h"

namespace sru {

constexpr long long kFusedAttentionMaxHead = 128;

enum class HeadsLayout { TimeMajor, HeadMajor };

// Whether fused_attention takes heads of these widths in `dtype` on `device` (else compose it).
bool fused_attention_supports(long long dh, long long dv, DType dtype, Device device);

Tensor fused_attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads, const AttentionPattern& pattern,
                       const Tensor& key_padding, double scale, double dropout_p = 0.0, bool training = false,
                       Generator& gen = default_generator(), HeadsLayout layout = HeadsLayout::TimeMajor);

struct AttentionTensors {
  Tensor q, k, v, key_padding;  // key_padding: float32 (B, Lk) or undefined
  const float* padding_data() const { return key_padding.defined() ? key_padding.data<float>() : nullptr; }
};
template <typename F>
void visit_tensors(const AttentionTensors& t, F&& f) {
  for (const Tensor* p : {&t.q, &t.k, &t.v, &t.key_padding}) f(*p);
}
#ifndef __CUDACC__
template <typename F>
void visit_tensors(const AttentionShape&, F&&) {}
template <typename F>
void visit_tensors(const AttentionDropout&, F&&) {}
#endif

namespace cuda {
// fused_attention calls (forward or backward) that ran on the bf16 tensor-core kernels
// (ops/cuda/attention_tensor_cores.cu: heads of 64 features on cards of compute capability 8.0 and
// later), since the process started. CUDA builds only.
uint64_t tensor_core_attention_calls();
// Of those, the calls whose operands' rows were not all 16-byte aligned, loaded 4 bytes a word instead
// of 16 (a view at an odd offset, strides not multiples of 8 elements). CUDA builds only.
uint64_t tensor_core_attention_narrow_calls();
// Whether those calls may take the tensor-core kernels (the default; SRU_ATTENTION_SIMT=1 in the
// environment switches them off for the process) or the SIMT ones: the tests compare both on one card.
void allow_tensor_core_attention(bool allowed);
}  // namespace cuda

// Kernels of both backends (ops/kernels.h): the CUDA twins (ops/cuda/attention.cu) have the same
// contracts, tensors on one CUDA device.
SRU_DECLARE_KERNELS(
// Writes out (q's layout, dv features a head) and lse (B*H*Lq, float32; float64 for f64; -inf for a query that sees no key).
void fused_attention_forward(const AttentionTensors& in, const AttentionShape& shape, const AttentionDropout& drop,
                             const Tensor& out, const Tensor& lse);
// Overwrites gq, gk, gv (the shapes of q, k, v) from grad_out (out's shape); row_dot: scratch of lse's
// shape and dtype for D_i.
void fused_attention_backward(const AttentionTensors& in, const AttentionShape& shape, const AttentionDropout& drop,
                              const Tensor& out, const Tensor& lse, const Tensor& grad_out, const Tensor& row_dot,
                              const Tensor& gq, const Tensor& gk, const Tensor& gv);
)

}  // namespace sru
