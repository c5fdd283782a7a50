// `srubench generate`: text generation speed of a language model through its task's generation
// capability (tasks::Generates, on the search layer): for each (batch, tokens) case, the median wall
// time of one generate call from the empty prompt, per token and in tokens per second.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "core/device.h"

namespace sru::bench {

struct GenerateBenchOptions {
  std::string config;                  // an experiment config (a task that generates: charlm, wordlm)
  std::vector<std::string> overrides;  // KEY=VALUE, as srutrain --set
  // Weights from this checkpoint ("" = the config's random initialisation, which times the same). Without
  // `config`, the checkpoint's stored config (with `overrides`) builds the task.
  std::string checkpoint;
  std::vector<int64_t> tokens = {100, 1000, 4000};  // tokens generated per call
  std::vector<int64_t> batch = {1, 32};             // continuations decoded together
  std::string strategy = "greedy";                  // greedy, sample or beam
  int64_t beam = 4;                                 // beam size of the beam strategy
  TimingOptions timing{1, 3};
  Device device;
};

// The strategies `strategy` accepts.
const std::vector<std::string>& generate_strategy_names();

// One row per (batch, tokens), batch outermost: impl = the config's model.type, device, B, tokens, ms
// (median of one generate call), ms_per_token, tokens_per_s (tokens * B per second), params; beam
// search rows also give the beam size.
void bench_generate(Report& report, const GenerateBenchOptions& options);

}  // namespace sru::bench
