#!/usr/bin/env bash
# The main job at small scale, from a fresh clone: install the build packages, build, then train a
# character language model on the shipped 1 MB enwik8 sample (data/enwik8-sample) for about a
# minute on the CPU, printing the loss (bits per character) as it falls and the final valid/test BPC.
# Until the SRU char-LM lands, the model is srudemo's n-gram MLP (see README.md, "Status").
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
./build/srutrain --device-info
./build/srudemo --data data/enwik8-sample/enwik8.head1M --seconds "${QUICKSTART_SECONDS:-60}" --steps 100000 \
  --eval-every 1000
