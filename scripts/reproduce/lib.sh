# Shared by the scripts in scripts/reproduce/ (sourced, not run): the common options, one training run
# per (experiment, model) with reuse/resume, and its JSON summary.
#
# Common options of every reproduction script:
#   --scale paper|ci   paper (default): the paper's configuration, full data, for a GPU;
#                      ci: the same configs and code path on small shipped or generated data, minutes on 2 cores
#   --out DIR          where runs and summaries go (default runs/reproduce-SCALE)
#   --threads N        train.threads (0 = all cores)
#   --set KEY=VALUE    any config override, given to every run (repeatable)
#   --models "A B"     which of the script's models to run (the script sets the default in $models)
# Each run writes OUT/EXPERIMENT/RUN/ (the run directory) and OUT/EXPERIMENT/RUN.json (the summary of
# scripts/reproduce/summarize.py: metrics, wall time, throughput, config hash, commit, machine).
# SRUTRAIN / SRUEVAL choose other binaries than build/srutrain, build/srueval.

repro_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repro_root"
scale=paper out="" threads=0
repro_extra=() repro_args=()

# Parses the common options; the script's own options are left in repro_args, in order.
repro_parse() {
  while [ $# -gt 0 ]; do
    case $1 in
      --scale) scale=$2; shift 2 ;;
      --out) out=$2; shift 2 ;;
      --threads) threads=$2; shift 2 ;;
      --set) repro_extra+=(--set "$2"); shift 2 ;;
      --models) models=$2; shift 2 ;;
      -h|--help) sed -n '2,/^set -euo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit 0 ;;
      *) repro_args+=("$1"); shift ;;
    esac
  done
  case $scale in
    paper|ci) ;;
    *) echo "$(basename "$0"): --scale must be paper or ci, not '$scale'" >&2; exit 1 ;;
  esac
  out=${out:-runs/reproduce-$scale}
  srutrain=${SRUTRAIN:-build/srutrain} srueval=${SRUEVAL:-build/srueval}
  if [ ! -x "$srutrain" ] || [ ! -x "$srueval" ]; then scripts/build.sh > /dev/null; fi
  mkdir -p "$out"
}

# Refuses what repro_parse left over, for scripts with no options of their own.
repro_refuse_rest() {
  if [ ${#repro_args[@]} -gt 0 ]; then echo "$(basename "$0"): unknown argument '${repro_args[0]}'" >&2; exit 1; fi
}

# Says which data file is missing and how to get it, and stops.
repro_need() {  # FILE HOW
  [ -e "$1" ] || { echo "$(basename "$0"): no $1: run $2 first" >&2; exit 1; }
}

# repro_run EXPERIMENT RUN CONFIG [--set KEY=VALUE ...]: trains CONFIG into OUT/EXPERIMENT/RUN (a finished
# run is reused, an unfinished one resumed) and writes OUT/EXPERIMENT/RUN.json.
repro_run() {
  local experiment=$1 run=$2 config=$3
  shift 3
  local dir=$out/$experiment/$run
  [ -f "$config" ] || { echo "$(basename "$0"): no config $config" >&2; exit 1; }
  mkdir -p "$out/$experiment"
  if [ -f "$dir/summary.json" ] || [ -f "$dir/cv_summary.json" ]; then
    echo "== $experiment/$run: done ($dir)"
  elif [ -f "$dir/config.yaml" ]; then
    echo "== $experiment/$run: resuming $dir"
    "$srutrain" --resume "$dir" >> "$dir.log" 2>&1 || { tail -n 20 "$dir.log" >&2; exit 1; }
  else
    echo "== $experiment/$run: training $config into $dir (log $dir.log)"
    "$srutrain" --config "$config" --run-dir "$dir" --set "train.threads=$threads" --set log.progress=false \
      "$@" "${repro_extra[@]}" > "$dir.log" 2>&1 || { tail -n 20 "$dir.log" >&2; exit 1; }
  fi
  python3 scripts/reproduce/summarize.py "$dir" --experiment "$experiment" --run "$run" --scale "$scale" \
    --config "$config" --out "$dir.json" -- "$@" "${repro_extra[@]}"
}
