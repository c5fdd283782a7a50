// The autograd engine: chains, shared inputs (gradients add up), accumulation across backward calls,
// no-grad mode, freed graphs, multi-root backward, and release of saved tensors.
#include <gtest/gtest.h>

#include <map>

#include "autograd/engine.h"
#include "autograd/gradcheck.h"
#include "autograd/node.h"
#include "core/kernel_count.h"
#include "ops/ops.h"
#include "testing.h"

using namespace sru;
using sru::testing::error_of;
using sru::testing::values_near;

namespace {
Tensor param(std::vector<double> values, Shape shape) {
  Tensor t = Tensor::from_vector(values, shape, DType::F64);
  t.set_requires_grad(true);
  return t;
}
}  // namespace

TEST(Autograd, ChainRuleThroughSeveralOps) {
  // y = sum(tanh(x * w)),  dy/dx = w (1 - tanh^2(xw)),  dy/dw = x (1 - tanh^2(xw))
  Tensor x = param({0.5, -1.0}, {2}), w = param({2.0, 0.25}, {2});
  autograd::backward(sum(tanh(x * w)));
  const double t0 = std::tanh(1.0), t1 = std::tanh(-0.25);
  EXPECT_TRUE(values_near(x.grad(), {2}, {2.0 * (1 - t0 * t0), 0.25 * (1 - t1 * t1)}, 1e-12));
  EXPECT_TRUE(values_near(w.grad(), {2}, {0.5 * (1 - t0 * t0), -1.0 * (1 - t1 * t1)}, 1e-12));
}

TEST(Autograd, TensorUsedTwiceGetsSummedGradient) {
  // y = sum(x * x + x) -> dy/dx = 2x + 1, through a diamond in the graph.
  Tensor x = param({1.0, 2.0, -3.0}, {3});
  autograd::backward(sum(x * x + x));
  EXPECT_TRUE(values_near(x.grad(), {3}, {3.0, 5.0, -5.0}, 1e-12));
}

TEST(Autograd, GradientsAccumulateAcrossBackwardCalls) {
  Tensor x = param({1.0, 2.0}, {2});
  autograd::backward(sum(x * 3.0));
  autograd::backward(sum(x * 2.0));
  EXPECT_TRUE(values_near(x.grad(), {2}, {5.0, 5.0}, 1e-12));
}

TEST(Autograd, NoGradGuardRecordsNothing) {
  Tensor x = param({1.0}, {1});
  Tensor y;
  {
    autograd::NoGradGuard guard;
    EXPECT_FALSE(autograd::grad_enabled());
    y = x * 2.0;
  }
  EXPECT_TRUE(autograd::grad_enabled());
  EXPECT_FALSE(y.requires_grad());
  EXPECT_NE(error_of([&] { autograd::backward(sum(y)); }).find("does not require grad"), std::string::npos);
}

TEST(Autograd, InputsWithoutRequiresGradGetNoGradient) {
  Tensor x = param({1.0, 2.0}, {2});
  Tensor c = Tensor::from_vector(std::vector<double>{3.0, 4.0}, {2});
  autograd::backward(sum(x * c));
  EXPECT_FALSE(c.grad().defined());
  EXPECT_TRUE(values_near(x.grad(), {2}, {3.0, 4.0}, 1e-12));
}

TEST(Autograd, SecondBackwardThroughFreedGraphIsAnError) {
  Tensor x = param({1.0, 2.0}, {2});
  Tensor loss = sum(exp(x));
  autograd::backward(loss);
  EXPECT_NE(error_of([&] { autograd::backward(loss); }).find("a second time"), std::string::npos);
}

TEST(Autograd, RetainGraphAllowsRepeatedBackward) {
  Tensor x = param({0.0, 1.0}, {2});
  Tensor loss = sum(exp(x));
  autograd::backward(loss, Tensor(), /*retain_graph=*/true);
  autograd::backward(loss);
  EXPECT_TRUE(values_near(x.grad(), {2}, {2.0, 2.0 * std::exp(1.0)}, 1e-12));
}

// An output marked takes_undefined_grad (autograd::record's last argument) reaches the backward
// undefined when nothing downstream used it; unmarked outputs arrive zero-filled, as before.
TEST(Autograd, OutputsMarkedTakesUndefinedGradArriveUndefined) {
  const Tensor x = Tensor::ones({3}).set_requires_grad(true);
  std::vector<bool> seen_defined;
  for (bool marked : {false, true}) {
    const Tensor a = Tensor::empty({3}), b = Tensor::empty({3});
    autograd::record("TwoOutputs", {x}, {a, b}, [&](const std::vector<Tensor>& g) {
      seen_defined.push_back(g[1].defined());
      return std::vector<Tensor>{g[0]};
    }, marked ? std::vector<int>{1} : std::vector<int>{});
    autograd::backward(sum(a));
  }
  EXPECT_EQ(seen_defined, (std::vector<bool>{true, false}));
  EXPECT_TRUE(values_near(x.grad(), {3}, {2, 2, 2}));
}

TEST(Autograd, NonScalarRootNeedsAGradient) {
  Tensor x = param({1.0, 2.0}, {2});
  Tensor y = x * 2.0;
  EXPECT_NE(error_of([&] { autograd::backward(y); }).find("must be given for the non-scalar"), std::string::npos);
  autograd::backward(y, Tensor::from_vector(std::vector<double>{1.0, -1.0}, {2}));
  EXPECT_TRUE(values_near(x.grad(), {2}, {2.0, -2.0}, 1e-12));
}

// A backward function returning a gradient of another dtype than its input (a float32 gradient for a
// float64 tensor, or float32 for a bf16 activation) is refused naming the node, not accumulated.
TEST(Autograd, GradientOfAnotherDtypeIsRefusedByName) {
  Tensor x = param({1.0, 2.0}, {2});
  Tensor y = (x * 2.0).detach();
  autograd::record("WrongDtypeBackward", {x}, {y},
                   [](const std::vector<Tensor>& g) { return std::vector<Tensor>{g[0].to(DType::F32)}; });
  const std::string m = error_of([&] { autograd::backward(sum(y)); });
  EXPECT_NE(m.find("WrongDtypeBackward: gradient for input 0 is f32, the input is f64"), std::string::npos) << m;
}

TEST(Autograd, MultipleRootsInOneCall) {
  Tensor x = param({1.0, 2.0}, {2});
  Tensor a = sum(x * x), b = sum(x * 10.0);
  autograd::backward({a, b}, {Tensor(), Tensor::scalar(0.5, DType::F64)});
  EXPECT_TRUE(values_near(x.grad(), {2}, {2.0 + 5.0, 4.0 + 5.0}, 1e-12));
}

TEST(Autograd, SavedTensorsAreReleasedAfterBackward) {
  // The graph holds the only other reference to the activation through the saved copy in tanh's
  // backward; once backward has run, the activation's storage is referenced by `h` alone.
  Tensor x = param({0.1, 0.2, 0.3}, {3});
  Tensor h = tanh(x);
  Tensor loss = sum(h);
  EXPECT_GT(h.impl()->storage.use_count(), 1);
  autograd::backward(loss);
  EXPECT_EQ(h.impl()->storage.use_count(), 1);
}

TEST(Autograd, LongChainDoesNotRecurse) {
  // 20000 nodes: the engine is iterative, so deep graphs (long unrolled RNNs) cannot overflow the stack.
  Tensor x = param({1.0}, {1});
  Tensor y = x;
  for (int i = 0; i < 20000; ++i) y = y * 1.0;
  autograd::backward(sum(y));
  EXPECT_TRUE(values_near(x.grad(), {1}, {1.0}, 1e-12));
}

TEST(Autograd, DeepGraphIsDestroyedWithoutRecursion) {
  Tensor x = param({1.0}, {1});
  {
    Tensor y = x;
    for (int i = 0; i < 200000; ++i) y = y + 1.0;
  }  // the whole unused graph is freed here
  SUCCEED();
}

TEST(Gradcheck, DetectsAWrongGradient) {
  // A function whose recorded backward is deliberately wrong (2x instead of 3x^2) must fail the check.
  auto wrong_cube = [](const std::vector<Tensor>& in) {
    Tensor x = in[0];
    Tensor y = Tensor::empty(x.shape(), DType::F64);
    for (int64_t i = 0; i < x.numel(); ++i) y.data<double>()[i] = std::pow(x.data<double>()[i], 3);
    if (autograd::needs_grad({x}))
      autograd::record("WrongCube", {x}, {y}, [x = x.detach()](const std::vector<Tensor>& g) {
        return std::vector<Tensor>{g[0] * x * 2.0};
      });
    return y;
  };
  const auto result = autograd::gradcheck(autograd::SingleFn(wrong_cube), {sru::testing::leaf({4}, 1)});
  EXPECT_FALSE(result.ok);
  EXPECT_NE(result.message.find("analytic"), std::string::npos);
}

// The host profile (core/kernel_count.h): each dispatch leaves a mark named after its kernel, the time to
// the next mark is charged to it, and stopping returns the names with their counts, largest time first.
TEST(HostProfile, ChargesTheTimeBetweenMarksToTheEarlierOnesName) {
  const Tensor a = Tensor::ones({4, 3}), b = Tensor::ones({3});
  start_host_profile();
  Tensor c = add(a, b);
  c = add(c, b);
  c = relu(c);
  const std::vector<HostProfileEntry> entries = stop_host_profile();
  std::map<std::string, uint64_t> marks;
  for (const HostProfileEntry& e : entries) marks[e.name] = e.marks;
  // Three dispatches, two intervals: both adds charged to "binary"; relu, the last mark, has no successor.
  EXPECT_EQ(marks, (std::map<std::string, uint64_t>{{"binary", 2}}));
  // Off after a stop: dispatches leave no marks (a stop without a new start returns none).
  c = add(c, b);
  c = relu(c);
  EXPECT_TRUE(stop_host_profile().empty());
}

// Folding (autograd/node.h FoldingBackwardFn): x feeds a matmul and, created after it, a product with c,
// whose node runs first, so its gradient for x waits in the engine; the matmul's backward then adds its
// x gradient into that buffer (a GEMM with beta 1) instead of a GEMM and an add_: one dispatch less,
// the same sum. Built the other way round (the matmul newest) nothing waits yet and the engine adds.
TEST(Autograd, AMatmulFoldsItsGradientIntoTheOneWaiting) {
  for (const DType dtype : {DType::F64, DType::F32}) {
    Generator gen(5);
    Tensor x = Tensor::uniform({4, 3}, -1, 1, dtype, gen).set_requires_grad(true);
    Tensor w = Tensor::uniform({3, 5}, -1, 1, dtype, gen).set_requires_grad(true);
    const Tensor c = Tensor::uniform({4, 3}, -1, 1, dtype, gen), g = Tensor::uniform({4, 5}, -1, 1, dtype, gen);
    Tensor expected;
    {
      autograd::NoGradGuard no_grad;
      expected = matmul(g, w, false, true) + c;  // d/dx of <g, x w> + sum(x c)
    }
    auto dispatches_of_backward = [&](bool matmul_first) {
      x.set_grad(Tensor());
      w.set_grad(Tensor());
      Tensor m, p;
      if (matmul_first) {
        m = matmul(x, w);
        p = x * c;
      } else {
        p = x * c;
        m = matmul(x, w);
      }
      const uint64_t before = kernel_dispatches();
      autograd::backward({m, p}, {g, Tensor::ones({4, 3}, dtype)});
      return kernel_dispatches() - before;
    };
    const uint64_t folded = dispatches_of_backward(true);
    EXPECT_TRUE(sru::testing::tensors_near(x.grad(), expected, dtype == DType::F64 ? 1e-12 : 1e-6));
    const uint64_t added = dispatches_of_backward(false);
    EXPECT_TRUE(sru::testing::tensors_near(x.grad(), expected, dtype == DType::F64 ? 1e-12 : 1e-6));
    EXPECT_EQ(added, folded + 1) << "the folded backward saves the add_";
  }
}

// A waiting gradient that something else still holds (here the caller's seed, passed through by add)
// is not written into: the engine sums into a copy as before.
TEST(Autograd, AWaitingGradientHeldElsewhereIsNotFoldedInto) {
  Tensor x = param({1, 2, 3, 4}, {2, 2}), w = param({1, -1, 0.5, 2}, {2, 2});
  const Tensor seed = Tensor::from_vector(std::vector<double>{10, 20, 30, 40}, {2, 2}, DType::F64);
  Tensor m = matmul(x, w);
  Tensor v = x + Tensor::zeros({2, 2}, DType::F64);  // newer: runs first, hands x the seed itself
  autograd::backward({m, v}, {Tensor::ones({2, 2}, DType::F64), seed});
  EXPECT_TRUE(values_near(seed, {2, 2}, {10, 20, 30, 40}, 0)) << "the caller's tensor was written into";
  // x.grad = seed + ones w^T: row sums of w are 0 and 2.5.
  EXPECT_TRUE(values_near(x.grad(), {2, 2}, {10, 22.5, 30, 42.5}, 1e-12));
}

// Gradient accumulation: a leaf that already has a .grad and gets one gradient in this pass takes the
// product's gradient into that .grad in place (a GEMM with beta 1, no add); with two gradients in the
// pass (a weight used twice) each is summed once, never twice.
TEST(Autograd, AccumulationFoldsAProductIntoTheLeafsGradientOnce) {
  Generator gen(9);
  const Tensor x1 = Tensor::uniform({4, 3}, -1, 1, DType::F64, gen), x2 = Tensor::uniform({4, 3}, -1, 1, DType::F64, gen);
  const Tensor g1 = Tensor::uniform({4, 5}, -1, 1, DType::F64, gen), g2 = Tensor::uniform({4, 5}, -1, 1, DType::F64, gen);
  Tensor w = Tensor::uniform({3, 5}, -1, 1, DType::F64, gen).set_requires_grad(true);
  Tensor part1, part2;
  {
    autograd::NoGradGuard no_grad;
    part1 = matmul(x1, g1, true, false);  // d/dw <g, x w> = x^T g
    part2 = matmul(x2, g2, true, false);
  }
  uint64_t before = kernel_dispatches();
  autograd::backward(matmul(x1, w), g1);
  const uint64_t first_pass = kernel_dispatches() - before;
  const Tensor grad_buffer = w.grad();
  before = kernel_dispatches();
  autograd::backward(matmul(x2, w), g2);
  EXPECT_EQ(kernel_dispatches() - before, first_pass) << "the second pass adds in the GEMM, not after it";
  EXPECT_EQ(w.grad().impl(), grad_buffer.impl()) << "accumulated in place";
  EXPECT_TRUE(sru::testing::tensors_near(w.grad(), part1 + part2, 1e-12));
  // A pass that reaches w twice: one gradient waits for the other, none is added twice.
  autograd::backward(std::vector<Tensor>{matmul(x1, w), matmul(x2, w)}, std::vector<Tensor>{g1, g2});
  EXPECT_TRUE(sru::testing::tensors_near(w.grad(), (part1 + part2) * 2.0, 1e-12));
}

// linear folds its weight's gradient into the accumulated .grad but not the bias's (a column sum): the
// bias's .grad, handed over and not folded, stays where it is and is added once.
TEST(Autograd, AccumulationThroughLinearSumsEveryParameterOnce) {
  Generator gen(4);
  const Tensor x = Tensor::uniform({6, 3}, -1, 1, DType::F64, gen), g = Tensor::uniform({6, 2}, -1, 1, DType::F64, gen);
  Tensor w = Tensor::uniform({2, 3}, -1, 1, DType::F64, gen).set_requires_grad(true);
  Tensor b = Tensor::uniform({2}, -1, 1, DType::F64, gen).set_requires_grad(true);
  for (int pass = 0; pass < 3; ++pass) autograd::backward(linear(x, w, b), g);
  Tensor gw, gb;
  {
    autograd::NoGradGuard no_grad;
    gw = matmul(g, x, true, false) * 3.0;
    gb = sum(g, 0) * 3.0;
  }
  EXPECT_TRUE(sru::testing::tensors_near(w.grad(), gw, 1e-12));
  EXPECT_TRUE(sru::testing::tensors_near(b.grad(), gb, 1e-12));
}

// The same with the accumulated leaf as a product's left operand (matmul's a, linear's x), whose
// gradient the products otherwise reshape: still summed once. And a pass seeded with the leaf's own
// .grad (no folding) adds it like any gradient.
TEST(Autograd, AccumulationIntoALeftOperandAndASeedThatIsTheGradItself) {
  Generator gen(12);
  Tensor a = Tensor::uniform({2, 4, 3}, -1, 1, DType::F64, gen).set_requires_grad(true);
  const Tensor b = Tensor::uniform({3, 5}, -1, 1, DType::F64, gen), g = Tensor::uniform({2, 4, 5}, -1, 1, DType::F64, gen);
  Tensor w = Tensor::uniform({5, 3}, -1, 1, DType::F64, gen), bias = Tensor::uniform({5}, -1, 1, DType::F64, gen);
  Tensor ga;
  {
    autograd::NoGradGuard no_grad;
    ga = matmul(g, b, false, true) + matmul(g, w);  // d/da of <g, a b> and of <g, linear(a, w, bias)>
  }
  for (int pass = 0; pass < 2; ++pass) {
    autograd::backward(matmul(a, b), g);
    autograd::backward(linear(a, w, bias), g);
  }
  EXPECT_TRUE(sru::testing::tensors_near(a.grad(), ga * 2.0, 1e-12));
  Tensor leaf = param({1, 2}, {2});
  autograd::backward(leaf * 3.0, Tensor::ones({2}, DType::F64));
  autograd::backward(leaf * 1.0, leaf.grad());  // seed = the .grad itself: 3 + 3
  EXPECT_TRUE(values_near(leaf.grad(), {2}, {6, 6}, 1e-12));
}
