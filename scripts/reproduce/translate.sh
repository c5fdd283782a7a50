#!/usr/bin/env bash
# Reproduces the SRU paper's Table 3 (Lei et al. 2018, section 4.3): a Transformer whose feed-forward
# sublayers are SRUs (W SRU(x) + b) against the Transformer base, English->German, BLEU as sacreBLEU.
#
#   scripts/reproduce/translate.sh [--scale paper|ci] [--out DIR] [--threads N] [--models "base sru-4 sru-5"]
#                                  [--multi30k] [--set KEY=VALUE ...]
#
# paper:      configs/translate/wmt-{base,sru-4,sru-5}.yaml (WMT English->German, shared 32k pieces, 40
#             epochs: a GPU job; the WMT files are named in the configs, not fetched).
# --multi30k: the machine-scale configs/translate/multi30k-{base,sru-4,sru-5}.yaml instead (Multi30k
#             English->German from scripts/get_data.sh multi30k; about an hour each on 2 cores), then each
#             best checkpoint translates test_2016_flickr with beam 5 (srueval --translate) and
#             bleu-score scores it: OUT/translate/MODEL/test.beam.json (summaries marked scale machine).
# ci:         the Multi30k configs made small with --set (d 64, base 3 + 3 layers against SRU 2 + 2, 130
#             pieces, 12 epochs) on generated sentence pairs with rules to learn (make_data.py parallel:
#             6,000 training pairs, unseen test sentences): a few minutes on 2 cores.
# Summaries: OUT/translate/MODEL.json (see scripts/reproduce/lib.sh).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
models=${models:-"base sru-4 sru-5"}
repro_parse "$@"
prefix=wmt
set -- "${repro_args[@]+"${repro_args[@]}"}"
while [ $# -gt 0 ]; do
  case $1 in
    --multi30k) prefix=multi30k; shift ;;
    *) echo "translate.sh: unknown argument '$1'" >&2; exit 1 ;;
  esac
done

# Multi30k runs are this project's machine scale: their summaries say so (results/machine/).
[ $prefix = multi30k ] && [ "$scale" = paper ] && scale=machine
test_source="" test_target=""
if [ "$scale" = ci ]; then
  pairs=$out/translate-generated
  python3 scripts/reproduce/make_data.py parallel "$pairs"
  prefix=multi30k
  [ "$models" = "base sru-4 sru-5" ] && models="base sru-4"
  data=(--set "data.path=$pairs/train.en" --set "data.target_path=$pairs/train.de"
        --set "data.valid_source=$pairs/valid.en" --set "data.valid_target=$pairs/valid.de"
        --set "data.test_source=$pairs/test.en" --set "data.test_target=$pairs/test.de"
        --set data.vocab_size=130 --set data.max_tokens=1024 --set model.embedding_size=64
        --set model.hidden_size=64 --set model.ff_size=128 --set model.num_heads=4 --set model.dropout=0.1
        --set train.lr=0.5 --set train.warmup_steps=300 --set train.epochs=12 --set eval.every_steps=0
        --set log.every_steps=50)
  test_source=$pairs/test.en test_target=$pairs/test.de
else
  if [ "$scale" = machine ]; then
    repro_need data/multi30k/train.en.gz "scripts/get_data.sh multi30k"
    test_source=data/multi30k/test_2016_flickr.en.gz test_target=data/multi30k/test_2016_flickr.de.gz
  fi
  data=()
fi
for model in $models; do
  layers=()
  # ci: the paper's ratio of depths at a small size (base 6 -> 3, SRU 4 -> 2, SRU 5 -> 3 layers).
  if [ "$scale" = ci ]; then
    case $model in base|sru-5) layers=(--set model.num_layers=3) ;; sru-4) layers=(--set model.num_layers=2) ;; esac
  fi
  repro_run translate "$model" "configs/translate/$prefix-$model.yaml" "${data[@]+"${data[@]}"}" \
    "${layers[@]+"${layers[@]}"}"
  # The test sentences translated with beam search (the checkpoint's beam 5, length penalty 0.6) and
  # scored as sacreBLEU: test.beam_bleu and test.beam_bleu_lc join the run's summary.
  dir=$out/translate/$model
  if [ -n "$test_source" ] && [ -f "$dir/best.safetensors" ]; then
    "$srueval" --checkpoint "$dir/best.safetensors" --translate "$test_source" > "$dir/test.hyp" 2> "$dir/translate.log"
    "$srueval" bleu-score --hyp "$dir/test.hyp" --ref "$test_target" > "$dir/test.beam.json"
    python3 - "$dir.json" "$dir/test.beam.json" "$dir/translate.log" <<'PY'
import json, re, sys
summary_path, bleu_path, log_path = sys.argv[1:4]
summary, bleu = json.load(open(summary_path)), json.load(open(bleu_path))
speed = re.search(r"([0-9.]+) sentences/s, ([0-9.]+) target tokens/s", open(log_path).read())
summary["metrics"]["test.beam_bleu"] = bleu["cased"]["score"]
summary["metrics"]["test.beam_bleu_lc"] = bleu["lowercased"]["score"]
summary["beam_sentences_per_s"] = float(speed.group(1)) if speed else None
summary["beam_target_tokens_per_s"] = float(speed.group(2)) if speed else None
json.dump(summary, open(summary_path, "w"), indent=2)
print("   translate/%s: test BLEU %.2f (beam 5), %.1f sentences/s" % (summary["run"], summary["metrics"]["test.beam_bleu"],
      summary["beam_sentences_per_s"] or 0))
PY
  fi
done
