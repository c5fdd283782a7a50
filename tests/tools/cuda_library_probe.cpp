// cuda_library_probe: questions about what cuDNN and cuBLAS do on a GPU, asked once per card
// (scripts/gpu_lease.sh runs it; docs/gpu-notes.md keeps the answers).
//   lstm PRECISION STATES   one cuDNN LSTM layer forward (ops/lstm_cudnn.h) at the shapes of
//                           CudaParity.LstmsAtMatmulPrecisionHigh's layers, for compute-sanitizer
//                           initcheck: prints the address range of every buffer it hands the op, so that
//                           the addresses initcheck reports can be placed (scripts/initcheck_places.py),
//                           then the outputs' checksums. PRECISION: fp32 | tf32 | bf16; STATES:
//                           absent | zeros (the initial h and c as null pointers or zero tensors).
//   lstm-compare PRECISION  absent and zero initial states must give the same outputs, bit for bit (run
//                           it with SRU_DEBUG_NAN_FILL=1: a read of memory nothing wrote then shows as a
//                           NaN or a difference).
//   gemm                    a 256 x 512 x 256 float32 product through cuBLAS with each compute type
//                           (FP32, FAST_TF32, FAST_16BF) and through bfloat16 operands: errors against
//                           float64, and whether FAST_16BF's result equals FAST_TF32's bit for bit.
// Built with the CUDA backend only; not a test (it needs a GPU, and a sanitizer for `lstm`).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/float16.h"
#include "core/cuda/device_info.h"
#include "core/tensor.h"
#include "ops/lstm_cudnn.h"
#include "ops/matmul.h"

using namespace sru;

namespace {

void print_range(const char* name, const Tensor& t) {
  if (!t.defined()) return;
  const auto begin = reinterpret_cast<uintptr_t>(t.data_ptr());
  std::printf("range %s 0x%llx 0x%llx\n", name, static_cast<unsigned long long>(begin),
              static_cast<unsigned long long>(begin + t.numel() * dtype_size(t.dtype())));
}

struct Outputs {
  std::vector<float> y, hy, cy;
};

// One layer, L 9, B 4, n_in inputs, H 24, one direction; initial states absent or explicit zeros.
Outputs run_layer(int64_t n_in, bool zero_states, bool print) {
  const int64_t L = 9, B = 4, H = 24;
  const Device gpu = Device::cuda(0);
  Generator gen(7 + n_in);
  auto uniform = [&](const Shape& s) { return Tensor::uniform(s, -0.5, 0.5, DType::F32, gen).to(gpu); };
  const Tensor x = uniform({L, B, n_in});
  const LstmDirectionWeights w{uniform({4 * H, n_in}), uniform({4 * H, H}), uniform({4 * H}), uniform({4 * H})};
  Tensor h0, c0;
  if (zero_states) {
    h0 = Tensor::zeros({1, B, H}, DType::F32, gpu);
    c0 = Tensor::zeros({1, B, H}, DType::F32, gpu);
  }
  const Tensor y = Tensor::empty({L, B, H}, DType::F32, gpu), hy = Tensor::empty({1, B, H}, DType::F32, gpu),
               cy = Tensor::empty({1, B, H}, DType::F32, gpu);
  const std::vector<int32_t> lengths(B, static_cast<int32_t>(L));
  const cuda::CudnnLstmSaved saved = cuda::lstm_cudnn_forward(x, h0, c0, {{w}}, lengths, true, y, hy, cy);
  if (print) {
    std::printf("layer n_in %lld\n", static_cast<long long>(n_in));
    print_range("x", x);
    print_range("weight_ih", w.weight_ih);
    print_range("weight_hh", w.weight_hh);
    print_range("bias_ih", w.bias_ih);
    print_range("bias_hh", w.bias_hh);
    print_range("h0", h0);
    print_range("c0", c0);
    print_range("y", y);
    print_range("hy", hy);
    print_range("cy", cy);
    print_range("weight_space", saved.weight_space);
    print_range("reserve_space", saved.reserve_space);
    print_range("device_lengths", saved.device_lengths);
  }
  return {y.to(Device::cpu()).to_vector<float>(), hy.to(Device::cpu()).to_vector<float>(),
          cy.to(Device::cpu()).to_vector<float>()};
}

double checksum(const std::vector<float>& v, int* non_finite) {
  double s = 0;
  for (float f : v) {
    if (!std::isfinite(f)) ++*non_finite;
    s += f;
  }
  return s;
}

}  // namespace

// C = A B for float32 A (M, K), B (K, N), column-major, through cuBLAS at one compute type; with
// bf16_operands the operands are rounded on the host and handed over as CUDA_R_16BF.
std::vector<float> cublas_product(cublasHandle_t h, const std::vector<float>& a, const std::vector<float>& b, int M,
                                  int N, int K, cublasComputeType_t compute, bool bf16_operands) {
  const size_t elem = bf16_operands ? 2 : 4;
  void *da = nullptr, *db = nullptr, *dc = nullptr;
  auto check = [](bool ok, const char* what) {
    if (!ok) {
      std::fprintf(stderr, "cuda_library_probe: %s failed\n", what);
      std::exit(1);
    }
  };
  check(cudaMalloc(&da, a.size() * elem) == cudaSuccess && cudaMalloc(&db, b.size() * elem) == cudaSuccess &&
            cudaMalloc(&dc, size_t(M) * N * 4) == cudaSuccess, "cudaMalloc");
  auto upload = [&](void* dst, const std::vector<float>& v) {
    if (!bf16_operands) return cudaMemcpy(dst, v.data(), v.size() * 4, cudaMemcpyHostToDevice) == cudaSuccess;
    std::vector<uint16_t> bits(v.size());
    for (size_t i = 0; i < v.size(); ++i) bits[i] = bf16_bits_from_float(v[i]);
    return cudaMemcpy(dst, bits.data(), bits.size() * 2, cudaMemcpyHostToDevice) == cudaSuccess;
  };
  check(upload(da, a) && upload(db, b), "upload");
  const float one = 1, zero = 0;
  const cudaDataType_t type = bf16_operands ? CUDA_R_16BF : CUDA_R_32F;
  check(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &one, da, type, M, db, type, K, &zero, dc, CUDA_R_32F, M,
                     compute, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS, "cublasGemmEx");
  std::vector<float> c(size_t(M) * N);
  check(cudaMemcpy(c.data(), dc, c.size() * 4, cudaMemcpyDeviceToHost) == cudaSuccess, "download");
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
  return c;
}

int probe_gemm() {
  const int M = 256, N = 256, K = 512;
  Generator gen(90);
  const std::vector<float> a = Tensor::uniform({M * K}, -1, 1, DType::F32, gen).to_vector<float>();
  const std::vector<float> b = Tensor::uniform({K * N}, -1, 1, DType::F32, gen).to_vector<float>();
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return 1;
  struct Variant {
    const char* name;
    cublasComputeType_t compute;
    bool bf16;
  };
  const Variant variants[] = {{"COMPUTE_32F (FP32)", CUBLAS_COMPUTE_32F, false},
                              {"COMPUTE_32F_FAST_TF32", CUBLAS_COMPUTE_32F_FAST_TF32, false},
                              {"COMPUTE_32F_FAST_16BF", CUBLAS_COMPUTE_32F_FAST_16BF, false},
                              {"bf16 operands, COMPUTE_32F", CUBLAS_COMPUTE_32F, true}};
  std::vector<std::vector<float>> results;
  for (const Variant& v : variants) {
    results.push_back(cublas_product(h, a, b, M, N, K, v.compute, v.bf16));
    double mean = 0;
    for (int j = 0; j < N; ++j)
      for (int i = 0; i < M; ++i) {
        double exact = 0, magnitude = 0;
        for (int k = 0; k < K; ++k) {
          const double p = double(a[size_t(k) * M + i]) * double(b[size_t(j) * K + k]);
          exact += p;
          magnitude += std::fabs(p);
        }
        mean += std::fabs(results.back()[size_t(j) * M + i] - exact) / magnitude / (double(M) * N);
      }
    std::printf("gemm %-28s mean |err| / sum|a||b| = %.3e\n", v.name, mean);
  }
  auto same = [&](size_t x, size_t y) { return results[x] == results[y] ? "equal" : "different"; };
  std::printf("gemm FAST_16BF vs FAST_TF32: %s bit for bit; FAST_16BF vs bf16 operands: %s\n", same(2, 1), same(2, 3));
  cublasDestroy(h);
  return 0;
}

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const bool ok_args = (mode == "gemm" && argc == 2) || (mode == "lstm" && argc == 4) || (mode == "lstm-compare" && argc == 3);
  if (!ok_args) {
    std::fprintf(stderr, "usage: cuda_library_probe lstm fp32|tf32|bf16 absent|zeros\n"
                         "       cuda_library_probe lstm-compare fp32|tf32|bf16\n"
                         "       cuda_library_probe gemm\n");
    return 2;
  }
  if (cuda::device_count() == 0) {
    std::fprintf(stderr, "cuda_library_probe: no CUDA device (%s)\n", cuda::unavailable_reason().c_str());
    return 77;
  }
  if (mode == "gemm") return probe_gemm();
  set_matmul_precision(parse_precision(argv[2], "PRECISION"));
  if (mode == "lstm") {
    const std::string states = argv[3];
    if (states != "absent" && states != "zeros") {
      std::fprintf(stderr, "cuda_library_probe: STATES is absent or zeros, not '%s'\n", states.c_str());
      return 2;
    }
    int non_finite = 0;
    for (int64_t n_in : {16, 24}) {
      const Outputs o = run_layer(n_in, states == "zeros", true);
      std::printf("checksum y %.9g hy %.9g cy %.9g\n", checksum(o.y, &non_finite), checksum(o.hy, &non_finite),
                  checksum(o.cy, &non_finite));
    }
    std::printf("non-finite outputs: %d\n", non_finite);
    return non_finite == 0 ? 0 : 1;
  }
  int differing = 0, non_finite = 0;
  for (int64_t n_in : {16, 24}) {
    const Outputs absent = run_layer(n_in, false, false), zeros = run_layer(n_in, true, false);
    const std::vector<float>* pairs[3][2] = {{&absent.y, &zeros.y}, {&absent.hy, &zeros.hy}, {&absent.cy, &zeros.cy}};
    for (auto& p : pairs)
      for (size_t i = 0; i < p[0]->size(); ++i) {
        const float a = (*p[0])[i], z = (*p[1])[i];
        if (!std::isfinite(a) || !std::isfinite(z)) ++non_finite;
        else if (a != z) ++differing;
      }
  }
  std::printf("lstm-compare at %s: %d outputs differ between absent and zero initial states, %d non-finite\n",
              argv[2], differing, non_finite);
  return differing == 0 && non_finite == 0 ? 0 : 1;
}
