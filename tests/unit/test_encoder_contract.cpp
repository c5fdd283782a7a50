// The encoder contract (tests/encoder_contract.h) on the CPU, for every registered encoder and variant.
#include <algorithm>

#include "core/kernel_count.h"
#include "encoder_contract.h"
#include "nn/attention.h"

namespace sru::testing {
namespace {

class EncoderContract : public ::testing::TestWithParam<EncoderVariant> {};

TEST_P(EncoderContract, ChunksEqualTheWholeSequence) { check_chunks_equal_whole(GetParam(), Device::cpu()); }
TEST_P(EncoderContract, TokenByTokenEqualsOnePass) { check_token_by_token_equals_whole(GetParam(), Device::cpu()); }
TEST_P(EncoderContract, PaddingDoesNotChangeOtherRows) { check_padding_leaves_other_rows(GetParam(), Device::cpu()); }
TEST_P(EncoderContract, ReorderThenStepEqualsRecomputing) { check_reorder_then_step(GetParam(), Device::cpu()); }
TEST_P(EncoderContract, Bf16PrecisionAnswersInFloat32) { check_bf16_precision_answers_in_float32(GetParam(), Device::cpu()); }

INSTANTIATE_TEST_SUITE_P(Registered, EncoderContract, ::testing::ValuesIn(encoder_variants()),
                         [](const ::testing::TestParamInfo<EncoderVariant>& info) { return info.param.name(); });

TEST(EncoderContractCoverage, EveryEncoderHasAStreamingVariant) { check_every_encoder_streams_somewhere(Device::cpu()); }

// The same contract through the fused attention's CPU twin (nn::AttentionKernel::Fused) for the encoders
// that attend: the default is the composed attention, so without this suite the fused op's chunked,
// stepped and reordered calls (the decoding cache's head-major buffers, SRU++'s bounded memory) would
// not run (on a GPU: CudaEncoderContractFusedAttention).
class EncoderContractFusedAttention : public ::testing::TestWithParam<EncoderVariant> {
 protected:
  void SetUp() override { nn::set_attention_kernel(nn::AttentionKernel::Fused); }
  void TearDown() override { nn::set_attention_kernel(nn::AttentionKernel::Auto); }
};

TEST_P(EncoderContractFusedAttention, ChunksEqualTheWholeSequence) { check_chunks_equal_whole(GetParam(), Device::cpu()); }
TEST_P(EncoderContractFusedAttention, TokenByTokenEqualsOnePass) {
  check_token_by_token_equals_whole(GetParam(), Device::cpu());
}
TEST_P(EncoderContractFusedAttention, PaddingDoesNotChangeOtherRows) {
  check_padding_leaves_other_rows(GetParam(), Device::cpu());
}
TEST_P(EncoderContractFusedAttention, ReorderThenStepEqualsRecomputing) { check_reorder_then_step(GetParam(), Device::cpu()); }
TEST_P(EncoderContractFusedAttention, Bf16PrecisionAnswersInFloat32) {
  check_bf16_precision_answers_in_float32(GetParam(), Device::cpu());
}

INSTANTIATE_TEST_SUITE_P(Registered, EncoderContractFusedAttention, ::testing::ValuesIn(attending_variants()),
                         [](const ::testing::TestParamInfo<EncoderVariant>& info) { return info.param.name(); });

// The fused suite does reach the fused op (its kernel's marks in the host profile) for every variant.
TEST(EncoderContractFusedAttentionCoverage, TheFusedOpRunsForEveryAttendingEncoder) {
  for (const EncoderVariant& v : attending_variants()) {
    SCOPED_TRACE(v.name());
    const auto encoder = build_encoder(v, Device::cpu());
    nn::EncoderStatePtr state;
    nn::set_attention_kernel(nn::AttentionKernel::Fused);
    start_host_profile();
    run(*encoder, contract_input(6, 3, v.dtype, Device::cpu(), 1), state);
    const std::vector<HostProfileEntry> profile = stop_host_profile();
    nn::set_attention_kernel(nn::AttentionKernel::Auto);
    EXPECT_TRUE(std::any_of(profile.begin(), profile.end(), [](const HostProfileEntry& e) {
      return e.name == "fused_attention_forward" && e.marks > 0;
    }));
  }
}

}  // namespace
}  // namespace sru::testing
