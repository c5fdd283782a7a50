// The encoder contract (tests/encoder_contract.h) on the CPU, for every registered encoder and variant.
#include "encoder_contract.h"

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

}  // namespace
}  // namespace sru::testing
