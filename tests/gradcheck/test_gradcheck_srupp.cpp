// Finite-difference checks of SRU++'s backward in float64: the causal_softmax op (offsets, windows, rows
// that see nothing), and whole SRU++ stacks with every parameter (alpha included, at 0 and away from it)
// and the input as leaves: heads, causal attention with and without memory, the evaluation window,
// layer norms, dropout and attention dropout, projected-linear layers, padding with full attention.
#include <gtest/gtest.h>

#include "autograd/gradcheck.h"
#include "nn/srupp.h"
#include "ops/ops.h"
#include "srupp_testing.h"
#include "testing.h"

using namespace sru;
using sru::testing::expect_gradients_match;
using sru::testing::leaf;
using sru::testing::set_alpha;
using Inputs = std::vector<Tensor>;

namespace {

// Checks the gradients of (h, c) with respect to every parameter and the input x (the last leaf), the
// dropout masks fixed by reseeding the generator before each evaluation; `state` is the carried state
// given to every evaluation (memory included), `pad` an optional padding mask.
void check_stack(const nn::SRUpp& model, Generator& gen, const Tensor& x, const nn::EncoderStatePtr& state,
                 const Tensor& pad = Tensor()) {
  Inputs inputs = model.trainable_parameters();
  inputs.push_back(x);
  expect_gradients_match(
      [&](const Inputs& in) {
        gen.set_state(21, 0);
        nn::EncoderStatePtr s = state;
        const Tensor h = model.forward_sequence({in.back(), pad, Tensor()}, s);
        return std::vector<Tensor>{h, sru::testing::srupp_state_tensors(s)[0]};
      },
      inputs);
}

nn::SRUppOptions options() { return sru::testing::srupp_options(5, 4, 4, 2, 2); }

}  // namespace

TEST(GradcheckSrupp, CausalSoftmaxOffsetsWindowsAndEmptyRows) {
  for (const auto& [Lq, Lk, offset_, window_] :
       {std::tuple{4, 4, 0, -1}, std::tuple{3, 6, 3, -1}, std::tuple{4, 7, 3, 2}, std::tuple{3, 4, 5, 0}}) {
    const int offset = offset_, window = window_;  // clang before 16 cannot capture structured bindings
    SCOPED_TRACE(::testing::Message() << Lq << " " << Lk << " " << offset << " " << window);
    expect_gradients_match([=](const Inputs& x) { return causal_softmax(x[0], 0.7, offset, window) * x[1]; },
                           {leaf({2, Lq, Lk}, 1, -2, 2), leaf({2, Lq, Lk}, 2)});
    // With a key-padding mask as well (the first key of batch row 1 padded).
    std::vector<int32_t> pad(2 * Lk, 0);
    pad[Lk] = 1;
    const Tensor key_mask = Tensor::from_vector(pad, {2, 1, Lk});
    expect_gradients_match([=](const Inputs& x) { return causal_softmax(x[0], 0.7, offset, window, key_mask) * x[1]; },
                           {leaf({2, Lq, Lk}, 3, -2, 2), leaf({2, Lq, Lk}, 4)});
  }
}

TEST(GradcheckSrupp, AlphaAtZeroAndTheAttentionPathWithHeads) {
  Generator gen(3);
  nn::SRUpp model(options(), gen);
  model.train(false);
  // alpha = 0: the attention path still carries alpha's own gradient (dU/dalpha = W3 A).
  check_stack(model, gen, leaf({4, 2, 5}, 4), {});
  set_alpha(model, 0.6);
  check_stack(model, gen, leaf({4, 2, 5}, 5), {});
}

TEST(GradcheckSrupp, MemoryInTrainingAndTheEvaluationWindow) {
  nn::SRUppOptions o = options();
  o.memory_length = 3;
  o.layer_norm = true;
  Generator gen(6);
  nn::SRUpp model(o, gen);
  set_alpha(model, 0.8);
  nn::EncoderStatePtr state;
  model.train(true);  // dropout 0: the raw memory a language model carries in training
  model.forward_sequence({leaf({3, 2, 5}, 7).detach(), Tensor(), Tensor()}, state);
  ASSERT_EQ(state->tensors().size(), 3u);
  state = state->detached();  // carried detached, as the language model carries it
  for (const bool training : {true, false}) {
    SCOPED_TRACE(training ? "training mask" : "evaluation window");
    model.train(training);
    check_stack(model, gen, leaf({4, 2, 5}, 8), state);
  }
}

TEST(GradcheckSrupp, DropoutNormalisationPlacementAndProjectedLayers) {
  nn::SRUppOptions o = options();
  o.num_layers = 3;
  o.attention_every_n_layers = 2;  // layers 0 and 2 without attention
  o.dropout = 0.2;
  o.attn_dropout = 0.25;
  o.layer_norm = true;
  o.normalize_after = true;
  o.rescale = true;
  o.proj_input_to_hidden_first = true;
  Generator gen(9);
  nn::SRUpp model(o, gen);
  set_alpha(model, 0.5);
  model.train(true);
  check_stack(model, gen, leaf({4, 2, 5}, 10), {});
}

TEST(GradcheckSrupp, BidirectionalFullAttentionWithPadding) {
  nn::SRUppOptions o = options();
  o.bidirectional = true;
  o.causal = false;
  o.hidden_size = 2;
  Generator gen(11);
  nn::SRUpp model(o, gen);
  set_alpha(model, 0.7);
  model.train(false);
  const Tensor pad = Tensor::from_vector(std::vector<int32_t>{0, 0, 0, 0, 0, 1, 1, 1}, {4, 2});
  check_stack(model, gen, leaf({4, 2, 5}, 12), {}, pad);
}
