// Finite-difference checks of the fused SRU recurrence's backward (every input that takes a
// gradient: U, x, weight_c, bias, c0), of a whole SRU stack, of the fused LSTM recurrence (gates_x,
// weight_hh, bias, h0, c0) and of the CPU LSTM.
#include <gtest/gtest.h>

#include "autograd/gradcheck.h"
#include "nn/lstm.h"
#include "nn/sru.h"
#include "ops/lstm_recurrence.h"
#include "ops/ops.h"
#include "ops/sru_recurrence.h"
#include "testing.h"

using namespace sru;
using sru::testing::expect_gradients_match;
using sru::testing::leaf;
using Inputs = std::vector<Tensor>;

TEST(GradcheckSru, FusedRecurrenceAllInputs) {
  const int64_t L = 4, B = 2, d = 3;
  for (int bits = 0; bits < 32; ++bits) {
    SruRecurrenceOptions o;
    o.hidden_size = d;
    o.bidirectional = bits & 1;
    o.k = (bits & 2) ? 4 : 3;
    o.has_skip_term = !(bits & 4);
    o.use_tanh = bits & 8;
    o.scale_x = 1.3;
    const bool extras = bits & 16;  // c0, dropout mask and padding
    SCOPED_TRACE(::testing::Message() << "bits=" << bits);
    const int64_t out = (o.bidirectional ? 2 : 1) * d;
    // Not a structured binding: clang before 16 cannot capture one in the lambda below.
    const sru::testing::MaskAndPadding masks =
        extras ? sru::testing::gradcheck_mask_and_padding(out) : sru::testing::MaskAndPadding{};
    const Tensor mask_c = masks.mask, mask_pad = masks.padding;
    Inputs inputs = {leaf({L, B, out * o.k}, 1), leaf({L, B, out}, 2), leaf({2 * out}, 3), leaf({2 * out}, 4),
                     extras ? leaf({B, out}, 5) : Tensor()};
    expect_gradients_match(
        [=](const Inputs& x) {
          auto [h, c] = sru_recurrence(x[0], x[1], x[2], x[3], x[4], mask_c, mask_pad, o);
          return std::vector<Tensor>{h, c};
        },
        inputs);
  }
}

TEST(GradcheckSru, StackWithLayerNormProjectionAndDropout) {
  nn::SRUOptions o;
  o.input_size = 5;
  o.hidden_size = 3;
  o.num_layers = 2;
  o.bidirectional = true;
  o.projection_size = 2;
  o.layer_norm = true;
  o.dropout = 0.25;
  o.rescale = true;
  o.dtype = DType::F64;
  Generator gen(4);
  nn::SRU model(o, gen);
  model.train(true);
  Inputs params;
  for (auto& [name, p] : model.named_parameters())
    if (p.requires_grad()) params.push_back(p);
  Inputs inputs = params;
  inputs.push_back(leaf({3, 2, 5}, 9));
  expect_gradients_match(
      [&](const Inputs& in) {
        gen.set_state(17, 0);  // the same dropout masks at every evaluation
        auto [h, c] = model.forward(in.back());
        return std::vector<Tensor>{h, c};
      },
      inputs);
}

TEST(GradcheckLstm, FusedRecurrenceAllInputs) {
  const int64_t L = 5, B = 3, H = 2;
  // Padding at the start of sequence 1, in the middle of sequence 2, none in sequence 0.
  const Tensor mask_pad = Tensor::from_vector(std::vector<int64_t>{0, 1, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0}, {L, B});
  for (int bits = 0; bits < 8; ++bits) {
    const bool reverse = bits & 1, extras = bits & 2, padded = bits & 4;  // extras: bias, h0, c0
    SCOPED_TRACE(::testing::Message() << "reverse " << reverse << ", bias/h0/c0 " << extras << ", padding " << padded);
    Inputs inputs = {leaf({L, B, 4 * H}, 1, -2, 2), leaf({4 * H, H}, 2), extras ? leaf({4 * H}, 3) : Tensor(),
                     extras ? leaf({B, H}, 4) : Tensor(), extras ? leaf({B, H}, 5) : Tensor()};
    expect_gradients_match(
        [=](const Inputs& x) {
          const LstmRecurrenceResult r = lstm_recurrence(x[0], x[1], x[2], x[3], x[4], padded ? mask_pad : Tensor(), reverse);
          return std::vector<Tensor>{r.output, r.h, r.c};
        },
        inputs);
  }
}

TEST(GradcheckLstm, BidirectionalTwoLayersWithPaddingAndInitialState) {
  nn::LSTMOptions o;
  o.input_size = 3;
  o.hidden_size = 2;
  o.num_layers = 2;
  o.bidirectional = true;
  o.dtype = DType::F64;
  Generator gen(6);
  nn::LSTM lstm(o, gen);
  Inputs params;
  for (auto& [name, p] : lstm.named_parameters()) params.push_back(p);
  Tensor mask = Tensor::from_vector(std::vector<int32_t>{0, 0, 0, 0, 0, 1}, {3, 2});
  Inputs inputs = params;
  inputs.push_back(leaf({3, 2, 3}, 7));
  inputs.push_back(leaf({2, 2, 4}, 8));
  inputs.push_back(leaf({2, 2, 4}, 9));
  expect_gradients_match(
      [&](const Inputs& in) {
        const size_t n = in.size();
        auto r = lstm.forward(in[n - 3], in[n - 2], in[n - 1], mask);
        return std::vector<Tensor>{r.output, r.h, r.c};
      },
      inputs);
}
