// CPU entry points of the fused SRU recurrence: converts the padding mask once, then runs the
// kernels of ops/cpu/sru_recurrence_kernels.h compiled for AVX2 when the processor has it, else
// the baseline x86-64 (or other architecture) build of the same code. bf16 I/O (the CUDA kernels'
// twin): U and x widened to float32, the float kernels, then h, grad U and grad x rounded to bf16 once,
// where the GPU rounds them.
#define SRU_KERNEL_NAMESPACE baseline
#include "ops/cpu/sru_recurrence_kernels.h"
#include "ops/cpu/padding.h"

namespace sru::cpu {

#if defined(SRU_HAVE_AVX2_KERNELS)
namespace avx2 {
void forward(const SruTensors&, const SruRecurrenceOptions&, const std::vector<uint8_t>&, const Tensor&, const Tensor&,
             const Tensor&);
void backward(const SruTensors&, const SruRecurrenceOptions&, const std::vector<uint8_t>&, const Tensor&,
              const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&);
}  // namespace avx2
#endif

namespace {

bool baseline_forced = false;

bool use_avx2() {
#if defined(SRU_HAVE_AVX2_KERNELS)
  static const bool supported = __builtin_cpu_supports("avx2");
  return supported && !baseline_forced;
#else
  return false;
#endif
}

}  // namespace

const char* sru_kernel_isa() { return use_avx2() ? "avx2" : "baseline"; }

bool force_baseline_sru_kernels(bool on) {
  const bool previous = baseline_forced;
  baseline_forced = on;
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

void round_into(const Tensor& dst, const Tensor& src) {
  if (dst.defined()) Tensor(dst).copy_(src.to(DType::BF16));
}

}  // namespace

void sru_recurrence_forward(const SruTensors& in, const SruRecurrenceOptions& o, const Tensor& h, const Tensor& c_all,
                            const Tensor& c_last) {
  if (in.U.dtype() == DType::BF16) {
    const Tensor h32 = float_buffer(h);
    sru_recurrence_forward(widened(in), o, h32, c_all, c_last);
    round_into(h, h32);
    return;
  }
  const std::vector<uint8_t> pad = padding_bytes(in.mask_pad);
#if defined(SRU_HAVE_AVX2_KERNELS)
  if (use_avx2()) return avx2::forward(in, o, pad, h, c_all, c_last);
#endif
  baseline::forward(in, o, pad, h, c_all, c_last);
}

void sru_recurrence_backward(const SruTensors& in, const SruRecurrenceOptions& o, const Tensor& c_all,
                             const Tensor& grad_h, const Tensor& grad_c_last, const Tensor& grad_U,
                             const Tensor& grad_x, const Tensor& grad_weight_c, const Tensor& grad_bias,
                             const Tensor& grad_c0) {
  if (in.U.dtype() == DType::BF16) {
    const Tensor gU32 = float_buffer(grad_U), gx32 = float_buffer(grad_x);
    sru_recurrence_backward(widened(in), o, c_all, grad_h.to(DType::F32), grad_c_last, gU32, gx32, grad_weight_c,
                            grad_bias, grad_c0);
    round_into(grad_U, gU32);
    round_into(grad_x, gx32);
    return;
  }
  const std::vector<uint8_t> pad = padding_bytes(in.mask_pad);
#if defined(SRU_HAVE_AVX2_KERNELS)
  if (use_avx2())
    return avx2::backward(in, o, pad, c_all, grad_h, grad_c_last, grad_U, grad_x, grad_weight_c, grad_bias, grad_c0);
#endif
  baseline::backward(in, o, pad, c_all, grad_h, grad_c_last, grad_U, grad_x, grad_weight_c, grad_bias, grad_c0);
}

}  // namespace sru::cpu
