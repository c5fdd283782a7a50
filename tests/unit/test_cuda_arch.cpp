// Which GPUs a build's CUDA code runs on (core/cuda_arch.h), without a GPU: parsing
// CMAKE_CUDA_ARCHITECTURES, the compatibility rule for machine code and PTX against the cards of the
// default list and after it, and what --device-info says about the build.
#include <gtest/gtest.h>

#include "core/cuda/device_info.h"
#include "core/cuda_arch.h"

using namespace sru::cuda;

TEST(CudaArch, ParsesCMakeArchitectureLists) {
  const CudaArchs a = parse_cuda_architectures("75-real 80-real 86-real 89-real 90");
  ASSERT_EQ(a.sass.size(), 5u);
  ASSERT_EQ(a.ptx.size(), 1u);
  EXPECT_EQ(a.ptx[0].capability, 90);
  EXPECT_EQ(describe_cuda_architectures(a), "sm_75 sm_80 sm_86 sm_89 sm_90, PTX compute_90");
  EXPECT_EQ(describe_cuda_architectures(parse_cuda_architectures("80;90")), "sm_80 sm_90, PTX compute_80 compute_90");
  EXPECT_EQ(describe_cuda_architectures(parse_cuda_architectures("90a-real;100-virtual")), "sm_90a, PTX compute_100");
  EXPECT_EQ(describe_cuda_architectures(parse_cuda_architectures("native")), "native");
}

TEST(CudaArch, MachineCodeWithinAMajorVersionAndPtxUpwards) {
  const CudaArchs a = parse_cuda_architectures("75-real 80-real 86-real 89-real 90");
  EXPECT_EQ(cuda_image_for(a, 7, 5), "sm_75 machine code");           // T4
  EXPECT_EQ(cuda_image_for(a, 8, 0), "sm_80 machine code");           // A100
  EXPECT_EQ(cuda_image_for(a, 8, 6), "sm_86 machine code");           // A10, RTX 30
  EXPECT_EQ(cuda_image_for(a, 8, 7), "sm_86 machine code");           // Orin: the newest sm_8x below it
  EXPECT_EQ(cuda_image_for(a, 8, 9), "sm_89 machine code");           // L4, RTX 40
  EXPECT_EQ(cuda_image_for(a, 9, 0), "sm_90 machine code");           // H100, H200
  EXPECT_EQ(cuda_image_for(a, 10, 0), "PTX compute_90, compiled by the driver");  // B200
  EXPECT_EQ(cuda_image_for(a, 12, 0), "PTX compute_90, compiled by the driver");  // RTX 50
  EXPECT_FALSE(cuda_image_for(a, 7, 0));  // V100: nothing (CUDA 13 cannot build sm_70)
  EXPECT_FALSE(cuda_image_for(a, 6, 1));
  // Without PTX nothing runs past the machine code's major version; arch-specific code only on its own.
  const CudaArchs real_only = parse_cuda_architectures("80-real;90a-real");
  EXPECT_FALSE(cuda_image_for(real_only, 10, 0));
  EXPECT_FALSE(cuda_image_for(real_only, 9, 1));
  EXPECT_EQ(cuda_image_for(real_only, 9, 0), "sm_90a machine code");
  EXPECT_EQ(cuda_image_for(parse_cuda_architectures("86-virtual"), 8, 0), std::nullopt);  // PTX is not downward
  // Family-specific code: its major version, from its minor up (B200 and B300 run sm_100f; RTX 50 not).
  const CudaArchs family = parse_cuda_architectures("100f");
  EXPECT_EQ(describe_cuda_architectures(family), "sm_100f, PTX compute_100f");
  EXPECT_EQ(cuda_image_for(family, 10, 3), "sm_100f machine code");
  EXPECT_EQ(cuda_image_for(family, 10, 0), "sm_100f machine code");
  EXPECT_FALSE(cuda_image_for(family, 12, 0));
}

TEST(CudaArch, DeviceInfoNamesTheBuildsArchitectures) {
  const std::string info = describe();
  if (built_with_cuda()) {
    EXPECT_NE(info.find("CUDA code built for: sm_"), std::string::npos) << info;
    EXPECT_FALSE(built_cuda_architectures().empty());
  } else {
    EXPECT_EQ(built_cuda_architectures(), "none (no CUDA backend)");
  }
}
