// Autograd wrapper of the fused attention (ops/attention.h): argument checks, the dropout draw, the
// saved state and the backward.
#include "ops/attention.h"

#include "autograd/node.h"
#include "ops/dispatch.h"
#include "ops/dropout.h"

namespace sru {

bool fused_attention_supports(long long dh, long long dv, DType dtype, Device device) {
  if (dtype != DType::F32 && dtype != DType::BF16 && dtype != DType::F64) return false;
  const long long most = device.is_cuda() && dtype == DType::F64 ? 64 : kFusedAttentionMaxHead;
  return dh >= 1 && dv >= 1 && dh <= most && dv <= most;
}

namespace {

AttentionShape shape_of(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads, const AttentionPattern& pattern,
                        const Tensor& key_padding, double scale, HeadsLayout layout) {
  const char* op = "fused_attention";
  SRU_CHECK(q.defined() && k.defined() && v.defined(), op, ": q, k and v are required");
  const auto shapes = [&] {
    return "q " + shape_str(q.shape()) + ", k " + shape_str(k.shape()) + ", v " + shape_str(v.shape());
  };
  SRU_CHECK(heads >= 1 && q.dim() == 3 && k.dim() == 3 && v.dim() == 3, op, ": q, k, v must have 3 dims, got ", shapes());
  AttentionShape s;
  s.H = heads;
  s.scale = scale;
  s.pattern = pattern;
  if (layout == HeadsLayout::TimeMajor) {
    SRU_CHECK(q.size(2) % heads == 0 && v.size(2) % heads == 0 && k.size(2) == q.size(2) && k.size(0) == v.size(0) &&
                  q.size(1) == k.size(1) && v.size(1) == k.size(1),
              op, ": expected q (Lq, B, H*dh), k (Lk, B, H*dh), v (Lk, B, H*dv) with H = ", heads, ", got ", shapes());
    s.B = q.size(1);
    s.Lq = q.size(0);
    s.Lk = k.size(0);
    s.dh = q.size(2) / heads;
    s.dv = v.size(2) / heads;
    s.q = s.k = HeadStrides::time_major(s.B, heads, s.dh);
    s.v = s.o = HeadStrides::time_major(s.B, heads, s.dv);
  } else {
    SRU_CHECK(q.size(0) % heads == 0 && k.size(0) == q.size(0) && v.size(0) == q.size(0) && k.size(2) == q.size(2) &&
                  k.size(1) == v.size(1),
              op, ": expected q (B*H, Lq, dh), k (B*H, Lk, dh), v (B*H, Lk, dv) with H = ", heads, ", got ", shapes());
    s.B = q.size(0) / heads;
    s.Lq = q.size(1);
    s.Lk = k.size(1);
    s.dh = q.size(2);
    s.dv = v.size(2);
    s.q = HeadStrides::head_major(s.Lq, heads, s.dh);
    s.k = HeadStrides::head_major(s.Lk, heads, s.dh);
    s.v = HeadStrides::head_major(s.Lk, heads, s.dv);
    s.o = HeadStrides::head_major(s.Lq, heads, s.dv);
  }
  for (const Tensor* t : {&k, &v}) {
    check_same_dtype(q, *t, op);
    check_same_device(q, *t, op);
  }
  SRU_CHECK(fused_attention_supports(s.dh, s.dv, q.dtype(), q.device()), op, ": heads of ", s.dh, " (q, k) and ", s.dv,
            " (v) features in ", dtype_name(q.dtype()), " on ", q.device().str(), " are not supported (f32, bf16, f64; at most ",
            kFusedAttentionMaxHead, ", 64 for f64 on CUDA); compose the attention instead");
  if (key_padding.defined()) {
    SRU_CHECK((key_padding.shape() == Shape{s.B, s.Lk}), op, ": key_padding must be (B, Lk) = (", s.B, ", ", s.Lk,
              "), got ", shape_str(key_padding.shape()));
    check_same_device(q, key_padding, op);
  }
  return s;
}

}  // namespace

Tensor fused_attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads, const AttentionPattern& pattern,
                       const Tensor& key_padding, double scale, double dropout_p, bool training, Generator& gen,
                       HeadsLayout layout) {
  check_floating16(q, "fused_attention");
  const AttentionShape shape = shape_of(q, k, v, heads, pattern, key_padding, scale, layout);
  SRU_CHECK(dropout_p >= 0.0 && dropout_p < 1.0, "fused_attention: dropout probability must be in [0, 1), got ", dropout_p);
  // The mask as float32 (nonzero = hidden): one type for the kernels to read.
  const Tensor padding = key_padding.defined() ? key_padding.detach().to(DType::F32) : Tensor();
  AttentionDropout drop;
  if (training && dropout_p > 0.0) {
    // The words dropout() would reserve over the (B, H, Lq, Lk) weights, batch first.
    int64_t words = 0;
    drop.window = mask_window({shape.B, shape.H, shape.Lq, shape.Lk}, gen.batch_shard(), 0, words);
    drop.active = true;
    drop.p = static_cast<float>(dropout_p);
    drop.keep = 1.0 / (1.0 - dropout_p);
    drop.seed = gen.seed();
    drop.offset = gen.draw(static_cast<uint64_t>(words));
  }
  const DType stats = q.dtype() == DType::F64 ? DType::F64 : DType::F32;
  const AttentionTensors in{q, k, v, padding};
  const Shape out_shape = layout == HeadsLayout::TimeMajor ? Shape{shape.Lq, shape.B, shape.H * shape.dv}
                                                           : Shape{shape.B * shape.H, shape.Lq, shape.dv};
  Tensor out = Tensor::empty(out_shape, q.dtype(), q.device());
  Tensor lse = Tensor::empty({shape.B * shape.H * shape.Lq}, stats, q.device());
  SRU_KERNEL(q.device(), fused_attention_forward, in, shape, drop, out, lse);

  if (autograd::needs_grad({q, k, v})) {
    const AttentionTensors kept{q.detach(), k.detach(), v.detach(), padding};
    const Tensor out_kept = out.detach();
    autograd::record("FusedAttentionBackward", {q, k, v}, {out}, [=](const std::vector<Tensor>& g) {
      const Tensor& go = g[0];
      Tensor gq = Tensor::empty(kept.q.shape(), kept.q.dtype(), kept.q.device());
      Tensor gk = Tensor::empty(kept.k.shape(), kept.k.dtype(), kept.k.device());
      Tensor gv = Tensor::empty(kept.v.shape(), kept.v.dtype(), kept.v.device());
      Tensor row_dot = Tensor::empty(lse.shape(), lse.dtype(), lse.device());
      SRU_KERNEL(gq.device(), fused_attention_backward, kept, shape, drop, out_kept, lse, go, row_dot, gq, gk, gv);
      return std::vector<Tensor>{gq, gk, gv};
    });
  }
  return out;
}

}  // namespace sru
