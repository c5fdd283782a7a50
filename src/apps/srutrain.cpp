// srutrain: trains a model from a YAML experiment config (or continues a run with --resume).
#include <iostream>

#include <CLI/CLI.hpp>

#include "apps/common.h"
#include "config/config.h"
#include "core/error.h"
#include "core/parallel.h"
#include "dist/communicator.h"
#include "train/trainer.h"

int main(int argc, char** argv) {
  CLI::App cli{"srutrain: train an SRU (or LSTM baseline) model from a YAML experiment config.\n"
               "Writes a run directory: config.yaml (resolved), metrics.jsonl, last.safetensors, best.safetensors,\n"
               "summary.json. Ctrl-C saves a checkpoint and exits (status 130); --resume DIR continues exactly.\n"
               "Data parallel: mpirun -np N srutrain --config X.yaml (data.batch_size stays the global batch)."};
  cli.set_version_flag("--version", sru::apps::version_line("srutrain"));
  sru::apps::add_debug_flag(cli);
  sru::train::RunOptions options;
  bool print_config = false, list_keys = false, device_info = false;
  cli.add_option("--config,-c", options.config_path, "Experiment config (YAML), e.g. configs/quickstart.yaml")
      ->check(CLI::ExistingFile);
  cli.add_option("--set", options.overrides, "Override a config key, repeatable: --set train.lr=3e-4 --set data.bptt=64")
      ->allow_extra_args(false);
  cli.add_option("--run-dir", options.run_dir, "Run directory (default runs/<config name>-<date>-<time>)");
  std::string resume_dir;
  cli.add_option("--resume", resume_dir, "Continue the run in this directory from its last.safetensors "
                 "(config from its config.yaml; --set may change e.g. train.max_steps)");
  cli.add_flag("--print-config", print_config, "Print the resolved config (defaults + file + --set) and exit");
  cli.add_flag("--list-keys", list_keys, "Print every config key of every task and encoder with its default, limits "
               "and meaning (Markdown)");
  cli.add_flag("--device-info", device_info, "Print the CPU thread count, the CUDA devices, MPI/NCCL support and, under "
               "mpirun or srun, every process's device, then exit");
  CLI11_PARSE(cli, argc, argv);

  return sru::apps::run_main("srutrain", [&] {
    if (device_info) {
      // Every rank's device, as train.device auto would pick it (one process per GPU), and where it runs.
      sru::dist::Communicator& comm = sru::dist::world();
      std::string mine;
      try {
        mine = sru::train::resolve_train_device("auto", comm).str();
      } catch (const sru::Error& e) {
        mine = std::string("no device: ") + e.what();
      }
      mine += " on " + comm.host() + " (local rank " + std::to_string(comm.local_rank()) + " of " +
              std::to_string(comm.local_size()) + ")";
      const std::vector<std::string> ranks = comm.all_gather(mine, "the ranks' devices");
      if (comm.is_root()) {
        std::cout << sru::apps::device_summary() << "World: " << comm.size()
                  << (comm.size() == 1 ? " process" : " processes") << ", backend " << comm.backend() << "\n";
        for (size_t r = 0; r < ranks.size(); ++r) std::cout << "rank " << r << ": " << ranks[r] << "\n";
      }
      return 0;
    }
    if (list_keys) {
      std::cout << sru::config::reference();
      return 0;
    }
    if (!resume_dir.empty()) {
      SRU_CHECK(options.config_path.empty(), "--resume takes the config from the run directory; drop --config");
      SRU_CHECK(options.run_dir.empty() || options.run_dir == resume_dir, "--resume and --run-dir name different directories");
      options.resume = true;
      options.run_dir = resume_dir;
    } else {
      SRU_CHECK(!options.config_path.empty(), "no config given: srutrain --config FILE (see srutrain --help)");
    }
    if (print_config) {
      std::cout << sru::train::resolve_config(options).to_yaml();
      return 0;
    }
    return sru::train::train(options);
  });
}
