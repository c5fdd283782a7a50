// CPU entry points of the fused SRU recurrence: converts the padding mask once, then runs the
// kernels of ops/cpu/sru_recurrence_kernels.h compiled for AVX-512 or AVX2 when the processor has it,
// else the baseline x86-64 (or other architecture) build of the same code (all three give the same bits). bf16 I/O (the CUDA kernels'
// twin): the kernels read U, x and grad h as bf16 and write h, grad U and grad x rounded to bf16 once,
// where the GPU rounds them (float arithmetic and state); a float32 grad h or gradient buffer under
// bf16 U (no caller makes one) takes the old route: U and x widened, the float kernels, the results rounded after.
#define SRU_KERNEL_NAMESPACE baseline
#include "ops/cpu/sru_recurrence_kernels.h"
#include "ops/cpu/padding.h"

#include <algorithm>

namespace sru::cpu {

#if defined(SRU_HAVE_AVX2_KERNELS)
#define SRU_DECLARE_KERNELS(isa)                                                                                  \
  namespace isa {                                                                                                \
  void forward(const SruTensors&, const SruRecurrenceOptions&, const std::vector<uint8_t>&, const Tensor&,       \
               const Tensor&, const Tensor&);                                                                    \
  void backward(const SruTensors&, const SruRecurrenceOptions&, const std::vector<uint8_t>&, const Tensor&,      \
                const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,        \
                const Tensor&);                                                                                  \
  }
SRU_DECLARE_KERNELS(avx2)
SRU_DECLARE_KERNELS(avx512)
#undef SRU_DECLARE_KERNELS
#endif

namespace {

SruKernelIsa widest_allowed = SruKernelIsa::Avx512;

SruKernelIsa supported_isa() {
#if defined(SRU_HAVE_AVX2_KERNELS)
  static const SruKernelIsa isa = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                                          __builtin_cpu_supports("avx512vl")
                                      ? SruKernelIsa::Avx512
                                  : __builtin_cpu_supports("avx2") ? SruKernelIsa::Avx2
                                                                   : SruKernelIsa::Baseline;
  return isa;
#else
  return SruKernelIsa::Baseline;
#endif
}

SruKernelIsa isa_in_use() { return std::min(supported_isa(), widest_allowed); }

}  // namespace

SruKernelIsa sru_kernel_isa_in_use() { return isa_in_use(); }

const char* sru_kernel_isa() {
  switch (isa_in_use()) {
    case SruKernelIsa::Avx512: return "avx512";
    case SruKernelIsa::Avx2: return "avx2";
    case SruKernelIsa::Baseline: break;
  }
  return "baseline";
}

SruKernelIsa limit_sru_kernel_isa(SruKernelIsa widest) {
  const SruKernelIsa previous = widest_allowed;
  widest_allowed = widest;
  return previous;
}

namespace {

// The bf16 I/O operands widened to float32 (state, parameters and masks are float32 already).
SruTensors widened(const SruTensors& in) {
  SruTensors f = in;
  f.U = in.U.to(DType::F32);
  if (in.x.defined()) f.x = in.x.to(DType::F32);
  return f;
}

// A float32 buffer for a bf16 output, or undefined when the output is.
Tensor float_buffer(const Tensor& t) { return t.defined() ? Tensor::empty(t.shape(), DType::F32) : Tensor(); }

// The mask a MaskDraw describes, filled by the dropout kernel itself (cpu::fill_dropout_mask: the same
// values as dropout_mask's tensor), as the mask_c the kernels read, and the options without the draw.
std::pair<SruTensors, SruRecurrenceOptions> with_drawn_mask(const SruTensors& in, const SruRecurrenceOptions& o) {
  const int64_t out = (o.bidirectional ? 2 : 1) * o.hidden_size;
  SruTensors drawn = in;
  drawn.mask_c = Tensor::empty({in.U.size(1), out}, in.weight_c.dtype());
  const MaskDraw& d = o.mask_c_draw;
  fill_dropout_mask(d.seed, d.offset, d.p, drawn.mask_c, d.window);
  SruRecurrenceOptions plain = o;
  plain.mask_c_draw = MaskDraw();
  return {drawn, plain};
}

void round_into(const Tensor& dst, const Tensor& src) {
  if (dst.defined()) Tensor(dst).copy_(src);
}

}  // namespace

void sru_recurrence_forward(const SruTensors& in, const SruRecurrenceOptions& o, const Tensor& h, const Tensor& c_all,
                            const Tensor& c_last) {
  if (o.mask_c_draw.on) {  // the ISA kernels read a mask: drawn here, inside this dispatch
    const auto [drawn, plain] = with_drawn_mask(in, o);
    return sru_recurrence_forward(drawn, plain, h, c_all, c_last);
  }
  if (in.U.dtype() == DType::BF16) {
    SRU_CHECK((!in.x.defined() || in.x.dtype() == DType::BF16) && h.dtype() == DType::BF16,
              "sru_recurrence: bf16 U needs bf16 x and h");
  }
  const std::vector<uint8_t> pad = padding_bytes(in.mask_pad);
#if defined(SRU_HAVE_AVX2_KERNELS)
  if (isa_in_use() == SruKernelIsa::Avx512) return avx512::forward(in, o, pad, h, c_all, c_last);
  if (isa_in_use() == SruKernelIsa::Avx2) return avx2::forward(in, o, pad, h, c_all, c_last);
#endif
  baseline::forward(in, o, pad, h, c_all, c_last);
}

void sru_recurrence_backward(const SruTensors& in, const SruRecurrenceOptions& o, const Tensor& c_all,
                             const Tensor& grad_h, const Tensor& grad_c_last, const Tensor& grad_U,
                             const Tensor& grad_x, const Tensor& grad_weight_c, const Tensor& grad_bias,
                             const Tensor& grad_c0) {
  if (o.mask_c_draw.on) {
    const auto [drawn, plain] = with_drawn_mask(in, o);
    return sru_recurrence_backward(drawn, plain, c_all, grad_h, grad_c_last, grad_U, grad_x, grad_weight_c, grad_bias,
                                   grad_c0);
  }
  const bool bf16_io = grad_h.dtype() == DType::BF16 && grad_U.dtype() == DType::BF16 &&
                       (!grad_x.defined() || grad_x.dtype() == DType::BF16);
  if (in.U.dtype() == DType::BF16 && !bf16_io) {
    const Tensor gU32 = float_buffer(grad_U), gx32 = float_buffer(grad_x);
    sru_recurrence_backward(widened(in), o, c_all, grad_h.to(DType::F32), grad_c_last, gU32, gx32, grad_weight_c,
                            grad_bias, grad_c0);
    round_into(grad_U, gU32);
    round_into(grad_x, gx32);
    return;
  }
  const std::vector<uint8_t> pad = padding_bytes(in.mask_pad);
#if defined(SRU_HAVE_AVX2_KERNELS)
  if (isa_in_use() == SruKernelIsa::Avx512)
    return avx512::backward(in, o, pad, c_all, grad_h, grad_c_last, grad_U, grad_x, grad_weight_c, grad_bias, grad_c0);
  if (isa_in_use() == SruKernelIsa::Avx2)
    return avx2::backward(in, o, pad, c_all, grad_h, grad_c_last, grad_U, grad_x, grad_weight_c, grad_bias, grad_c0);
#endif
  baseline::backward(in, o, pad, c_all, grad_h, grad_c_last, grad_U, grad_x, grad_weight_c, grad_bias, grad_c0);
}

}  // namespace sru::cpu
