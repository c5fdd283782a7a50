// CUDA toolchain and device detection: skips with the reason when no usable device is present.
#include <gtest/gtest.h>

#include <iostream>

#include "core/cuda/device_info.h"

TEST(CudaDevice, DetectsDevicesOrSkipsWithReason) {
  if (sru::cuda::device_count() == 0)
    GTEST_SKIP() << "no CUDA device: " << sru::cuda::unavailable_reason();
  EXPECT_TRUE(sru::cuda::built_with_cuda());
  const std::string summary = sru::cuda::describe();
  std::cout << summary;  // the device line scripts/gpu_check.sh shows
  EXPECT_NE(summary.find("cuda:0"), std::string::npos) << summary;
  EXPECT_NE(summary.find("cuDNN"), std::string::npos) << summary;
}
