#!/usr/bin/env bash
# The CUDA kernels' host code must not read device values back: each read is a host wait inside a
# training step that no CPU run would count (the CPU twins compute on the host). Host reads belong to
# the callers (read_scalars once per step); kernel input errors go to the device error log
# (cuda::reserve_error_slot). A read on an error path only is allowed with "error path" on its line.
# Usage: cuda_kernels_read_nothing_back.sh SOURCE_DIR
set -euo pipefail
src=${1:?usage: $0 SOURCE_DIR}/src
pattern='\.item<|to_vector<|Device::cpu\(\)|read_scalars|cudaStreamSynchronize|cudaDeviceSynchronize|cudaEventSynchronize|cudaMemcpy\(|cuda::synchronize|copy_bytes'
hits=$(grep -nE "$pattern" "$src"/ops/cuda/*.cu "$src"/ops/cuda/*.cuh "$src"/optim/cuda/*.cu | grep -v "error path" || true)
if [ -n "$hits" ]; then
  echo "host reads in CUDA kernel code (move them to the caller, or to the device error log):"
  echo "$hits"
  exit 1
fi
echo "ok: no host reads in src/ops/cuda and src/optim/cuda"
