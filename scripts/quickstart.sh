#!/usr/bin/env bash
# The main job at small scale, from a fresh clone: install the build packages, build what it runs
# (srutrain and srueval, CPU only, into build-quickstart/: no tests, no CUDA sources), train a 2-layer
# SRU character language model on the shipped 1 MB enwik8 sample (configs/quickstart.yaml, about two
# minutes on 2 CPU cores), then evaluate the best checkpoint on the test split with srueval and sample
# a line of text from it. Extra arguments go to srutrain (e.g. --set train.epochs=1). Everything else
# (the tests, srubench, the CUDA backend): scripts/build.sh, or scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build_dir=build-quickstart
BUILD_DIR=$build_dir SRU_TARGETS="srutrain srueval" scripts/build.sh -DSRU_CUDA=OFF -DSRU_BUILD_TESTS=OFF
run_dir=runs/quickstart-$(date +%Y%m%d-%H%M%S)
"./$build_dir/srutrain" --config configs/quickstart.yaml --run-dir "$run_dir" "$@"
echo "== srueval on the best checkpoint"
"./$build_dir/srueval" --checkpoint "$run_dir/best.safetensors" --split test --json "$run_dir/test.json" \
  --generate 200 --prompt "The " --temperature 0.8
echo "== run directory: $run_dir (summary.json, metrics.jsonl, checkpoints)"
