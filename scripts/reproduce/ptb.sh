#!/usr/bin/env bash
# Reproduces the Embed-SRU study's PTB table ("Recurrent Net Language Model using SRU": test perplexity
# of 2-layer, 650-unit word LMs, LSTM 81.9, SRU 86.0, Embed-SRU 90.0, Super-Embed-SRU 87.5) with
# configs/ptb/*.yaml: trains the four models one after another, converts the trained SRU into
# Super-Embed-SRU form (srueval --convert super-embed, same perplexity), and writes the study's table
# with ours beside it (valid and test perplexity of the best epoch, seconds per epoch) to OUT/table.md.
#
#   scripts/reproduce/ptb.sh [--out DIR] [--small] [--models "lstm sru embed-sru super-embed-sru"]
#                            [--epochs N] [--threads N] [--set KEY=VALUE ...]
#
# --small trains the machine-scale twins (configs/ptb/small-*.yaml: 2 x 200 units, 8 epochs); the
# default is the study's scale (39 epochs: days on a CPU, hours on a GPU with --set train.device=cuda).
# Data: scripts/get_data.sh ptb [--mirror DIR]. Finished runs in OUT are reused, unfinished ones resumed.
# SRUTRAIN / SRUEVAL = other binaries than build/srutrain, build/srueval.
set -euo pipefail
cd "$(dirname "$0")/../.."

out="" small=0 models="lstm sru embed-sru super-embed-sru" epochs="" threads=0
extra=()
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2; shift 2 ;;
    --small) small=1; shift ;;
    --models) models=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --set) extra+=(--set "$2"); shift 2 ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "ptb.sh: unknown argument '$1'" >&2; exit 1 ;;
  esac
done
prefix=$([ $small = 1 ] && echo small- || true)
out=${out:-runs/ptb${prefix:+-small}}
srutrain=${SRUTRAIN:-build/srutrain} srueval=${SRUEVAL:-build/srueval}
[ -x "$srutrain" ] && [ -x "$srueval" ] || scripts/build.sh > /dev/null
[ -f data/ptb/ptb.train.txt ] || { echo "ptb.sh: no data: run scripts/get_data.sh ptb first" >&2; exit 1; }
mkdir -p "$out"

for model in $models; do
  config=configs/ptb/$prefix$model.yaml
  [ -f "$config" ] || { echo "ptb.sh: no config $config" >&2; exit 1; }
  args=(--set "train.threads=$threads")
  [ -n "$epochs" ] && args+=(--set "train.epochs=$epochs")
  dir=$out/$model
  if [ -f "$dir/summary.json" ]; then
    echo "== $model: done ($dir)"
  elif [ -f "$dir/config.yaml" ]; then
    echo "== $model: resuming $dir"
    "$srutrain" --resume "$dir"
  else
    echo "== $model: training into $dir"
    "$srutrain" --config "$config" --run-dir "$dir" "${args[@]}" "${extra[@]}"
  fi
done

# The trained v1 SRU as Super-Embed-SRU: evaluated on the test split before and after.
if [ -f "$out/sru/best.safetensors" ]; then
  [ -f "$out/sru-as-super-embed.safetensors" ] \
    || "$srueval" --checkpoint "$out/sru/best.safetensors" --convert super-embed --out "$out/sru-as-super-embed.safetensors"
  for c in sru/best sru-as-super-embed; do
    "$srueval" --checkpoint "$out/$c.safetensors" --split test --json "$out/$c.test.json" > /dev/null
  done
fi

python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
study = {"lstm": 81.9, "sru": 86.0, "embed-sru": 90.0, "super-embed-sru": 87.5}
names = {"lstm": "LSTM", "sru": "SRU", "embed-sru": "Embed-SRU", "super-embed-sru": "Super-Embed-SRU"}
rows = ["| model | study: test ppl (2 x 650, 39 epochs) | ours: valid ppl | ours: test ppl | epochs | units | "
        "s / epoch | parameters | device, threads |", "|---|---|---|---|---|---|---|---|---|"]
for m in study:
    summary = os.path.join(out, m, "summary.json")
    if not os.path.exists(summary):
        rows.append("| %s | %.1f | | | | | | | |" % (names[m], study[m]))
        continue
    s = json.load(open(summary))
    cfg = open(os.path.join(out, m, "config.yaml")).read()
    units = next(l.split(":")[1].strip() for l in cfg.splitlines() if l.strip().startswith("hidden_size:"))
    best = s.get("best", s["final"])
    rows.append("| %s | %.1f | %.2f | %.2f | %g | %s | %.0f | %d | %s, %d |" % (
        names[m], study[m], best["valid"]["ppl"], best["test"]["ppl"], s["epochs"], units, s["seconds_per_epoch"],
        s["parameters"], s["device"], s["threads"]))
table = "\n".join(rows) + "\n"
conv = [os.path.join(out, c + ".test.json") for c in ("sru/best", "sru-as-super-embed")]
if all(os.path.exists(p) for p in conv):
    a, b = (json.load(open(p))["metrics"]["ppl"] for p in conv)
    table += "\nThe trained SRU converted to Super-Embed-SRU (srueval --convert super-embed): test ppl %.10g before, " \
             "%.10g after (relative difference %.1e).\n" % (a, b, abs(a - b) / a)
open(os.path.join(out, "table.md"), "w").write(table)
print(table)
PY
echo "table: $out/table.md"
