// CPU entry points of the fused SRU recurrence: converts the padding mask once, then runs the
// kernels of ops/cpu/sru_recurrence_kernels.h compiled for AVX2 when the processor has it, else
// the baseline x86-64 (or other architecture) build of the same code.
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

void sru_recurrence_forward(const SruTensors& in, const SruRecurrenceOptions& o, const Tensor& h, const Tensor& c_all,
                            const Tensor& c_last) {
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
  const std::vector<uint8_t> pad = padding_bytes(in.mask_pad);
#if defined(SRU_HAVE_AVX2_KERNELS)
  if (use_avx2())
    return avx2::backward(in, o, pad, c_all, grad_h, grad_c_last, grad_U, grad_x, grad_weight_c, grad_bias, grad_c0);
#endif
  baseline::backward(in, o, pad, c_all, grad_h, grad_c_last, grad_U, grad_x, grad_weight_c, grad_bias, grad_c0);
}

}  // namespace sru::cpu
