#!/usr/bin/env bash
# Copies binaries and the shared libraries they link into DEST/bin and DEST/lib, for a runtime image
# that installs no packages: every library ldd resolves, except the C library's own (the base image
# has them) and CUDA's (the CUDA runtime image has them). Usage: bundle_libs.sh DEST BINARY...
set -euo pipefail
dest=$1; shift
mkdir -p "$dest/bin" "$dest/lib"
for bin in "$@"; do
  cp "$bin" "$dest/bin/"
  ldd "$bin" | awk '/=> \// { print $1, $3 }' | while read -r soname path; do
    case "$soname" in
      libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libcuda.so*|libcudart.so*|libcublas*|libcudnn*|libnccl*) continue ;;
    esac
    [ -e "$dest/lib/$soname" ] || cp -L "$path" "$dest/lib/$soname"
  done
done
echo "bundle_libs: $(ls "$dest/bin" | wc -l) binaries, $(ls "$dest/lib" | wc -l) libraries in $dest"
