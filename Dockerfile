# srutrain in a container: a build stage (compilers, the Debian packages of scripts/setup.sh — the one
# package list — and the Release build) and a runtime stage holding only the binaries, the shared
# libraries they link (copied from the build stage), the configs and the shipped sample data.
#
# GPU image (the default; CUDA 13 + cuDNN 9, as the project builds with):
#   docker build -t srutrain .
#   docker run --gpus all --rm srutrain --config configs/quickstart.yaml --set train.device=cuda
# CPU-only image on debian:12:
#   docker build -t srutrain:cpu --build-arg VARIANT=cpu .
#   docker run --rm srutrain:cpu --config configs/quickstart.yaml
# Run directories are written under /opt/srutrain/runs; mount a volume there to keep them
# (-v "$PWD/runs:/opt/srutrain/runs"). scripts/docker_check.sh builds and runs the CPU image with
# buildah where there is no Docker daemon or registry (this project's CI machines).
# VARIANT picks the base images; only the stages the chosen variant needs are built (BuildKit and
# buildah skip unused stages), so the CPU build needs no NVIDIA image.
ARG VARIANT=cuda
FROM nvidia/cuda:13.0.0-cudnn-devel-ubuntu24.04 AS cuda-build-base
FROM nvidia/cuda:13.0.0-cudnn-runtime-ubuntu24.04 AS cuda-runtime-base
FROM debian:12 AS cpu-build-base
FROM debian:12 AS cpu-runtime-base

# ---- build ----
FROM ${VARIANT}-build-base AS build
ARG VARIANT
WORKDIR /src
COPY scripts/setup.sh scripts/setup.sh
RUN scripts/setup.sh
COPY . .
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSRU_BUILD_TESTS=OFF \
      -DSRU_CUDA=$([ "$VARIANT" = cuda ] && echo ON || echo OFF) \
 && cmake --build /build \
 && scripts/bundle_libs.sh /opt/srutrain /build/srutrain /build/srueval /build/srubench \
 && cp -r configs /opt/srutrain/configs \
 && mkdir -p /opt/srutrain/data && cp -r data/README.md data/enwik8-sample data/squad-sample /opt/srutrain/data/

# ---- runtime ----
FROM ${VARIANT}-runtime-base
COPY --from=build /opt/srutrain /opt/srutrain
ENV PATH=/opt/srutrain/bin:$PATH LD_LIBRARY_PATH=/opt/srutrain/lib
WORKDIR /opt/srutrain
ENTRYPOINT ["srutrain"]
CMD ["--help"]
