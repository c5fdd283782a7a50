// The encoder contract, checked for every registered encoder (nn::encoders()) and each of its
// contract_variants, so a new encoder is held to it by registering it:
//   - padding does not change the other rows, and a padded row's valid steps equal that row run alone;
//   - in evaluation, a sequence fed in chunks with the carried state equals one pass (when streams());
//   - token by token equals one pass (when streams());
//   - a state's reordered(rows), then a step, equals recomputing the reordered rows from scratch.
// Float64 within 1e-10, float32 within 1e-5. tests/unit/test_encoder_contract.cpp runs it on the CPU,
// tests/parity/test_cuda_encoder_contract.cpp on a GPU (label cuda).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/node.h"
#include "config/config.h"
#include "nn/encoder.h"
#include "ops/ops.h"
#include "tasks/registry.h"
#include "testing.h"

namespace sru::testing {

struct EncoderVariant {
  std::string encoder;
  std::vector<std::string> settings;
  DType dtype = DType::F64;

  std::string name() const {
    std::string out = encoder;
    out.append(dtype == DType::F64 ? "_f64" : "_f32");
    for (const std::string& s : settings) {
      out.push_back('_');
      out.append(s, s.find('.') + 1);
    }
    for (char& c : out)
      if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    return out;
  }
};

// gtest names a failing parameter by this, not by its bytes.
inline void PrintTo(const EncoderVariant& v, std::ostream* os) { *os << v.name(); }

inline std::vector<EncoderVariant> encoder_variants() {
  std::vector<EncoderVariant> out;
  for (DType dtype : {DType::F64, DType::F32})
    for (const nn::EncoderSpec& spec : nn::encoders()) {
      out.push_back({spec.name, {}, dtype});
      for (const auto& settings : spec.contract_variants) out.push_back({spec.name, settings, dtype});
    }
  return out;
}

constexpr int64_t kContractWidth = 8, kContractVocab = 11;

inline std::shared_ptr<nn::SequenceEncoder> build_encoder(const EncoderVariant& v, Device device) {
  const std::string yaml = "task: charlm\ndata:\n  path: unused\nmodel:\n  type: " + v.encoder +
                           "\n  embedding_size: 8\n  hidden_size: 8\n  num_layers: 2\n  dropout: 0.0\n";
  const config::Config cfg = config::parse_config(yaml, "the contract config", v.settings);
  nn::EncoderArgs args;
  args.input_size = args.hidden_size = kContractWidth;
  args.num_layers = 2;
  args.vocab_size = kContractVocab;
  args.dtype = v.dtype;
  Generator gen(7);
  auto encoder = nn::find_encoder(v.encoder).build(args, cfg.encoder_options, gen);
  encoder->to(device);
  encoder->eval();
  return encoder;
}

// The variants whose encoders attend (the fused-attention suites run these).
inline std::vector<EncoderVariant> attending_variants() {
  std::vector<EncoderVariant> out;
  for (const EncoderVariant& v : encoder_variants())
    if (v.encoder == "transformer" || v.encoder == "srupp") out.push_back(v);
  return out;
}

struct ContractInput {
  Tensor x, tokens;  // (L, B, width), (L, B) i64
};

inline ContractInput contract_input(int64_t L, int64_t B, DType dtype, Device device, uint64_t seed) {
  Generator gen(seed);
  std::vector<int64_t> ids(L * B);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>((i * 7 + seed * 3) % kContractVocab);
  return {Tensor::uniform({L, B, kContractWidth}, -1, 1, dtype, gen).to(device),
          Tensor::from_vector(ids, {L, B}).to(device)};
}

// Rows [start, end) of dim 0 (time) of the input.
inline ContractInput time_slice(const ContractInput& in, int64_t start, int64_t end) {
  return {slice(in.x, 0, start, end), slice(in.tokens, 0, start, end)};
}

// The batch rows `rows` (dim 1) of the input.
inline ContractInput batch_rows(const ContractInput& in, const std::vector<int64_t>& rows) {
  const Tensor index = Tensor::from_vector(rows, {static_cast<int64_t>(rows.size())}).to(in.x.device());
  return {index_select(in.x, 1, index), index_select(in.tokens, 1, index)};
}

inline Tensor run(const nn::SequenceEncoder& e, const ContractInput& in, nn::EncoderStatePtr& state,
                  const Tensor& mask_pad = Tensor()) {
  return e.forward_sequence({in.x, mask_pad, in.tokens}, state);
}

inline double contract_tolerance(DType dtype) { return dtype == DType::F64 ? 1e-10 : 1e-5; }

inline ::testing::AssertionResult outputs_equal(const Tensor& a, const Tensor& b, DType dtype) {
  if (a.shape() != b.shape())
    return ::testing::AssertionFailure() << "shapes differ: " << shape_str(a.shape()) << " vs " << shape_str(b.shape());
  const auto va = a.to(Device::cpu()).to_vector<double>(), vb = b.to(Device::cpu()).to_vector<double>();
  const double tol = contract_tolerance(dtype);
  for (size_t i = 0; i < va.size(); ++i)
    if (!(std::abs(va[i] - vb[i]) <= tol * std::max(1.0, std::abs(vb[i]))))
      return ::testing::AssertionFailure() << "element " << i << ": " << va[i] << " vs " << vb[i] << " (tolerance "
                                           << tol << ")";
  return ::testing::AssertionSuccess();
}

// Feeds the input in pieces of the given lengths with the carried state; returns the outputs joined.
inline Tensor run_in_pieces(const nn::SequenceEncoder& e, const ContractInput& in, const std::vector<int64_t>& pieces,
                            nn::EncoderStatePtr& state) {
  return testing::joined_over_pieces(pieces, [&](int64_t from, int64_t to) { return run(e, time_slice(in, from, to), state); });
}

// In evaluation, an (L, B) input of `seed` fed in `pieces` (summing to L) with the carried state equals
// one pass; with `then_continue`, the states carried out of both also continue a further (3, B) input of
// seed + 1 the same way. Skipped for a variant that does not stream.
inline void check_pieces_equal_whole(const EncoderVariant& v, Device device, int64_t L, int64_t B, uint64_t seed,
                                     const std::vector<int64_t>& pieces, bool then_continue) {
  const auto e = build_encoder(v, device);
  if (!e->streams()) GTEST_SKIP() << v.name() << " does not stream (streams() is false): another variant covers it";
  autograd::NoGradGuard no_grad;
  const ContractInput in = contract_input(L, B, v.dtype, device, seed);
  nn::EncoderStatePtr whole_state, piece_state;
  const Tensor whole = run(*e, in, whole_state);
  const Tensor pieced = run_in_pieces(*e, in, pieces, piece_state);
  EXPECT_TRUE(outputs_equal(pieced, whole, v.dtype)) << v.name();
  if (!then_continue) return;
  const ContractInput next = contract_input(3, B, v.dtype, device, seed + 1);
  EXPECT_TRUE(outputs_equal(run(*e, next, piece_state), run(*e, next, whole_state), v.dtype)) << v.name();
}

inline void check_chunks_equal_whole(const EncoderVariant& v, Device device) {
  check_pieces_equal_whole(v, device, 11, 3, 1, {4, 1, 3, 2, 1}, true);
}

inline void check_token_by_token_equals_whole(const EncoderVariant& v, Device device) {
  check_pieces_equal_whole(v, device, 10, 2, 3, std::vector<int64_t>(10, 1), false);
}

inline void check_padding_leaves_other_rows(const EncoderVariant& v, Device device) {
  const auto e = build_encoder(v, device);
  if (!e->accepts_padding()) GTEST_SKIP() << v.name() << " reads unpadded streams only (accepts_padding() is false)";
  autograd::NoGradGuard no_grad;
  const int64_t L = 9;
  const std::vector<int64_t> lengths = {9, 5, 7};
  const int64_t B = static_cast<int64_t>(lengths.size());
  const ContractInput in = contract_input(L, B, v.dtype, device, 4);
  std::vector<int32_t> pad(L * B);
  for (int64_t t = 0; t < L; ++t)
    for (int64_t b = 0; b < B; ++b) pad[t * B + b] = t >= lengths[b];
  nn::EncoderStatePtr state;
  const Tensor padded = run(*e, in, state, Tensor::from_vector(pad, {L, B}).to(device));
  for (int64_t b = 0; b < B; ++b) {
    nn::EncoderStatePtr alone_state;
    const ContractInput row = time_slice(batch_rows(in, {b}), 0, lengths[b]);
    const Tensor alone = run(*e, row, alone_state);
    const Tensor ours = slice(index_select(padded, 1, Tensor::full({1}, static_cast<double>(b), DType::I64, device)), 0, 0,
                              lengths[b]);
    EXPECT_TRUE(outputs_equal(ours, alone, v.dtype)) << v.name() << ": row " << b << " of length " << lengths[b];
  }
}

inline void check_reorder_then_step(const EncoderVariant& v, Device device) {
  const auto e = build_encoder(v, device);
  autograd::NoGradGuard no_grad;
  const ContractInput prefix = contract_input(6, 3, v.dtype, device, 5);
  const std::vector<int64_t> rows = {2, 0, 0, 1};
  const ContractInput next = contract_input(e->streams() ? 1 : 2, 4, v.dtype, device, 6);
  nn::EncoderStatePtr state;
  run(*e, prefix, state);
  if (state) state = state->reordered(Tensor::from_vector(rows, {4}));
  const Tensor reordered = run(*e, next, state);
  nn::EncoderStatePtr fresh;
  run(*e, batch_rows(prefix, rows), fresh);
  EXPECT_TRUE(outputs_equal(reordered, run(*e, next, fresh), v.dtype)) << v.name();
}

// At precision bf16 (train.precision bf16: bf16 GEMM operands, and the layers that route bf16
// activations) a float32 encoder still answers in float32, within bf16 rounding of its float32 output,
// and its backward runs: what follows an encoder (heads, losses) never sees a bf16 tensor it did not ask for.
inline void check_bf16_precision_answers_in_float32(const EncoderVariant& v, Device device) {
  if (v.dtype != DType::F32) GTEST_SKIP() << "bf16 precision applies to float32 models";
  struct RestorePrecision {
    MatmulPrecision before = matmul_precision();
    ~RestorePrecision() { set_matmul_precision(before); }
  } restore;
  const auto encoder = build_encoder(v, device);
  const ContractInput in = contract_input(5, 3, DType::F32, device, 41);
  nn::EncoderStatePtr state;
  set_matmul_precision(MatmulPrecision::Highest);
  const Tensor reference = run(*encoder, in, state);
  state = nullptr;
  set_matmul_precision(MatmulPrecision::Medium);
  Tensor x = in.x.detach().clone();
  x.set_requires_grad(true);
  const Tensor out = encoder->forward_sequence({x, Tensor(), in.tokens}, state);
  ASSERT_EQ(out.dtype(), DType::F32) << v.name() << " answered in " << dtype_name(out.dtype()) << " at bf16";
  EXPECT_LT(max_error_over_largest(out, reference), 0.05) << v.name() << ": bf16 output too far from float32's";
  autograd::backward({sum(out)}, {Tensor::ones({}, DType::F32, device)});
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().dtype(), DType::F32);
}

// Every encoder has a variant that streams (else its incremental decoding would go untested).
inline void check_every_encoder_streams_somewhere(Device device) {
  for (const nn::EncoderSpec& spec : nn::encoders()) {
    bool streams = false;
    for (const EncoderVariant& v : encoder_variants())
      if (v.encoder == spec.name && build_encoder(v, device)->streams()) streams = true;
    EXPECT_TRUE(streams) << spec.name << ": no contract variant streams; add one to its EncoderSpec::contract_variants";
  }
}

}  // namespace sru::testing
