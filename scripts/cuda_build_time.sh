#!/usr/bin/env bash
# Times the CUDA objects' build for lists of GPU architectures (docs/results.md, "Build time of the CUDA
# architectures"): for each argument, a fresh build directory configured with it (DEFAULT: the project's
# default list, cmake/Cuda.cmake), then ninja on the .cu objects alone, so the C++ part is left out.
#   scripts/cuda_build_time.sh "80;90" DEFAULT       (run it on a quiet machine)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || { sed -n '2,5p' "$0"; exit 1; }
for archs in "$@"; do
  dir=$(mktemp -d /tmp/sru-cuda-time.XXXXXX)
  if [ "$archs" = DEFAULT ]; then cmake -S . -B "$dir" -G Ninja -DSRU_MPI=OFF -DSRU_CUDA=ON > "$dir.cmake.log"
  else cmake -S . -B "$dir" -G Ninja -DSRU_MPI=OFF -DSRU_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$archs" > "$dir.cmake.log"; fi
  used=$(grep -o 'archs [^,]*' "$dir.cmake.log" | head -1)
  mapfile -t objs < <(ninja -C "$dir" -t targets all | grep -o '^[^:]*\.cu\.o' | sort -u)
  start=$(date +%s.%N)
  ninja -C "$dir" "${objs[@]}" > "$dir.log" 2>&1 || { tail "$dir.log"; exit 1; }
  end=$(date +%s.%N)
  bytes=$(find "$dir" -name '*.cu.o' -printf '%s\n' | awk '{s += $1} END {print s}')
  python3 -c "print('$archs ($used): ${#objs[@]} CUDA objects, %.1f s, %.1f MB' % ($end - $start, $bytes / 1e6))"
  rm -rf "$dir" "$dir.log" "$dir.cmake.log"
done
