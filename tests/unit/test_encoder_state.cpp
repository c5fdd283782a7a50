// The encoders' typed carried state (nn/encoder_state.h): a state is a value (reordered, on, detached
// make new ones and leave it as it was), CellState and LstmState gather their fields at the batch dim,
// tensors() / state_from round-trip a checkpoint's tensors, and an encoder refuses another's state or a
// wrong count naming itself.
#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "nn/lstm.h"
#include "nn/sru.h"
#include "ops/ops.h"
#include "testing.h"

using namespace sru;
using sru::testing::error_of;

TEST(EncoderState, StatesAreValuesGatheredAtTheBatchDim) {
  const Tensor h = Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {1, 3, 2});
  const Tensor c = h * 10.0;
  Tensor leaf = c.detach();
  leaf.set_requires_grad(true);
  const nn::EncoderStatePtr state = std::make_shared<nn::LstmState>(h, leaf * 2.0);
  const nn::EncoderStatePtr picked = state->reordered(Tensor::from_vector(std::vector<int64_t>{2, 2, 0}, {3}));
  const auto& lstm = dynamic_cast<const nn::LstmState&>(*picked);
  EXPECT_EQ(lstm.h.to_vector<double>(), (std::vector<double>{5, 6, 5, 6, 1, 2}));
  EXPECT_EQ(lstm.c.to_vector<double>(), (std::vector<double>{100, 120, 100, 120, 20, 40}));
  // The original is unchanged, and detached() drops the history of every field.
  EXPECT_EQ(dynamic_cast<const nn::LstmState&>(*state).h.to_vector<double>(), h.to_vector<double>());
  EXPECT_TRUE(dynamic_cast<const nn::LstmState&>(*state).c.requires_grad());
  EXPECT_FALSE(dynamic_cast<const nn::LstmState&>(*state->detached()).c.requires_grad());
  const std::vector<Tensor> saved = state->tensors();
  ASSERT_EQ(saved.size(), 2u);
  EXPECT_EQ(saved[0].to_vector<double>(), h.to_vector<double>());
  EXPECT_EQ(state->on(Device::cpu())->tensors().size(), 2u);
}

TEST(EncoderState, EncodersReadTheirOwnStateAndRefuseOthersByName) {
  Generator gen(3);
  nn::SRUOptions so;
  so.input_size = 4;
  so.hidden_size = 4;
  so.num_layers = 2;
  so.dtype = DType::F64;
  nn::SRU sru(so, gen);
  nn::LSTMOptions lo;
  lo.input_size = 4;
  lo.hidden_size = 4;
  lo.dtype = DType::F64;
  nn::LSTM lstm(lo, gen);
  Generator xg(4);
  const Tensor x = Tensor::uniform({3, 2, 4}, -1, 1, DType::F64, xg);
  nn::EncoderStatePtr sru_state, lstm_state;
  sru.forward_sequence({x, Tensor(), Tensor()}, sru_state);
  lstm.forward_sequence({x, Tensor(), Tensor()}, lstm_state);
  // A checkpoint's tensors read back give the same continuation.
  nn::EncoderStatePtr restored = sru.state_from(sru_state->tensors()), kept = sru_state;
  EXPECT_EQ(sru.forward_sequence({x, Tensor(), Tensor()}, restored).to_vector<double>(),
            sru.forward_sequence({x, Tensor(), Tensor()}, kept).to_vector<double>());
  EXPECT_EQ(sru.state_from({}), nullptr);
  EXPECT_NE(error_of([&] { sru.forward_sequence({x, Tensor(), Tensor()}, lstm_state); }).find("SRU: the carried state is "
                                                                                             "another encoder's"),
            std::string::npos);
  EXPECT_NE(error_of([&] { lstm.forward_sequence({x, Tensor(), Tensor()}, sru_state); }).find("LSTM: the carried state"),
            std::string::npos);
  EXPECT_NE(error_of([&] { lstm.state_from(sru_state->tensors()); }).find("LSTM: a carried state is two tensors (h, c), got 1"),
            std::string::npos);
}
