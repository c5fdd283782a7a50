// CUDA parity of label-smoothed cross-entropy (label `cuda`; skips without a device): the loss and its
// gradient against the CPU kernel, float32 (1e-5) and float64 (1e-10) as in test_cuda_parity.cpp, with
// ignored rows, i32 targets, more classes than a block has threads, and masked (-inf) classes, whose
// rows are smoothed over the classes they keep.
#include <gtest/gtest.h>

#include <limits>

#include "cuda_parity.h"

using namespace sru;
using namespace sru::testing;

TEST(CudaParity, LabelSmoothedCrossEntropy) {
  SKIP_WITHOUT_CUDA();
  const Tensor target = Tensor::from_vector(std::vector<int64_t>{0, 5, 299, -100, 7, 7, 1, 2, 3, 4, 5, 6, 100}, {13});
  std::vector<int32_t> mask_values(13 * 300, 0);
  for (int64_t n = 0; n < 13; ++n)
    for (int64_t c = 200 + 7 * n; c < 300; ++c)
      if (c != target.to_vector<int64_t>()[n]) mask_values[n * 300 + c] = 1;  // a padded tail, never the target
  const Tensor mask = Tensor::from_vector(mask_values, {13, 300});
  for (DType dt : {DType::F32, DType::F64}) {
    const double tol = dt == DType::F32 ? 1e-5 : 1e-10;
    const Tensor x = rand_leaf({13, 300}, 12, dt, -5, 5);
    for (double eps : {0.1, 0.6}) {
      SCOPED_TRACE(eps);
      expect_parity(one([eps](const Inputs& v) { return cross_entropy(v[0], v[1], -100, Reduction::Mean, eps); }),
                    {x, target}, tol);
      expect_parity(one([eps](const Inputs& v) { return cross_entropy(v[0], v[1], -100, Reduction::Sum, eps); }),
                    {x, target.to(DType::I32)}, tol);
      expect_parity(one([eps](const Inputs& v) {
                      return cross_entropy(masked_log_softmax(v[0], v[2]), v[1], -100, Reduction::Mean, eps);
                    }),
                    {x, target, mask}, tol);
    }
  }
}
