// The per-element rules of the fused attention (ops/attention.h), shared by its CPU kernels
// (ops/cpu/attention.cpp) and their CUDA twins (ops/cuda/attention.cu): which key a query sees, where
// each element of the (B, H, Lq, Lk) weights sits, and the dropout factor of that element, drawn from
// the same Philox words as dropout() over the weights would draw (ops/dropout.h), so the fused and the
// composed attention drop the same weights.
#pragma once

#include <cstdint>

#include "core/hd.h"
#include "core/philox.h"
#include "ops/dropout.h"

namespace sru {

// Which keys query i (of Lq) sees besides the key-padding tensor: all, or with causal the keys
// j <= i + offset (the keys being [offset earlier positions | the queries' own]) and, with window >= 0,
// only j >= i + offset - window. The same pattern as CausalMask (ops/masked_softmax_math.h).
struct AttentionPattern {
  bool causal = false;
  long long offset = 0;
  long long window = -1;
  SRU_HD bool sees(long long i, long long j) const {
    if (!causal) return true;
    const long long at = i + offset;
    return j <= at && (window < 0 || j >= at - window);
  }
  // The keys query i may see, [first, last] (before padding); empty when last < first.
  SRU_HD long long first_key(long long i) const { return causal && window >= 0 ? i + offset - window : 0; }
  SRU_HD long long last_key(long long i, long long Lk) const {
    return causal ? (i + offset < Lk - 1 ? i + offset : Lk - 1) : Lk - 1;
  }
  // Whether every query of [i_first, i_last] sees every key of [j_first, j_last]: a tile of the CUDA
  // kernels that needs no mask. The causal bound binds at (i_first, j_last), the window's at
  // (i_last, j_first).
  SRU_HD bool sees_all(long long i_first, long long i_last, long long j_first, long long j_last) const {
    return sees(i_first, j_last) && sees(i_last, j_first);
  }
  // The keys [first, last] that some query of [i0, i_last] may see: a block of queries skips the key
  // tiles outside it.
  SRU_HD void keys_seen_by(long long i0, long long i_last, long long Lk, long long& first, long long& last) const {
    first = first_key(i0) < 0 ? 0 : first_key(i0);
    last = last_key(i_last, Lk);
  }
  // The queries [first, last] of Lq that may see some key of [j0, j_last]: causal i >= j - offset; with a
  // window also i <= j + window - offset.
  SRU_HD void queries_seeing(long long j0, long long j_last, long long Lq, long long& first, long long& last) const {
    first = 0;
    last = Lq - 1;
    if (!causal) return;
    first = j0 - offset > 0 ? j0 - offset : 0;
    if (window >= 0 && j_last + window - offset < last) last = j_last + window - offset;
  }
};

// Where the features of (position, batch row b, head h) start in an operand, in elements: the
// projections' time-major layout (L, B, H*d) or the head-major one (B*H, L, d) of split heads and of
// the decoding cache (whose rows are `length` apart: its capacity).
struct HeadStrides {
  long long position = 0, batch = 0, head = 0;
  SRU_HD long long at(long long p, long long b, long long h) const { return p * position + b * batch + h * head; }
  static HeadStrides time_major(long long B, long long H, long long d) { return {B * H * d, H * d, d}; }
  static HeadStrides head_major(long long length, long long H, long long d) { return {d, H * length * d, length * d}; }
};

// The sizes of one call and its operands' layouts (q and out: Lq positions, k and v: Lk).
struct AttentionShape {
  long long B = 0, H = 1, Lq = 0, Lk = 0, dh = 0, dv = 0;
  double scale = 1.0;
  AttentionPattern pattern;
  HeadStrides q, k, v, o;
  SRU_HD long long q_at(long long i, long long b, long long h) const { return q.at(i, b, h); }
  SRU_HD long long k_at(long long j, long long b, long long h) const { return k.at(j, b, h); }
  SRU_HD long long v_at(long long j, long long b, long long h) const { return v.at(j, b, h); }
  SRU_HD long long o_at(long long i, long long b, long long h) const { return o.at(i, b, h); }
  // Row (b, h, i) of the saved statistics (B*H*Lq) and of the weights (B, H, Lq, Lk).
  SRU_HD long long row(long long b, long long h, long long i) const { return (b * H + h) * Lq + i; }
  // Whether key j of batch row b is padded (pad: the (B, Lk) float32 key padding, null = none).
  SRU_HD bool key_padded(const float* pad, long long b, long long j) const { return pad && pad[b * Lk + j] != 0.0f; }
  // Whether query i of batch row b sees key j: the pattern and the key padding.
  SRU_HD bool sees(const float* pad, long long b, long long i, long long j) const {
    return pattern.sees(i, j) && !key_padded(pad, b, j);
  }
};

// Dropout on the weights: element (b, h, i, j) is kept when the Philox uniform of word
// window.global_index(((b H + h) Lq + i) Lk + j) of (seed, offset) is >= p, and then multiplied by
// keep = 1 / (1 - p); inactive: every factor 1.
struct AttentionDropout {
  bool active = false;
  float p = 0.0f;
  double keep = 1.0;
  uint64_t seed = 0;
  PhiloxOffset offset;
  MaskWindow window;
  SRU_HD bool kept(long long element) const {
    if (!active) return true;
    const uint32_t word = philox::random_u32(seed, offset.value(), static_cast<uint64_t>(window.global_index(element)));
    return philox::u32_to_unit_float(word) >= p;
  }
  // The element's factor in the compute type C: 1 when inactive, else keep or 0.
  template <typename C>
  SRU_HD C factor(long long element) const {
    if (!active) return C(1);
    return kept(element) ? static_cast<C>(keep) : C(0);
  }
};

}  // namespace sru
