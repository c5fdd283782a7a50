#!/usr/bin/env bash
# The Dockerfile's packages are scripts/setup.sh's (one list, not two): the build stage runs
# scripts/setup.sh, no stage installs packages of its own, and the runtime stage copies what the binaries
# link (scripts/bundle_libs.sh). The GPU image cannot be built here (NVIDIA's base images are not
# reachable), so this is what CI checks of it; scripts/docker_check.sh builds and runs the CPU image.
# Usage: dockerfile_uses_setup.sh SOURCE_DIR
set -euo pipefail
src=$1
dockerfile=$src/Dockerfile
fail() { echo "FAIL: $*"; exit 1; }
[ -f "$dockerfile" ] || fail "no Dockerfile at the top level"
grep -Eq '^RUN scripts/setup.sh' "$dockerfile" || fail "the build stage does not run scripts/setup.sh"
! grep -Eiq 'apt(-get)? +(-[a-z]+ +)*install|dpkg +-i' "$dockerfile" || fail "the Dockerfile installs packages of its own"
grep -Eq 'scripts/bundle_libs.sh' "$dockerfile" || fail "the runtime libraries are not bundled by scripts/bundle_libs.sh"
grep -Eq '^ENTRYPOINT \["srutrain"\]' "$dockerfile" || fail "srutrain is not the entry point"
for variant in cuda cpu; do
  for stage in build runtime; do
    grep -Eq "^FROM .* AS ${variant}-${stage}-base$" "$dockerfile" || fail "no ${variant}-${stage}-base stage"
  done
done
grep -Eq '^FROM debian:12 AS cpu-build-base$' "$dockerfile" || fail "the CPU variant is not built on debian:12"
# setup.sh holds the package list as one bash array.
grep -Eq '^packages=\($' "$src/scripts/setup.sh" || fail "scripts/setup.sh has no packages=( list"
echo "ok: the Dockerfile installs exactly scripts/setup.sh's packages"
