#!/usr/bin/env bash
# Reproduces the paper's SQuAD table (Lei et al. 2018, Table 2: the Document Reader with bidirectional SRUs
# against DrQA's bidirectional LSTMs, exact match and F1 on dev-v1.1) with configs/squad.yaml and
# configs/squad-lstm.yaml.
#
#   scripts/reproduce/squad.sh [--scale paper|ci] [--out DIR] [--threads N] [--models "sru lstm"] [--set KEY=VALUE ...]
#
# paper: the configs as they are: full train-v1.1, GloVe 840B (data: scripts/get_data.sh squad, and the
#        vectors at data/glove/glove.840B.300d.zip), 100 epochs: a GPU job (--set train.device=cuda).
# ci:    the same configs on the shipped 2-article dev sample (data/squad-sample, 336 questions), trained
#        and evaluated on it, embeddings learned (no vectors), 2 layers of 32, 20 epochs: this checks that
#        the whole reader learns (fits its training questions), not how well it generalises; ~2 minutes.
# Summaries: OUT/squad/{sru,lstm}.json with valid.exact_match and valid.f1 (see scripts/reproduce/lib.sh).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
models="sru lstm"
repro_parse "$@"
repro_refuse_rest

if [ "$scale" = ci ]; then
  sample=data/squad-sample/dev-v1.1.sample.json
  data=(--set "data.path=$sample" --set "data.valid_path=$sample" --set data.vectors= --set data.lowercase=true
        --set data.batch_size=16 --set model.embedding_size=32 --set model.hidden_size=32 --set model.num_layers=2
        --set model.embedding_dropout=0.1 --set train.lr=0.005 --set train.epochs=20 --set log.every_steps=20)
else
  repro_need data/squad/train-v1.1.json "scripts/get_data.sh squad"
  repro_need data/glove/glove.840B.300d.zip "a download of GloVe 840B (https://nlp.stanford.edu/data/glove.840B.300d.zip) to"
  data=()
fi
for model in $models; do
  config=configs/squad$([ "$model" = sru ] || echo "-$model").yaml
  repro_run squad "$model" "$config" "${data[@]+"${data[@]}"}"
done
