#!/usr/bin/env bash
# Installs the Debian packages srutrain needs to build and test, only those missing, and says what it does.
# Arguments name further packages a script needs (scripts/sanitize.sh and scripts/fuzz.sh: clang,
# libomp-dev and the sanitizer and libFuzzer runtimes). Idempotent: a second run installs nothing. CUDA is not installed here (it lives in /usr/local/cuda
# when present); the build compiles CUDA sources only when nvcc is found.
set -euo pipefail

packages=(
  cmake ninja-build g++ pkg-config git python3 python3-pip
  libopenblas-openmp-dev
  libcli11-dev libspdlog-dev libyaml-cpp-dev libsentencepiece-dev
  libgtest-dev nlohmann-json3-dev zlib1g-dev
  libopenmpi-dev openmpi-bin iproute2
  "$@"
)

missing=()
for p in "${packages[@]}"; do
  if [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" != "install ok installed" ]; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} build packages already installed"
  exit 0
fi

echo "setup: installing missing packages: ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo_cmd=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
echo "setup: done"
