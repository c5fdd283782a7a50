// The op table's parity mode (ops/op_table.h): every entry's every case on cuda:0 against the CPU, outputs
// and input gradients, at float32 and at each 16-bit storage dtype the entry takes (16-bit values within
// bf16's rounding, 1/128 relative). Skips without a device.
#include <gtest/gtest.h>

#include "cuda_parity.h"
#include "ops/op_table.h"

using namespace sru;
using namespace sru::testing;

class CudaOpTable : public ::testing::TestWithParam<size_t> {};

namespace {

Tensor on_host64(const Tensor& t) { return t.defined() ? t.to(Device::cpu()).to(DType::F64) : Tensor(); }

// Parity under 16-bit storage, where expect_parity cannot draw its cotangents (no uniform, no mul of
// bf16 tensors): each output's cotangent is drawn in float32 and stored in the output's dtype, and
// autograd::backward takes them as given, on both devices. 16-bit outputs and gradients within bf16's
// rounding (1/128 relative), float32 ones (the weights' gradients, summed over many terms) within 1e-3.
void expect_parity16(const OpCase& c, const std::vector<Tensor>& inputs) {
  std::vector<Tensor> cpu_inputs, gpu_inputs;
  for (const Tensor& t : inputs) {
    cpu_inputs.push_back(fresh_copy(t, Device::cpu()));
    gpu_inputs.push_back(fresh_copy(t, kCuda));
  }
  const std::vector<Tensor> out_cpu = c.run(cpu_inputs, make_op_fixed(c, cpu_inputs));
  const std::vector<Tensor> out_gpu = c.run(gpu_inputs, make_op_fixed(c, gpu_inputs));
  ASSERT_EQ(out_cpu.size(), out_gpu.size());
  std::vector<Tensor> roots_cpu, roots_gpu, seeds_cpu, seeds_gpu;
  for (size_t i = 0; i < out_cpu.size(); ++i) {
    const bool narrow = out_cpu[i].dtype() == DType::BF16 || out_cpu[i].dtype() == DType::F16;
    EXPECT_TRUE(tensors_near(on_host64(out_gpu[i]), on_host64(out_cpu[i]), narrow ? 1e-5 : 1e-4,
                             narrow ? 1.0 / 128 : 1e-4)) << "output " << i;
    if (!out_cpu[i].requires_grad()) continue;
    Generator gen(100 + i);
    const Tensor w = Tensor::uniform(out_cpu[i].shape(), -1, 1, DType::F32, gen).to(out_cpu[i].dtype());
    roots_cpu.push_back(out_cpu[i]);
    roots_gpu.push_back(out_gpu[i]);
    seeds_cpu.push_back(w);
    seeds_gpu.push_back(w.to(kCuda));
  }
  if (roots_cpu.empty()) return;
  autograd::backward(roots_cpu, seeds_cpu);
  autograd::backward(roots_gpu, seeds_gpu);
  for (size_t i = 0; i < cpu_inputs.size(); ++i) {
    const Tensor gc = cpu_inputs[i].grad(), gg = gpu_inputs[i].grad();
    ASSERT_EQ(gc.defined(), gg.defined()) << "gradient of input " << i;
    if (!gc.defined()) continue;
    const bool narrow = gc.dtype() == DType::BF16 || gc.dtype() == DType::F16;
    EXPECT_TRUE(tensors_near(on_host64(gg), on_host64(gc), narrow ? 1e-5 : 1e-3, narrow ? 1.0 / 128 : 1e-3))
        << "gradient of input " << i;
  }
}

}  // namespace

TEST_P(CudaOpTable, CpuAndCudaAgree) {
  SKIP_WITHOUT_CUDA();
  const OpEntry& entry = op_table()[GetParam()];
  uint64_t seed = 300;
  for (const OpCase& c : entry.cases) {
    ++seed;
    for (const DType dtype : entry.dtypes) {
      if (dtype == DType::F64) continue;
      SCOPED_TRACE(c.label + " at " + std::string(dtype_name(dtype)));
      const std::vector<Tensor> inputs = make_op_inputs(c, dtype, Device::cpu(), seed);
      if (dtype == DType::F32) {
        // Each device's fixed operands from its own copy of the inputs (same values, that device).
        expect_parity([&](const Inputs& x) { return c.run(x, make_op_fixed(c, x)); }, inputs, entry.parity_tol);
      } else {
        expect_parity16(c, inputs);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, CudaOpTable, ::testing::Range<size_t>(0, op_table().size()),
                         [](const ::testing::TestParamInfo<size_t>& info) { return op_table_identifier(info.param); });
