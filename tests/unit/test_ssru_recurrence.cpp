// The SSRU recurrence (ops/ssru_recurrence.h) against its equations written out here step by step:
// f = sigmoid(u_f + b_f), c = f c_prev + (1 - f) z, h = relu(c); padded steps keep c and output 0.
// (Gradients: the op table's float64 gradient check; CPU/CUDA: its parity case.)
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/rng.h"
#include "core/tensor.h"
#include "ops/ssru_recurrence.h"

using namespace sru;

TEST(SsruRecurrence, EqualsItsStepEquationsWithPaddingAndAnInitialState) {
  const int64_t L = 5, B = 3, d = 4;
  Generator gen(17);
  const Tensor U = Tensor::uniform({L, B, 2 * d}, -2, 2, DType::F64, gen);
  const Tensor bias = Tensor::uniform({d}, -1, 1, DType::F64, gen);
  const Tensor c0 = Tensor::uniform({B, d}, -1, 1, DType::F64, gen);
  std::vector<int32_t> pad(L * B, 0);
  pad[3 * B + 1] = pad[4 * B + 1] = 1;  // row 1 ends two steps early
  pad[0 * B + 2] = 1;                   // row 2 starts with a padded step
  const auto [h, c_last] = ssru_recurrence(U, bias, c0, Tensor::from_vector(pad, {L, B}));
  const std::vector<double> u = U.to_vector<double>(), b = bias.to_vector<double>(), h_got = h.to_vector<double>();
  std::vector<double> c = c0.to_vector<double>();
  for (int64_t t = 0; t < L; ++t)
    for (int64_t r = 0; r < B; ++r)
      for (int64_t j = 0; j < d; ++j) {
        const double got = h_got[(t * B + r) * d + j];
        if (pad[t * B + r]) {
          EXPECT_EQ(got, 0.0);
          continue;
        }
        const double z = u[(t * B + r) * 2 * d + j], uf = u[(t * B + r) * 2 * d + d + j];
        const double f = 1.0 / (1.0 + std::exp(-(uf + b[j])));
        double& cj = c[r * d + j];
        cj = f * cj + (1.0 - f) * z;
        EXPECT_NEAR(got, std::max(cj, 0.0), 1e-14) << "t " << t << ", row " << r << ", unit " << j;
      }
  const std::vector<double> last = c_last.to_vector<double>();
  for (size_t i = 0; i < c.size(); ++i) EXPECT_NEAR(last[i], c[i], 1e-14);
}

TEST(SsruRecurrence, RefusesBadShapesByName) {
  const Tensor U = Tensor::zeros({2, 3, 8});
  EXPECT_THROW(ssru_recurrence(Tensor::zeros({2, 3, 7}), Tensor(), Tensor(), Tensor()), Error);
  EXPECT_THROW(ssru_recurrence(U, Tensor::zeros({3}), Tensor(), Tensor()), Error);
  EXPECT_THROW(ssru_recurrence(U, Tensor(), Tensor::zeros({3, 3}), Tensor()), Error);
  EXPECT_THROW(ssru_recurrence(U, Tensor(), Tensor(), Tensor::zeros({3, 2})), Error);
  try {
    ssru_recurrence(U, Tensor::zeros({3}), Tensor(), Tensor());
    ADD_FAILURE() << "a (3) forget bias for d = 4 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ssru_recurrence: forget_bias must be (4)"), std::string::npos) << e.what();
  }
}
