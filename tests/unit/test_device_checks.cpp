// CPU-side tests of the CUDA hardening: the central operand device check of SRU_KERNEL (on fake
// operands, since no CUDA tensor can exist here), the int-size limits of the GEMM kernels, the NaN-fill
// debug mode, the host-wait counters and read_scalars, and the CUDA error messages (CUDA builds).
// Whatever needs a device is in tests/parity/test_cuda_hardening.cpp (label cuda).
#include <gtest/gtest.h>

#include <cmath>

#include "core/debug_fill.h"
#include "core/host_sync.h"
#include "ops/dispatch.h"
#include "ops/matmul.h"
#include "ops/sru_recurrence.h"
#include "testing.h"
#if defined(SRU_WITH_CUDA)
#include "core/cuda/check.h"
#endif

using namespace sru;
using sru::testing::error_of;

namespace fake {
// Stand-ins for tensors on any device: what the device check asks of an operand is defined() and device().
struct Operand {
  Device where;
  bool is_defined = true;
  bool defined() const { return is_defined; }
  Device device() const { return where; }
};
template <typename F>
void visit_tensors(const Operand& o, F&& f) {
  f(o);
}
struct Pair {
  Operand first, second;
};
template <typename F>
void visit_tensors(const Pair& p, F&& f) {
  f(p.first);
  f(p.second);
}
}  // namespace fake

TEST(DeviceCheck, NamesTheKernelTheArgumentAndBothDevices) {
  EXPECT_EQ(error_of([] { detail::check_operand_device(Device::cpu(), Device::cpu(), "k", 1); }), "");
  const std::string message =
      error_of([] { detail::check_operand_device(Device::cuda(0), Device::cpu(), "layer_norm_forward", 2); });
  EXPECT_NE(message.find("layer_norm_forward: argument 2 is on cpu but the op runs on cuda:0"), std::string::npos)
      << message;
  EXPECT_NE(error_of([] { detail::check_operand_device(Device::cuda(0), Device::cuda(1), "k", 1); }).find("cuda:1"),
            std::string::npos);
}

TEST(DeviceCheck, VisitsEveryOperandInsideStructsAndSkipsScalarsAndUndefined) {
  const Device cpu = Device::cpu(), gpu = Device::cuda(0);
  const fake::Operand on_cpu{cpu}, on_gpu{gpu}, undefined_on_gpu{gpu, false};
  EXPECT_EQ(error_of([&] { detail::check_operand_devices(cpu, "k", 1, 2.5, on_cpu, undefined_on_gpu, fake::Pair{on_cpu, on_cpu}); }),
            "");
  const std::string in_struct =
      error_of([&] { detail::check_operand_devices(cpu, "concat_kernel", on_cpu, 7, fake::Pair{on_cpu, on_gpu}); });
  EXPECT_NE(in_struct.find("concat_kernel: argument 3 is on cuda:0 but the op runs on cpu"), std::string::npos)
      << in_struct;
  const std::vector<fake::Operand> inputs{on_gpu, on_gpu, on_cpu};
  EXPECT_NE(error_of([&] { detail::check_operand_devices(gpu, "k", inputs); }).find("argument 1 is on cpu"),
            std::string::npos);
}

TEST(DeviceCheck, SeesEveryTensorOfTheSruOperands) {
  SruTensors in;
  in.U = Tensor::zeros({1});
  in.scale_x = Tensor::zeros({1});
  in.mask_pad = Tensor::zeros({1});
  int defined = 0, visited = 0;
  visit_tensors(in, [&](const Tensor& t) {
    ++visited;
    defined += t.defined();
  });
  EXPECT_EQ(visited, 8);
  EXPECT_EQ(defined, 3);
  SruRecurrenceOptions o;
  o.scale_x_tensor = Tensor::ones({1});
  visited = 0;
  visit_tensors(o, [&](const Tensor& t) { visited += t.defined(); });
  EXPECT_EQ(visited, 1);
}

TEST(DeviceCheck, RealCpuKernelCallsPassThrough) {
  // SRU_KERNEL with every operand on the CPU: checked, then run.
  const Tensor a = Tensor::full({2, 3}, 2.0), b = Tensor::full({3, 2}, 1.5), c = Tensor::empty({2, 2});
  SRU_KERNEL(c.device(), gemm, a, GemmMatrix::packed(2, 3), false, b, GemmMatrix::packed(3, 2), false, c,
             GemmMatrix::packed(2, 2), 1, 1.0, 0.0);
  EXPECT_EQ(c.to_vector<float>(), std::vector<float>(4, 9.0f));
}

TEST(GemmLimits, RefusesSizesOverInt32NamingWhich) {
  EXPECT_EQ(error_of([] { check_gemm_sizes(2147483647LL, 1, 1, 1, 1, 1, 1); }), "");
  const std::string k = error_of([] { check_gemm_sizes(4, 5, int64_t{1} << 31, int64_t{1} << 31, 5, 5, 1); });
  EXPECT_NE(k.find("gemm: K = 2147483648 is over the 2^31 - 1"), std::string::npos) << k;
  EXPECT_NE(error_of([] { check_gemm_sizes(4, 5, 6, 6, int64_t{3} << 31, 5, 1); }).find("ldb ="), std::string::npos);
  EXPECT_NE(error_of([] { check_gemm_sizes(4, 5, 6, 6, 5, 5, int64_t{1} << 32); }).find("batch ="), std::string::npos);
}

TEST(NanFill, FillsNewAndReusedCpuBlocks) {
  const bool before = set_nan_fill(true);
  {
    const Tensor small = Tensor::empty({5}, DType::F32);
    for (float v : small.to_vector<float>()) EXPECT_TRUE(std::isnan(v));
    EXPECT_EQ(Tensor::empty({3}, DType::I64).to_vector<int64_t>(), std::vector<int64_t>(3, -1));
    { Tensor big = Tensor::full({1 << 19}, 1.0, DType::F64); }  // 4 MiB: cached when freed
    const Tensor reused = Tensor::empty({1 << 19}, DType::F64);
    const std::vector<double> v = reused.to_vector<double>();
    EXPECT_TRUE(std::isnan(v.front()) && std::isnan(v.back()));
    EXPECT_EQ(Tensor::zeros({4}).to_vector<float>(), std::vector<float>(4, 0.0f)) << "zeros() still writes zeros";
  }
  set_nan_fill(before);
}

TEST(HostWaits, CountsValueReadsAndReadScalarsReadsOnce) {
  const Tensor a = Tensor::full({}, 1.5, DType::F32), b = Tensor::full({1}, 7.0, DType::I64);
  HostWaitRecorder rec;
  EXPECT_EQ(read_scalars({a, b}), (std::vector<double>{1.5, 7.0}));
  EXPECT_EQ(rec.counts().value_reads, 1u);
  (void)a.item<double>();
  (void)b.to_vector<int64_t>();
  EXPECT_EQ(rec.counts().value_reads, 3u);
  EXPECT_EQ(rec.counts().device_waits, 0u);
  const std::vector<std::string> events = rec.events();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0], "value read: read_scalars");
  EXPECT_NE(error_of([] { read_scalars({Tensor::zeros({2})}); }).find("has 2 elements, expected 1"), std::string::npos);
  EXPECT_NE(error_of([] { HostWaitRecorder second; }).find("another recorder is active"), std::string::npos);
}

#if defined(SRU_WITH_CUDA)
TEST(CudaErrors, LaunchChecksNameTheKernelAndStickyErrorsTheLastKernel) {
  // Records the name whatever the launch state (on a machine without a GPU the query itself may fail).
  (void)error_of([] { cuda::detail::check_launch("test_probe_kernel", __FILE__, __LINE__); });
  EXPECT_STREQ(cuda::detail::last_kernel(), "test_probe_kernel");
  const std::string sticky =
      error_of([] { cuda::detail::fail_cuda("cudaMalloc(&p, n)", cudaErrorIllegalAddress, __FILE__, __LINE__); });
  EXPECT_NE(sticky.find("CUDA error in cudaMalloc(&p, n): an illegal memory access was encountered"), std::string::npos)
      << sticky;
  EXPECT_NE(sticky.find("kernel test_probe_kernel (the last one launched)"), std::string::npos) << sticky;
  const std::string plain =
      error_of([] { cuda::detail::fail_cuda("cudaMemcpyAsync(...)", cudaErrorInvalidValue, __FILE__, __LINE__); });
  EXPECT_EQ(plain.find("kernel"), std::string::npos) << "not a kernel fault: " << plain;
  EXPECT_TRUE(cuda::detail::is_sticky_error(cudaErrorLaunchFailure));
  EXPECT_FALSE(cuda::detail::is_sticky_error(cudaErrorMemoryAllocation));
}
#endif
