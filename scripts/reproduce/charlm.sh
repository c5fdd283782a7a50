#!/usr/bin/env bash
# Reproduces the paper's enwik8 character-LM comparison (Lei et al. 2018, Table 4: SRU vs LSTM, bits per
# character on the test split) with configs/enwik8.yaml and configs/enwik8-lstm.yaml.
#
#   scripts/reproduce/charlm.sh [--scale paper|ci] [--out DIR] [--threads N] [--models "sru lstm"] [--set KEY=VALUE ...]
#
# paper: the configs as they are, on the full enwik8 (scripts/get_data.sh enwik8; days on a CPU, a GPU
#        run adds --set train.device=cuda).
# ci:    the same configs made small with --set (2 layers of 128, 900 steps at a cosine rate from 0.01, no
#        noam warm-up of 8000 steps) on the shipped 1 MB sample data/enwik8-sample: about a minute on 2
#        cores. (At 300 steps the LSTM stayed at 4.0 test BPC, worse than a bigram count table's 3.88.)
# Summaries: OUT/charlm/{sru,lstm}.json (see scripts/reproduce/lib.sh for the common options).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
models="sru lstm"
repro_parse "$@"
repro_refuse_rest

if [ "$scale" = ci ]; then
  data=(--set data.path=data/enwik8-sample/enwik8.head1M --set data.batch_size=32 --set data.bptt=64
        --set model.embedding_size=64 --set model.hidden_size=128 --set model.num_layers=2 --set model.dropout=0.1
        --set train.schedule=cosine --set train.lr=0.01 --set train.warmup_steps=20 --set train.epochs=3
        --set train.max_steps=900 --set eval.every_steps=0 --set eval.max_batches=40 --set log.every_steps=50)
else
  repro_need data/enwik8/enwik8 "scripts/get_data.sh enwik8"
  data=()
fi
for model in $models; do
  config=configs/enwik8$([ "$model" = sru ] || echo "-$model").yaml
  repro_run charlm "$model" "$config" "${data[@]+"${data[@]}"}"
done
