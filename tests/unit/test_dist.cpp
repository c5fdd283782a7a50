// Data parallel without MPI: the single-process communicator, rank shares, and two ranks simulated
// in one process (SimulatedPair) driving the real tasks, gradient buckets and training step, which
// must reproduce a single process's losses, updates and evaluations. (tests/e2e/mpi.sh runs the same
// under mpirun.)
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>

#include "autograd/engine.h"
#include "core/kernel_count.h"
#include "dist/communicator.h"
#include "dist/grad_sync.h"
#include "nn/sru.h"
#include "ops/ops.h"
#include "tasks/batching.h"
#include "tasks/classify.h"
#include "tasks/lm.h"
#include "tasks/squad.h"
#include "tasks/registry.h"
#include "testing.h"
#include "train/step.h"
#include "train/trainer.h"

using namespace sru;
using sru::testing::error_of;
using sru::testing::last_word_sentences;
using sru::testing::temp_file;

namespace {

// Two ranks in one process, run one after the other. Rank 1 runs each call first and records every
// buffer, number list and gathered string it is given; rank 0 then combines the records with its own,
// in order, so it holds the sums and gathers two real ranks would both hold. Rank 1 itself gets its own
// contribution twice (as if the other rank were its twin), which keeps its per-parameter flags and
// votes consistent; its weights are then overwritten with rank 0's after each step.
class SimulatedPair final : public dist::Communicator {
 public:
  struct Records {
    std::vector<Tensor> tensors;
    std::vector<std::vector<double>> numbers;
    std::vector<std::string> gathered;
  };
  SimulatedPair(int rank, Records& records) : rank_(rank), records_(records) {}
  int rank() const override { return rank_; }
  int size() const override { return 2; }
  int local_rank() const override { return rank_; }
  int local_size() const override { return 2; }
  std::string backend() const override { return "simulated"; }
  std::string host() const override { return "here"; }
  void set_timeout(double) override {}
  void use_device(Device) override {}
  void start_all_reduce_sum(const Tensor& buffer, const std::string&) override {
    Tensor b = buffer;
    if (rank_ == 1) {
      records_.tensors.push_back(buffer.clone());
      b.mul_(2.0);
    } else {
      b.add_(records_.tensors.at(tensors_used_++));
    }
  }
  void wait_all() override {}
  void all_reduce_sum(std::vector<double>& values, const std::string&) override {
    if (rank_ == 1) {
      records_.numbers.push_back(values);
      for (double& v : values) v *= 2;
    } else {
      const std::vector<double>& other = records_.numbers.at(numbers_used_++);
      for (size_t i = 0; i < values.size(); ++i) values[i] += other[i];
    }
  }
  std::vector<std::string> all_gather(const std::string& bytes, const std::string&) override {
    if (rank_ == 1) {
      records_.gathered.push_back(bytes);
      return {bytes, bytes};
    }
    return {bytes, records_.gathered.at(gathered_used_++)};
  }
  void broadcast(std::string&, int, const std::string&) override {}
  [[noreturn]] void abort(int) override { throw std::logic_error("abort"); }

 private:
  int rank_;
  Records& records_;
  size_t tensors_used_ = 0, numbers_used_ = 0, gathered_used_ = 0;
};

std::string random_text(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string out;
  for (int64_t i = 0; i < n; ++i) out.push_back("abcde fgh\n"[rng() % 10]);
  return out;
}

// Every kind of dropout on: embeddings and outputs (time-major masks), the SRU's layer and input masks.
void with_dropout(config::Config& c) {
  c.model.dropout = 0.3;
  c.model.embedding_dropout = 0.2;
  c.model.output_dropout = 0.1;
  c.encoder_options.as<nn::SRUOptions>().rnn_dropout = 0.1;
  c.train.optimizer = "sgd";  // p -= lr g: the updates show the gradients
  c.train.lr = 1.0;
  c.train.seed = 4;
}

config::Config charlm_config() {
  config::Config c = config::Config::defaults("charlm", "sru");
  c.data.path = temp_file("dist_bytes.txt", random_text(3000, 1));
  c.data.batch_size = 4;
  c.data.eval_batch_size = 3;  // uneven across two ranks: 2 + 1 streams
  c.task_as<tasks::LMOptions>().bptt = 8;
  c.model.embedding_size = 8;
  c.model.hidden_size = 16;
  c.model.num_layers = 2;
  with_dropout(c);
  return c;
}

config::Config classify_config() {
  config::Config c = config::Config::defaults("classify", "sru");
  c.data.path = temp_file("dist_train.txt", last_word_sentences(21, 2, 9, 12));  // batches 4, 4, 4, 4, 4, 1
  auto& o = c.task_as<tasks::ClassifyOptions>();
  o.valid_path = temp_file("dist_valid.txt", last_word_sentences(9, 3, 9, 12));
  o.test_path = temp_file("dist_test.txt", last_word_sentences(9, 4, 9, 12));
  c.data.batch_size = 4;
  c.data.eval_batch_size = 2;
  c.model.embedding_size = 8;
  c.model.hidden_size = 8;
  c.model.num_layers = 2;
  c.model.bidirectional = true;
  with_dropout(c);
  return c;
}

// One rank's (or the single process's) task, optimiser and step.
struct Trainee {
  Trainee(const config::Config& c, dist::Communicator& comm) : gen(static_cast<uint64_t>(c.train.seed)) {
    task = tasks::make_task(c, gen, {true, nullptr, &comm});
    optimizer = train::make_optimizer(c.train, task->model());
    step = std::make_unique<train::TrainingStep>(*task, *optimizer, c.train, train::schedule_options(c.train, 8, 100),
                                                 &comm);
  }
  Generator gen;
  std::unique_ptr<tasks::Task> task;
  std::unique_ptr<optim::Optimizer> optimizer;
  std::unique_ptr<train::TrainingStep> step;
};

// Trains `steps` steps of epoch 0 as one process and as a simulated pair of ranks, `accumulate` batches
// per step; rank 0 must follow the single process (loss, weights after every update, final evaluation).
// Returns rank 0's weights.
nn::NamedTensors expect_pair_matches_single(const config::Config& c, int64_t steps, int64_t accumulate = 1) {
  Trainee single(c, dist::single_process());
  SimulatedPair::Records records;
  SimulatedPair comm0(0, records), comm1(1, records);
  Trainee rank1(c, comm1), rank0(c, comm0);
  for (Trainee* t : {&single, &rank1, &rank0}) t->task->start_epoch(0, 0);
  const int64_t batches = single.task->steps_per_epoch();
  const auto buckets = static_cast<size_t>(
      dist::GradientSync(comm1, single.optimizer->parameters(), c.train.dist_bucket_mb, 2).buckets());
  for (int64_t i = 0; i < steps; ++i) {
    const int64_t first = i * accumulate, count = train::batches_of_step(first, batches, accumulate);
    const size_t sums_before = records.tensors.size();
    const train::StepOutcome a = single.step->run(first, count, i + 1, 0);
    rank1.step->run(first, count, i + 1, 0);
    const train::StepOutcome b = rank0.step->run(first, count, i + 1, 0);
    EXPECT_EQ(records.tensors.size() - sums_before, buckets)
        << "one all-reduce per bucket and step, however many batches the step takes";
    EXPECT_NEAR(b.loss, a.loss, 1e-6 * std::abs(a.loss)) << c.task << " step " << i + 1;
    EXPECT_EQ(b.tokens, a.tokens);
    const nn::NamedTensors p0 = rank0.task->model().named_parameters(), ps = single.task->model().named_parameters();
    const nn::NamedTensors p1 = rank1.task->model().named_parameters();
    for (size_t k = 0; k < p0.size(); ++k) {
      EXPECT_TRUE(sru::testing::tensors_near(p0[k].second, ps[k].second, 1e-5, 1e-5))
          << c.task << " step " << i + 1 << ": " << p0[k].first;
      Tensor p = p1[k].second;
      p.copy_(p0[k].second);  // rank 1 continues from the summed update, as a real rank would
    }
    EXPECT_EQ(rank0.gen.offset(), single.gen.offset()) << "the ranks draw as many random numbers as one process";
  }
  // Evaluation split across the pair: rank 1 first, then rank 0 adds.
  const tasks::Metrics whole = single.task->evaluate("valid", 0);
  rank1.task->evaluate("valid", 0);
  const tasks::Metrics split = rank0.task->evaluate("valid", 0);
  for (const auto& [name, value] : whole) EXPECT_NEAR(split.at(name), value, 1e-6 * std::max(1.0, std::abs(value))) << name;
  return rank0.task->model().named_parameters();
}

}  // namespace

TEST(Dist, SharesAreContiguousAndCoverEveryRow) {
  const std::vector<std::pair<int64_t, int64_t>> expected = {{0, 3}, {3, 2}, {5, 2}};
  for (int r = 0; r < 3; ++r) {
    const dist::Rows part = dist::share_of(7, r, 3);
    EXPECT_EQ(part.first, expected[r].first);
    EXPECT_EQ(part.count, expected[r].second);
  }
  EXPECT_EQ(dist::share_of(1, 1, 2).count, 0);
  SimulatedPair::Records records;
  SimulatedPair rank1(1, records);
  const tasks::BatchPart empty = tasks::batch_part(1, rank1);  // a last batch of one example
  EXPECT_EQ(empty.count, 1);
  EXPECT_EQ(empty.share, 0.0);
  EXPECT_EQ(empty.shard.rows, 1);
  const tasks::BatchPart half = tasks::batch_part(5, rank1);
  EXPECT_EQ(half.first, 3);
  EXPECT_EQ(half.count, 2);
  EXPECT_DOUBLE_EQ(half.share, 0.4);
  EXPECT_FALSE(tasks::batch_part(5, dist::single_process()).shard.active());
}

TEST(Dist, SingleProcessCollectivesAreTheIdentity) {
  dist::Communicator& one = dist::single_process();
  EXPECT_EQ(one.size(), 1);
  EXPECT_EQ(one.rank(), 0);
  Tensor t = Tensor::full({3}, 2.5);
  one.all_reduce_sum(t, "test");
  EXPECT_EQ(t.to_vector<float>(), std::vector<float>(3, 2.5f));
  std::vector<double> v = {1, 2};
  one.all_reduce_sum(v, "test");
  EXPECT_EQ(v, (std::vector<double>{1, 2}));
  EXPECT_EQ(one.all_gather("abc", "test"), std::vector<std::string>{"abc"});
  EXPECT_EQ(dist::on_root(one, [] { return std::string("root's"); }, "test"), "root's");
  // A single process's errors pass through on_root as they are.
  EXPECT_EQ(error_of([&] { dist::on_root(one, []() -> std::string { SRU_FAIL("no such file"); }, "test"); }),
            "no such file");
  const Tensor x = Tensor::ones({2, 3});
  EXPECT_TRUE(dist::all_gather(one, x, 1, "test").shares_storage(x));
}

// mpirun -np 2 of a program whose world has one process (a build without MPI, another MPI's mpirun).
TEST(Dist, RefusesALaunchOfSeveralProcessesItCannotJoin) {
  ASSERT_EQ(dist::world().size(), 1);  // the test binary never starts MPI
  dist::check_launch();                // not launched: fine
  ::setenv("PMI_SIZE", "1", 1);
  dist::check_launch();  // a launcher's single process: fine
  ::setenv("PMI_SIZE", "2", 1);
  const std::string m = error_of([] { dist::check_launch(); });
  ::setenv("SRU_DIST", "single", 1);
  dist::check_launch();  // asked for: every process alone
  ::unsetenv("SRU_DIST");
  ::unsetenv("PMI_SIZE");
  EXPECT_NE(m.find("a launcher started this process as one of 2 (PMI_SIZE=2), but "), std::string::npos) << m;
  EXPECT_NE(m.find("each process would train alone and write the same run directory"), std::string::npos) << m;
}

TEST(Dist, RefusesWhatDataParallelCannotDo) {
  SimulatedPair::Records records;
  SimulatedPair comm(0, records);
  config::Config c = charlm_config();
  c.data.batch_size = 5;
  Generator gen(1);
  const auto task = tasks::make_task(c, gen, {true, nullptr, &comm});
  const std::string m = error_of([&] { train::check_data_parallel(c, *task, comm); });
  EXPECT_NE(m.find("data.batch_size 5 is the global batch, and it does not divide among the 2 processes"),
            std::string::npos) << m;
}

// The gradients of the trainable parameters go in buckets of at most bucket_mb, last parameters first;
// a parameter no backward reaches keeps no gradient.
TEST(Dist, GradientBucketsFollowReverseParameterOrder) {
  Tensor a = Tensor::ones({300}).set_requires_grad(true), b = Tensor::ones({300}).set_requires_grad(true);
  Tensor unused = Tensor::ones({2}).set_requires_grad(true);
  SimulatedPair::Records records;
  SimulatedPair rank1(1, records), rank0(0, records);
  const nn::NamedTensors params = {{"a", a}, {"b", b}, {"unused", unused}};
  const double mb = 1300.0 / (1 << 20);
  dist::GradientSync sync1(rank1, params, mb, 1), sync0(rank0, params, mb, 1);
  EXPECT_EQ(sync0.buckets(), 2);  // {unused, b}, {a}: 1300 bytes each at most
  for (auto [sync, share, vote] : {std::tuple{&sync1, 0.25, 1.0}, std::tuple{&sync0, 0.75, 0.0}}) {
    a.set_grad(Tensor::full({300}, share == 0.25 ? 4.0 : 8.0));
    b.set_grad(Tensor::full({300}, 1.0));
    unused.set_grad(Tensor());
    const auto scope = sync->begin(share);
    const dist::GradientSync::Result r = sync->finish(Tensor::scalar(share == 0.25 ? 2.0 : 1.0), {vote});
    if (sync == &sync0) {
      EXPECT_EQ(a.grad().to_vector<float>(), std::vector<float>(300, 0.25f * 4 + 0.75f * 8));
      EXPECT_EQ(b.grad().to_vector<float>(), std::vector<float>(300, 1.0f));
      EXPECT_FALSE(unused.grad().defined());
      EXPECT_DOUBLE_EQ(r.loss.item<double>(), 0.25 * 2 + 0.75 * 1);
      EXPECT_DOUBLE_EQ(r.votes[0].item<double>(), 1.0);
      EXPECT_DOUBLE_EQ(r.disagreement.item<double>(), 0.0);
    }
  }
}

// With the model's flat layout the buckets are ranges of the flat gradient buffer: backward's gradients
// are summed where they lie (no packing copy; the share is one multiply per bucket), the extras ride in
// front of the first parameters, and afterwards each .grad is its flat place again (the optimiser's
// one-call update). The sums are those of the packed buckets.
TEST(Dist, FlatGradientsAreSummedWhereBackwardWroteThem) {
  struct Three : nn::Module {
    Three() {
      a = register_parameter("a", Tensor::ones({300}));
      b = register_parameter("b", Tensor::ones({5, 60}));
      unused = register_parameter("unused", Tensor::ones({2}));
    }
    Tensor a, b, unused;
  };
  const double mb = 1300.0 / (1 << 20);  // {unused, b}, {a}
  std::vector<std::vector<float>> sums[2];
  uint64_t dispatches[2] = {0, 0};  // rank 0's backward and finish
  for (const bool flat_layout : {false, true}) {
    Three ranks[2];
    SimulatedPair::Records records;
    SimulatedPair rank1(1, records), rank0(0, records);
    std::shared_ptr<nn::FlatParameters> flats[2];
    std::unique_ptr<dist::GradientSync> syncs[2];
    for (int r = 0; r < 2; ++r) {
      nn::NamedTensors params;
      for (const auto& named : ranks[r].named_parameters()) params.push_back(named);
      if (flat_layout) flats[r] = ranks[r].flatten_parameters();
      syncs[r] = std::make_unique<dist::GradientSync>(r == 0 ? static_cast<dist::Communicator&>(rank0) : rank1, params,
                                                      mb, 1, flats[r]);
      EXPECT_EQ(syncs[r]->flat(), flat_layout);
      EXPECT_EQ(syncs[r]->buckets(), 2);
    }
    for (int r : {1, 0}) {
      Three& m = ranks[r];
      const double share = r == 1 ? 0.25 : 0.75;
      // Broadcast adds: their backward sums rows into each parameter's gradient (into its flat place).
      const Tensor x = Tensor::full({2, 300}, r == 1 ? 2.0 : 4.0), y = Tensor::ones({3, 5, 60});
      const uint64_t before = kernel_dispatches();
      const auto scope = syncs[r]->begin(share);
      autograd::backward(sum(add(x, m.a) * x) + sum(add(y, m.b)));
      const dist::GradientSync::Result result = syncs[r]->finish(Tensor::scalar(1.0), {0.0});
      dispatches[flat_layout] = kernel_dispatches() - before;
      if (r == 0 && flat_layout) {
        const nn::FlatParameters::Group& g = flats[0]->groups()[0];
        EXPECT_TRUE(m.a.grad().shares_storage(g.gradients)) << "the sum lies in the flat place";
        EXPECT_TRUE(flats[0]->gradients_in_place(0) == false && !m.unused.grad().defined());
        EXPECT_TRUE(m.a.grad().impl()->offset == m.a.impl()->grad_home->offset);
      }
      if (r == 0) {
        EXPECT_DOUBLE_EQ(result.disagreement.item<double>(), 0.0);
        sums[flat_layout].push_back(m.a.grad().to_vector<float>());
        sums[flat_layout].push_back(m.b.grad().to_vector<float>());
      }
    }
  }
  // Packed: a copy and a multiply per reached parameter; flat: a multiply per bucket.
  EXPECT_EQ(dispatches[0] - dispatches[1], 2u);
  EXPECT_EQ(sums[1], sums[0]);
  EXPECT_EQ(sums[1][0], std::vector<float>(300, 0.25f * 2 * 2 + 0.75f * 2 * 4));  // rows of x, summed
}

TEST(Dist, TwoRanksTrainTheCharLmAsOneProcess) {
  const config::Config c = charlm_config();
  const nn::NamedTensors one_bucket = expect_pair_matches_single(c, 4);
  // Buckets of ~100 bytes: each starts from backward as its gradients complete. The sums are the same
  // additions, so the weights are bit for bit those of one bucket.
  config::Config small = c;
  small.train.dist_bucket_mb = 1e-4;
  const nn::NamedTensors many = expect_pair_matches_single(small, 4);
  for (size_t k = 0; k < many.size(); ++k)
    EXPECT_EQ(many[k].second.to_vector<float>(), one_bucket[k].second.to_vector<float>()) << many[k].first;
}

// The Document Reader (bidirectional SRUs, attention, dropout everywhere, partial fine-tuning of the
// embedding): each rank takes half of every batch of questions, padded as the whole batch; the
// evaluation gathers every rank's answers.
TEST(Dist, TwoRanksTrainTheSquadReaderAsOneProcess) {
  config::Config c = config::Config::defaults("squad", "sru");
  c.data.path = std::string(SRU_SOURCE_DIR) + "/data/squad-sample/dev-v1.1.sample.json";
  c.task_as<tasks::SquadOptions>().valid_path = c.data.path;
  c.data.batch_size = 8;
  c.data.eval_batch_size = 16;
  c.model.embedding_size = 8;
  c.model.hidden_size = 8;
  c.model.num_layers = 2;
  c.model.bidirectional = true;
  with_dropout(c);
  c.train.lr = 0.1;
  expect_pair_matches_single(c, 3);
}

TEST(Dist, TwoRanksTrainTheClassifierAsOneProcess) {
  // Six batches, the last of one example: rank 1's share of it is empty, so it computes that example
  // with share 0 (same random numbers, zero gradient).
  expect_pair_matches_single(classify_config(), 6);
}

// Gradient accumulation (train.accumulate 2): each rank sums its rows' gradients over the step's
// batches and the ranks sum once per step (one all-reduce per bucket); the classifier's last step holds
// its one-example batch (rank 1's share of it empty), the char-LM's steps carry the state through both
// batches; with several buckets they start from the last batch's backward only.
TEST(Dist, TwoRanksAccumulateBatchesAsOneProcess) {
  config::Config classify = classify_config();
  classify.train.accumulate = 2;
  classify.train.label_smoothing = 0.1;
  expect_pair_matches_single(classify, 3, 2);
  config::Config charlm = charlm_config();
  charlm.train.accumulate = 2;
  expect_pair_matches_single(charlm, 3, 2);
  charlm.train.dist_bucket_mb = 1e-4;
  expect_pair_matches_single(charlm, 3, 2);
}
