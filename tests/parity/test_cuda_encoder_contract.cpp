// The encoder contract (tests/encoder_contract.h) on a GPU, for every registered encoder and variant:
// the CUDA kernels, the cuDNN LSTM and the device-side caches under the same properties as the CPU.
#include "cuda_parity.h"
#include "encoder_contract.h"
#include "nn/attention.h"

namespace sru::testing {
namespace {

class CudaEncoderContract : public ::testing::TestWithParam<EncoderVariant> {};

TEST_P(CudaEncoderContract, ChunksEqualTheWholeSequence) {
  SKIP_WITHOUT_CUDA();
  check_chunks_equal_whole(GetParam(), kCuda);
}
TEST_P(CudaEncoderContract, TokenByTokenEqualsOnePass) {
  SKIP_WITHOUT_CUDA();
  check_token_by_token_equals_whole(GetParam(), kCuda);
}
TEST_P(CudaEncoderContract, PaddingDoesNotChangeOtherRows) {
  SKIP_WITHOUT_CUDA();
  check_padding_leaves_other_rows(GetParam(), kCuda);
}
TEST_P(CudaEncoderContract, ReorderThenStepEqualsRecomputing) {
  SKIP_WITHOUT_CUDA();
  check_reorder_then_step(GetParam(), kCuda);
}
TEST_P(CudaEncoderContract, Bf16PrecisionAnswersInFloat32) {
  SKIP_WITHOUT_CUDA();
  check_bf16_precision_answers_in_float32(GetParam(), kCuda);
}

INSTANTIATE_TEST_SUITE_P(Registered, CudaEncoderContract, ::testing::ValuesIn(encoder_variants()),
                         [](const ::testing::TestParamInfo<EncoderVariant>& info) { return info.param.name(); });

// The attending encoders through the fused attention's CUDA kernels (nn::AttentionKernel::Fused; the
// default is composed, nn/attention.h), as the CPU suite runs its twin.
class CudaEncoderContractFusedAttention : public ::testing::TestWithParam<EncoderVariant> {
 protected:
  void SetUp() override { nn::set_attention_kernel(nn::AttentionKernel::Fused); }
  void TearDown() override { nn::set_attention_kernel(nn::AttentionKernel::Auto); }
};

TEST_P(CudaEncoderContractFusedAttention, ChunksEqualTheWholeSequence) {
  SKIP_WITHOUT_CUDA();
  check_chunks_equal_whole(GetParam(), kCuda);
}
TEST_P(CudaEncoderContractFusedAttention, TokenByTokenEqualsOnePass) {
  SKIP_WITHOUT_CUDA();
  check_token_by_token_equals_whole(GetParam(), kCuda);
}
TEST_P(CudaEncoderContractFusedAttention, ReorderThenStepEqualsRecomputing) {
  SKIP_WITHOUT_CUDA();
  check_reorder_then_step(GetParam(), kCuda);
}

INSTANTIATE_TEST_SUITE_P(Registered, CudaEncoderContractFusedAttention, ::testing::ValuesIn(attending_variants()),
                         [](const ::testing::TestParamInfo<EncoderVariant>& info) { return info.param.name(); });

}  // namespace
}  // namespace sru::testing
