// The op table's parity mode (ops/op_table.h): every entry's every case on cuda:0 against the CPU, outputs
// and input gradients, at float32 and at each 16-bit storage dtype the entry takes (bf16 outputs within
// their half ulp). Skips without a device.
#include <gtest/gtest.h>

#include "cuda_parity.h"
#include "ops/op_table.h"

using namespace sru;
using namespace sru::testing;

class CudaOpTable : public ::testing::TestWithParam<size_t> {};

TEST_P(CudaOpTable, CpuAndCudaAgree) {
  SKIP_WITHOUT_CUDA();
  const OpEntry& entry = op_table()[GetParam()];
  uint64_t seed = 300;
  for (const OpCase& c : entry.cases) {
    ++seed;
    for (const DType dtype : entry.dtypes) {
      if (dtype == DType::F64) continue;
      SCOPED_TRACE(c.label + " at " + std::string(dtype_name(dtype)));
      // Each device's fixed operands from its own copy of the inputs (same values, that device).
      const std::vector<Tensor> inputs = make_op_inputs(c, dtype, Device::cpu(), seed);
      expect_parity([&](const Inputs& x) { return c.run(x, make_op_fixed(c, x)); }, inputs,
                    dtype == DType::F32 ? entry.parity_tol : 1e-2);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, CudaOpTable, ::testing::Range<size_t>(0, op_table().size()),
                         [](const ::testing::TestParamInfo<size_t>& info) { return op_table_identifier(info.param); });
