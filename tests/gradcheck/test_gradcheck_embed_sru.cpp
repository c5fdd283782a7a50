// Finite-difference checks of the Embed-SRU / Super-Embed-SRU recurrence's backward (every input: u, f,
// r, x, c0) in both forms, with and without tanh, dropout mask and padding, and of whole Embed-SRU and
// Super-Embed-SRU stacks (the per-token tables and the SRU layer above them).
#include <gtest/gtest.h>

#include "autograd/gradcheck.h"
#include "nn/embed_sru.h"
#include "ops/embed_sru_recurrence.h"
#include "testing.h"

using namespace sru;
using sru::testing::expect_gradients_match;
using sru::testing::leaf;
using Inputs = std::vector<Tensor>;

TEST(GradcheckEmbedSru, RecurrenceAllInputsBothForms) {
  const int64_t L = 4, B = 2, d = 3;
  for (int bits = 0; bits < 8; ++bits) {
    EmbedSruRecurrenceOptions o;
    o.super_embed = bits & 1;
    o.use_tanh = bits & 2;
    const bool extras = bits & 4;  // c0, dropout mask and padding
    SCOPED_TRACE(::testing::Message() << "bits=" << bits);
    // Not a structured binding: clang before 16 cannot capture one in the lambda below.
    const sru::testing::MaskAndPadding masks =
        extras ? sru::testing::gradcheck_mask_and_padding(d) : sru::testing::MaskAndPadding{};
    const Tensor mask_c = masks.mask, mask_pad = masks.padding;
    // Gates inside (0, 1), as the clipped tables keep them.
    Inputs inputs = {leaf({L, B, d}, 1), leaf({L, B, d}, 2, 0.05, 0.95), leaf({L, B, d}, 3, 0.05, 0.95),
                     leaf({L, B, d}, 4), extras ? leaf({B, d}, 5) : Tensor()};
    expect_gradients_match(
        [=](const Inputs& in) {
          auto [h, c] = embed_sru_recurrence(in[0], in[1], in[2], in[3], in[4], mask_c, mask_pad, o);
          return std::vector<Tensor>{h, c};
        },
        inputs);
  }
}

TEST(GradcheckEmbedSru, StacksThroughTheTokenTables) {
  for (nn::EmbedSRUForm form : {nn::EmbedSRUForm::Embed, nn::EmbedSRUForm::SuperEmbed}) {
    nn::EmbedSRUOptions o;
    o.input_size = 3;
    o.hidden_size = 3;
    o.num_layers = 2;
    o.dropout = 0.25;
    o.embed_dropout = 0.2;
    o.use_tanh = true;
    o.v1 = true;
    o.dtype = DType::F64;
    Generator gen(4);
    nn::EmbedSRU model(o, 5, form, gen);
    model.train(true);
    Inputs params;
    for (auto& [name, p] : model.named_parameters())
      if (p.requires_grad()) params.push_back(p);
    Inputs inputs = params;
    inputs.push_back(leaf({4, 2, 3}, 9));
    const Tensor tokens = Tensor::from_vector(std::vector<int64_t>{0, 4, 2, 2, 1, 3, 4, 0}, {4, 2});
    expect_gradients_match(
        [&](const Inputs& in) {
          gen.set_state(17, 0);  // the same dropout masks at every evaluation
          nn::EncoderStatePtr state;
          const Tensor h = model.forward_sequence({in.back(), Tensor(), tokens}, state);
          return std::vector<Tensor>{h, dynamic_cast<const nn::CellState&>(*state).c};
        },
        inputs);
  }
}
