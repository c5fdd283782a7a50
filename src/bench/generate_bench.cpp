// srubench generate (see bench/generate_bench.h): builds the config's task without its data, asks it
// for its generation capability and times generate calls.
#include "bench/generate_bench.h"

#include <optional>

#include "config/config.h"
#include "core/error.h"
#include "core/rng.h"
#include "tasks/registry.h"
#include "tasks/task.h"
#include "train/checkpoint.h"

namespace sru::bench {

const std::vector<std::string>& generate_strategy_names() {
  static const std::vector<std::string> names = {"greedy", "sample", "beam"};
  return names;
}

void bench_generate(Report& report, const GenerateBenchOptions& o) {
  SRU_CHECK(!o.config.empty() || !o.checkpoint.empty(), "srubench generate: give --config FILE or --checkpoint FILE");
  for (int64_t n : o.tokens) SRU_CHECK(n > 0, "srubench generate: --tokens must be positive, got ", n);
  for (int64_t b : o.batch) SRU_CHECK(b > 0, "srubench generate: --batch sizes must be positive, got ", b);
  SRU_CHECK(o.beam > 0, "srubench generate: --beam must be positive, got ", o.beam);
  tasks::GenerationOptions generation;
  if (o.strategy == "greedy") generation.strategy = tasks::GenerationOptions::Strategy::Greedy;
  else if (o.strategy == "sample") generation.strategy = tasks::GenerationOptions::Strategy::Sample;
  else if (o.strategy == "beam") generation.strategy = tasks::GenerationOptions::Strategy::Beam;
  else SRU_CHECK(false, "srubench generate: unknown --strategy '", o.strategy, "' (greedy, sample or beam)");
  generation.beam.beam_size = o.beam;
  generation.beam.n_best = 1;

  std::optional<train::LoadedCheckpoint> ckpt;
  if (!o.checkpoint.empty())
    ckpt = train::read_checkpoint(o.checkpoint, o.config.empty() ? o.overrides : std::vector<std::string>{});
  const config::Config cfg = o.config.empty() ? ckpt->config : config::load_config(o.config, o.overrides);
  generation.sampling.seed = static_cast<uint64_t>(cfg.train.seed);
  Generator gen(static_cast<uint64_t>(cfg.train.seed));
  auto task = tasks::make_task(cfg, gen, {/*load_data=*/false, ckpt ? &ckpt->file : nullptr});
  tasks::Generates* generates = task->generation();
  SRU_CHECK(generates, "srubench generate: task ", cfg.task, " cannot generate text");
  if (ckpt) train::load_model(task->model(), ckpt->file, o.checkpoint);
  task->model().to(o.device);
  task->model().eval();
  const double params = static_cast<double>(task->model().num_parameters());

  for (int64_t B : o.batch)
    for (int64_t n : o.tokens) {
      generation.batch = B;
      generation.tokens = n;
      // The empty prompt: the task starts after a line end.
      const Timing t = time_on(o.device, [&] { generates->generate("", generation); }, o.timing);
      Row row{cfg.model.type, o.device.str(), {}};
      row.set("B", static_cast<double>(B)).set("tokens", static_cast<double>(n)).set("ms", t.median_ms);
      row.set("ms_per_token", t.median_ms / static_cast<double>(n));
      row.set("tokens_per_s", static_cast<double>(n * B) / (t.median_ms / 1000.0));
      row.set("params", params);
      if (generation.strategy == tasks::GenerationOptions::Strategy::Beam) row.set("beam", static_cast<double>(o.beam));
      report.add(row);
    }
}

}  // namespace sru::bench
