#!/usr/bin/env bash
# The MR ablations of docs/results.md (classification issue): which difference between the reference
# classifier's protocol and other settings moves the SRU-LSTM gap. Every setting trains the SRU and the
# LSTM of configs/classify/mr{,-lstm}.yaml with one change (settings marked "SRU only" change nothing in
# an LSTM, whose row is then the base one), then prints one table: test accuracy per fold, mean, the gap
# LSTM - SRU and its change from the base setting.
#
#   scripts/reproduce/classify_ablations.sh [--scale paper|ci] [--out DIR] [--threads N] [--set KEY=VALUE ...]
#                                           [--settings "base whitespace ..."] [--epochs N] [--run-folds N]
#
# Settings: base (the configs as shipped), whitespace (data.tokenizer=whitespace), tanh (model.use_tanh,
# SRU only), dropout0.2 and dropout0 (all three dropouts), layers4 (4 SRU layers, SRU only: about the
# 2-layer LSTM's parameter count), trained (embeddings trained and not normalised, the earlier configs'),
# trained-dropout0.2 (both).
# paper: MR (scripts/get_data.sh classify), folds 0-2 (--run-folds, default 3), 10 epochs (--epochs).
# ci:    classify.sh's ci data and sizes (generated sentences, 2 folds, 8 epochs): a smoke test of the script.
# Runs: OUT/ablations/SETTING/classify/mr{,-lstm}/ (classify.sh layout; finished runs are reused).
set -euo pipefail
cd "$(dirname "$0")/../.."
all_settings="base whitespace tanh dropout0.2 dropout0 layers4 trained trained-dropout0.2"
scale=paper out="" settings=$all_settings epochs=10 run_folds=3
pass=()
while [ $# -gt 0 ]; do
  case $1 in
    --scale) scale=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --settings) settings=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --run-folds) run_folds=$2; shift 2 ;;
    --threads|--set) pass+=("$1" "$2"); shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "classify_ablations.sh: unknown argument '$1'" >&2; exit 1 ;;
  esac
done
out=${out:-runs/reproduce-$scale}
[ "$scale" = ci ] || pass+=(--epochs "$epochs" --run-folds "$run_folds")

dropout() { echo "--set model.dropout=$1 --set model.embedding_dropout=$1 --set model.output_dropout=$1"; }
trained="--set model.freeze_embedding=false --set data.normalize_embeddings=false"
for setting in $settings; do
  models="sru lstm"
  case $setting in
    base) change=() ;;
    whitespace) change=(--set data.tokenizer=whitespace) ;;
    tanh) models=sru change=(--set model.use_tanh=true) ;;
    dropout0.2) change=($(dropout 0.2)) ;;
    dropout0) change=($(dropout 0)) ;;
    layers4) models=sru change=(--set model.num_layers=4) ;;
    trained) change=($trained) ;;
    trained-dropout0.2) change=($trained $(dropout 0.2)) ;;
    *) echo "classify_ablations.sh: unknown setting '$setting' (choices: $all_settings)" >&2; exit 1 ;;
  esac
  echo "== ablation $setting: ${change[*]:-the configs as shipped}"
  scripts/reproduce/classify.sh --scale "$scale" --out "$out/ablations/$setting" --sets mr --models "$models" \
    "${pass[@]+"${pass[@]}"}" "${change[@]+"${change[@]}"}"
done

python3 - "$out/ablations" $settings <<'PY'
import json, os, statistics, sys
root, settings = sys.argv[1], sys.argv[2:]

def folds(setting, run):
    path = os.path.join(root, setting, "classify", run, "cv_summary.json")
    if not os.path.exists(path):
        return None
    return [100 * f["test_accuracy"] for f in json.load(open(path))["per_fold"]]

def cell(accs):
    return "%.2f (%s)" % (statistics.mean(accs), " / ".join("%.2f" % a for a in accs))

print("| setting | SRU test % (mean; folds) | LSTM test % | LSTM - SRU | change of the gap |")
print("|---|---|---|---|---|")
base_gap = None
for setting in settings:
    sru, lstm = folds(setting, "mr"), folds(setting, "mr-lstm")
    lstm_note = ""
    if lstm is None:
        lstm, lstm_note = folds("base", "mr-lstm"), " (base: the change is SRU only)"
    if sru is None or lstm is None:
        sys.exit("classify_ablations.sh: missing runs for setting %s under %s" % (setting, root))
    gap = statistics.mean(lstm) - statistics.mean(sru)
    if setting == "base":
        base_gap = gap
    change = "" if base_gap is None or setting == "base" else "%+.2f" % (gap - base_gap)
    print("| %s | %s | %s%s | %+.2f | %s |" % (setting, cell(sru), cell(lstm), lstm_note, gap, change))
PY
