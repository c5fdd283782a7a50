#!/usr/bin/env bash
# Reproduces the Embed-SRU study's PTB table ("Recurrent Net Language Model using SRU": test perplexity of
# 2-layer, 650-unit word LMs: LSTM 81.9, SRU 86.0, Embed-SRU 90.0, Super-Embed-SRU 87.5) with
# configs/ptb/*.yaml, then converts the trained v1 SRU into Super-Embed-SRU form (srueval --convert
# super-embed) and evaluates both on the test split: the conversion is exact, so the perplexity must not move.
#
#   scripts/reproduce/ptb.sh [--scale paper|ci] [--out DIR] [--threads N] [--small] [--epochs N]
#                            [--models "lstm sru embed-sru super-embed-sru"] [--set KEY=VALUE ...]
#
# paper: the study's configs (39 epochs; data: scripts/get_data.sh ptb); --small takes the machine-scale
#        twins configs/ptb/small-*.yaml (2 x 200 units, 8 epochs) instead.
# ci:    the study's configs at 2 x 64 units, 3 epochs, on a generated corpus of a small stochastic grammar
#        (scripts/reproduce/make_data.py words: 60k training words, <unk> included): about a minute.
# Summaries: OUT/ptb/MODEL.json and OUT/ptb/sru-as-super-embed.json, whose metrics are the test perplexity
# after conversion and its relative change (test.ppl_change) (see scripts/reproduce/lib.sh).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
models="lstm sru embed-sru super-embed-sru" prefix="" epochs=""
repro_parse "$@"
set -- "${repro_args[@]+"${repro_args[@]}"}"
while [ $# -gt 0 ]; do
  case $1 in
    --small) prefix=small-; shift ;;
    --epochs) epochs=$2; shift 2 ;;
    *) echo "ptb.sh: unknown argument '$1'" >&2; exit 1 ;;
  esac
done

if [ "$scale" = ci ]; then
  words=$out/ptb-generated
  python3 scripts/reproduce/make_data.py words "$words"
  data=(--set "data.path=$words/train.txt" --set "data.valid_path=$words/valid.txt" --set "data.test_path=$words/test.txt"
        --set model.embedding_size=64 --set model.hidden_size=64 --set train.epochs=3 --set log.every_steps=50)
else
  repro_need data/ptb/ptb.train.txt "scripts/get_data.sh ptb"
  data=()
fi
[ -n "$epochs" ] && data+=(--set "train.epochs=$epochs")
for model in $models; do
  repro_run ptb "$model" "configs/ptb/$prefix$model.yaml" "${data[@]+"${data[@]}"}"
done

# The trained v1 SRU as Super-Embed-SRU: the same test perplexity (to float rounding).
dir=$out/ptb
if [ -f "$dir/sru/best.safetensors" ]; then
  conv=$dir/sru-as-super-embed
  mkdir -p "$conv"
  "$srueval" --checkpoint "$dir/sru/best.safetensors" --convert super-embed --out "$conv/model.safetensors" > /dev/null
  "$srueval" --checkpoint "$dir/sru/best.safetensors" --split test --json "$conv/before.test.json" > /dev/null
  "$srueval" --checkpoint "$conv/model.safetensors" --split test --json "$conv/after.test.json" > /dev/null
  python3 - "$dir" "$scale" <<'PY'
import json, os, sys
d, scale = sys.argv[1], sys.argv[2]
before = json.load(open(os.path.join(d, "sru-as-super-embed", "before.test.json")))["metrics"]["ppl"]
after = json.load(open(os.path.join(d, "sru-as-super-embed", "after.test.json")))["metrics"]["ppl"]
summary = json.load(open(os.path.join(d, "sru.json")))
summary.update({"run": "sru-as-super-embed", "metric": "ppl", "stopped": "converted from sru/best.safetensors to sru-as-super-embed/model.safetensors",
                "metrics": {"test.ppl": after, "test.ppl_before": before, "test.ppl_change": abs(after - before) / before},
                "parameters": None, "wall_time_s": None, "train_tokens_per_s": None, "seconds_per_epoch": None})
json.dump(summary, open(os.path.join(d, "sru-as-super-embed.json"), "w"), indent=2)
print("   ptb/sru-as-super-embed: test.ppl %.6f before, %.6f after (relative change %.2e)"
      % (before, after, abs(after - before) / before))
PY
fi
