#!/usr/bin/env bash
# Reproduces the paper's Table 1 (sentence classification) with configs/classify/*.yaml: trains SRU
# and LSTM on MR, SUBJ, CR, MPQA (10-fold cross-validation), TREC and SST-2, then writes a table of
# test accuracy (best epoch on validation) and training time per epoch to OUT/table.md.
#
#   scripts/reproduce/classify.sh [--out DIR] [--sets "mr subj cr mpqa trec sst2"] [--models "sru lstm"]
#                                 [--epochs N] [--sst2-epochs N] [--run-folds N] [--threads N] [--set KEY=VALUE ...]
#
# Defaults are the reference classifier's protocol (100 epochs, all 10 folds, fixed unit-norm
# embeddings: see the configs). --epochs/--run-folds shorten it for quick estimates (the table says
# which protocol it used); --set passes any config override, e.g. the paper's word2vec vectors:
# --set data.vectors=GoogleNews-vectors-negative300.bin.
# Data: scripts/get_data.sh classify [--mirror DIR]. Finished runs in OUT are reused (resume).
# SRUTRAIN=path/to/srutrain runs another binary than build/srutrain.
set -euo pipefail
cd "$(dirname "$0")/../.."

out=runs/classify sets="mr subj cr mpqa trec sst2" models="sru lstm" epochs="" sst2_epochs="" run_folds="" threads=0
extra=()
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2; shift 2 ;;
    --sets) sets=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --sst2-epochs) sst2_epochs=$2; shift 2 ;;
    --run-folds) run_folds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --set) extra+=(--set "$2"); shift 2 ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "classify.sh: unknown argument '$1'" >&2; exit 1 ;;
  esac
done
srutrain=${SRUTRAIN:-build/srutrain}
[ -x "$srutrain" ] || scripts/build.sh > /dev/null
[ -f data/sentclass/rt-polarity.all ] || { echo "classify.sh: no data: run scripts/get_data.sh classify first" >&2; exit 1; }
mkdir -p "$out"

for set in $sets; do
  for model in $models; do
    name=$set$([ "$model" = sru ] || echo "-$model")
    config=configs/classify/$name.yaml
    [ -f "$config" ] || { echo "classify.sh: no config $config" >&2; exit 1; }
    args=(--set "train.threads=$threads")
    e=$epochs
    [ "$set" = sst2 ] && [ -n "$sst2_epochs" ] && e=$sst2_epochs
    [ -n "$e" ] && args+=(--set "train.epochs=$e")
    [ -n "$run_folds" ] && grep -q "^  fold: -1" "$config" && args+=(--set "data.run_folds=$run_folds")
    dir=$out/$name
    if [ -f "$dir/cv_summary.json" ] || [ -f "$dir/summary.json" ]; then
      echo "== $name: done ($dir)"
    elif [ -f "$dir/config.yaml" ]; then
      echo "== $name: resuming $dir"
      "$srutrain" --resume "$dir"
    else
      echo "== $name: training into $dir"
      "$srutrain" --config "$config" --run-dir "$dir" "${args[@]}" "${extra[@]}"
    fi
  done
done

python3 - "$out" $sets <<'PY'
import json, os, sys
out, sets = sys.argv[1], sys.argv[2:]
rows = ["| data set | model | test accuracy (%) | protocol | epochs | s / epoch | parameters | embeddings |",
        "|---|---|---|---|---|---|---|---|"]
for s in sets:
    for model in ("sru", "lstm"):
        d = os.path.join(out, s + ("" if model == "sru" else "-" + model))
        cfg_path = os.path.join(d, "config.yaml")
        if not os.path.exists(cfg_path):
            continue
        cfg = open(cfg_path).read()
        vectors = next((l.split(":", 1)[1].strip().strip('"') for l in cfg.splitlines() if l.strip().startswith("vectors:")), "")
        frozen = "freeze_embedding: true" in cfg
        emb = (os.path.basename(vectors) if vectors else "random") + (", fixed" if frozen else ", trained")
        cv = os.path.join(d, "cv_summary.json")
        if os.path.exists(cv):
            j = json.load(open(cv))
            acc = "%.2f ± %.2f" % (100 * j["test_accuracy_mean"], 100 * j["test_accuracy_std"])
            proto = "%d of %d folds" % (j["folds_run"], j["folds"])
            first = json.load(open(os.path.join(d, "fold-0", "summary.json")))
            epochs, spe = first["epochs"], j["seconds_per_epoch_mean"]
        elif os.path.exists(os.path.join(d, "summary.json")):
            first = json.load(open(os.path.join(d, "summary.json")))
            acc = "%.2f" % (100 * first["best"]["test"]["accuracy"])
            proto = "train/test split"
            epochs, spe = first["epochs"], first["seconds_per_epoch"]
        else:
            continue
        rows.append("| %s | %s | %s | %s | %g | %.1f | %d | %s |" % (s.upper(), model.upper(), acc, proto, epochs, spe,
                                                                  first["parameters"], emb))
table = "\n".join(rows) + "\n"
open(os.path.join(out, "table.md"), "w").write(table)
print(table)
PY
echo "table: $out/table.md"
