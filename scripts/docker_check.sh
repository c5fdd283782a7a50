#!/usr/bin/env bash
# Builds the CPU image of the Dockerfile (VARIANT=cpu, on debian:12) and runs `srutrain --help` and the
# quickstart inside it, on machines with no Docker daemon and no registry: the debian:12 base image is
# made locally with debootstrap and imported into buildah (vfs storage, chroot isolation), then
# `buildah bud --pull-never` builds FROM it. Debian's package mirror must be reachable. Takes minutes
# (debootstrap, the packages, a full Release build, the quickstart). CI runs it when SRU_DOCKER_CHECK=1.
# Usage: scripts/docker_check.sh [--keep] [-- srutrain args for the quickstart run]
#   --keep: leave the built image (srutrain:cpu) and the cached base (in $SRU_DOCKER_CACHE) behind.
set -euo pipefail
cd "$(dirname "$0")/.."
keep=0
if [ "${1:-}" = --keep ]; then keep=1; shift; fi
[ "${1:-}" = -- ] && shift
cache=${SRU_DOCKER_CACHE:-/var/tmp/srutrain-docker}
storage=(--storage-driver vfs)
start=$(date +%s)

need=()
command -v buildah > /dev/null || need+=(buildah)
command -v debootstrap > /dev/null || need+=(debootstrap)
if [ ${#need[@]} -gt 0 ]; then
  echo "docker_check: installing ${need[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${need[@]}"
fi

# debian:12 from debootstrap, once (the tarball is cached; the image is re-imported when missing).
mkdir -p "$cache"
if ! buildah "${storage[@]}" images --format '{{.Name}}:{{.Tag}}' | grep -qx 'localhost/debian:12'; then
  if [ ! -s "$cache/debian12.tar" ]; then
    echo "docker_check: debootstrap --variant=minbase bookworm (a few minutes)"
    rm -rf "$cache/rootfs"
    debootstrap --variant=minbase bookworm "$cache/rootfs" http://deb.debian.org/debian > "$cache/debootstrap.log" 2>&1 \
      || { tail -20 "$cache/debootstrap.log"; echo "docker_check: FAILED: debootstrap"; exit 1; }
    tar -C "$cache/rootfs" -cf "$cache/debian12.tar" .
    rm -rf "$cache/rootfs"
  fi
  ctr=$(buildah "${storage[@]}" from scratch)
  buildah "${storage[@]}" add "$ctr" "$cache/debian12.tar" / > /dev/null
  buildah "${storage[@]}" commit "$ctr" debian:12 > /dev/null
  buildah "${storage[@]}" rm "$ctr" > /dev/null
fi

echo "docker_check: building srutrain:cpu (--build-arg VARIANT=cpu)"
buildah "${storage[@]}" bud --isolation chroot --pull-never --build-arg VARIANT=cpu -t srutrain:cpu . \
  > "$cache/build.log" 2>&1 || { tail -40 "$cache/build.log"; echo "docker_check: FAILED: the image build"; exit 1; }
built=$(date +%s)
size=$(buildah "${storage[@]}" images --format '{{.Name}}:{{.Tag}} {{.Size}}' | awk '$1 == "localhost/srutrain:cpu" { print $2, $3 }')

ctr=$(buildah "${storage[@]}" from srutrain:cpu)
cleanup() {
  buildah "${storage[@]}" rm "$ctr" > /dev/null 2>&1 || true
  if [ $keep -eq 0 ]; then buildah "${storage[@]}" rmi srutrain:cpu > /dev/null 2>&1 || true; fi
}
trap cleanup EXIT
echo "docker_check: srutrain --help inside the image"
buildah "${storage[@]}" run --isolation chroot "$ctr" -- srutrain --help | head -3
echo "docker_check: the quickstart inside the image (srutrain --config configs/quickstart.yaml $*)"
buildah "${storage[@]}" run --isolation chroot "$ctr" -- srutrain --config configs/quickstart.yaml \
  --run-dir runs/docker-quickstart --set log.progress=false "$@" 2>&1 | tail -4
buildah "${storage[@]}" run --isolation chroot "$ctr" -- srueval --checkpoint runs/docker-quickstart/best.safetensors \
  --split test
end=$(date +%s)
echo "docker_check: OK — image srutrain:cpu $size; build $((built - start)) s, quickstart $((end - built)) s, $((end - start)) s in all"
