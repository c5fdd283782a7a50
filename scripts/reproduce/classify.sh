#!/usr/bin/env bash
# Reproduces the paper's Table 1 (sentence classification) with configs/classify/*.yaml: SRU and LSTM on
# MR, SUBJ, CR, MPQA (10-fold cross-validation), TREC and SST-2 (their own splits); the summaries hold
# the test accuracy of the best epoch on validation (mean and std over folds) and the time per epoch.
#
#   scripts/reproduce/classify.sh [--scale paper|ci] [--out DIR] [--threads N] [--sets "mr subj cr mpqa trec sst2"]
#                                 [--models "sru lstm"] [--epochs N] [--run-folds N] [--set KEY=VALUE ...]
#
# paper: the reference classifier's protocol (100 epochs, all 10 folds, fixed unit-norm embeddings: see
#        the configs; data: scripts/get_data.sh classify). --epochs and --run-folds shorten it (the
#        summary says which protocol ran); --set data.vectors=FILE adds the paper's word2vec vectors.
# ci:    the MR configs (cross-validation, 2 of 10 folds run, 8 epochs, embedding and hidden 32, the
#        trained-embedding variant) on 1,200 generated sentences (scripts/reproduce/make_data.py
#        classify): about a minute on 2 cores.
# Summaries: OUT/classify/NAME.json, NAME = set, or set-lstm (see scripts/reproduce/lib.sh).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
sets="mr subj cr mpqa trec sst2" models="sru lstm" epochs="" run_folds=""
repro_parse "$@"
set -- "${repro_args[@]+"${repro_args[@]}"}"
while [ $# -gt 0 ]; do
  case $1 in
    --sets) sets=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --run-folds) run_folds=$2; shift 2 ;;
    *) echo "classify.sh: unknown argument '$1'" >&2; exit 1 ;;
  esac
done

if [ "$scale" = ci ]; then
  sets=mr
  python3 scripts/reproduce/make_data.py classify "$out/classify-generated.txt"
  data=(--set "data.path=$out/classify-generated.txt" --set data.run_folds=2 --set train.epochs=8
        --set model.embedding_size=32 --set model.hidden_size=32 --set train.lr=0.005 --set log.every_steps=20
        --set model.freeze_embedding=false --set data.normalize_embeddings=false --set data.tokenizer=whitespace
        --set data.vocab_from=train --set data.batching=bucketed)  # trained embeddings: 32-d random fixed ones learn little
else
  repro_need data/sentclass/rt-polarity.all "scripts/get_data.sh classify"
  data=()
fi
for set in $sets; do
  for model in $models; do
    name=$set$([ "$model" = sru ] || echo "-$model")
    config=configs/classify/$name.yaml
    args=()
    [ -n "$epochs" ] && args+=(--set "train.epochs=$epochs")
    [ -n "$run_folds" ] && grep -q "^  fold: -1" "$config" && args+=(--set "data.run_folds=$run_folds")
    repro_run classify "$name" "$config" "${data[@]+"${data[@]}"}" "${args[@]+"${args[@]}"}"
  done
done
