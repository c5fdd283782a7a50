// cuDNN v8 RNN API calls behind lstm_cudnn_stack (ops/lstm_cudnn.h: math, shapes, weight layout).
// Per call: an RNN descriptor (LSTM, double bias, N layers, uni- or bidirectional, padded I/O, no dropout), data
// descriptors for x and y in the time-major unpacked layout with per-sequence lengths, an (N*D, B, H)
// state descriptor, the flat weight space filled from the named parameters, and workspace / reserve
// space from the caching allocator. The descriptors of calls without padding (every length L: the
// language models' steps) are made once per shape and kept for the process (rnn_call): no host work
// to make them at each call, and a CUDA graph that captured a call replays against descriptors and
// host lengths that still exist. Padded calls (lengths of the batch) make theirs per call and are
// refused inside a capture, whose replays would reuse the capture's lengths. Backward: cudnnRNNBackwardData_v8, then
// cudnnRNNBackwardWeights_v8 adding into a zeroed flat gradient, which is unpacked per parameter.
// y (forward) and dx (backward) are zeroed before the calls: cuDNN does not promise to write the steps
// past a sequence's length, and the CPU LSTM's values there are exact zeros. Sizes cuDNN takes as int
// are checked (checked_int) rather than truncated.
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "core/kernel_count.h"
#include "ops/cuda/kernel_util.cuh"
#include "ops/lstm_cudnn.h"
#include "ops/matmul.h"

namespace sru::cuda {

namespace {

cudnnDataType_t cudnn_type(DType t) {
  switch (t) {
    case DType::F32: return CUDNN_DATA_FLOAT;
    case DType::F64: return CUDNN_DATA_DOUBLE;
    case DType::BF16: return CUDNN_DATA_BFLOAT16;
    default: SRU_FAIL("cuDNN LSTM: expected f32, f64 or bf16 tensors, got ", dtype_name(t));
  }
}

// cuDNN's math precision for a data type: bf16 data computes in float32 (the only choice it offers).
cudnnDataType_t cudnn_math_precision(cudnnDataType_t data) {
  return data == CUDNN_DATA_BFLOAT16 ? CUDNN_DATA_FLOAT : data;
}

// The math type: float at matmul precision highest FMA only (no TF32 tensor cores, full FP32 like the
// SRU's GEMMs); float at high or medium cuDNN's default, which may use TF32 (as PyTorch with
// cudnn.allow_tf32); bf16 tensor cores; double the default.
cudnnMathType_t cudnn_math_type(cudnnDataType_t data, bool tensor_op_math) {
  if (data == CUDNN_DATA_BFLOAT16) return CUDNN_TENSOR_OP_MATH;
  return data == CUDNN_DATA_FLOAT && !tensor_op_math ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH;
}

// A tensor of at least `bytes` bytes of scratch device memory (F32 elements, never read as such).
Tensor scratch_bytes(size_t bytes, Device device) {
  return Tensor::empty({static_cast<int64_t>(std::max<size_t>(bytes, 4) + 3) / 4}, DType::F32, device);
}

// The devSeqLengths argument of cudnnRNNForward / BackwardData_v8 / BackwardWeights_v8: null from cuDNN
// 8.9.1 on, which no longer needs it (the data descriptors hold the lengths; PyTorch passes null too).
// With a device copy, the host sat in each forward and backward-data call of cuDNN 9.19 for 2.4 ms, until
// the GPU had caught up (the enwik8-lstm step on an H200, srubench train-epoch --host-profile,
// 2026-11-28); that the device lengths cause the wait is the hypothesis docs/gpu-notes.md puts to the
// next lease.
const int32_t* device_seq_lengths([[maybe_unused]] const CudnnLstmSaved& saved) {
#if CUDNN_VERSION >= 8901
  return nullptr;
#else
  return saved.device_lengths.data<int32_t>();
#endif
}

// The descriptors of one call. Destroyed with the object.
class RnnCall {
 public:
  // tensor_op_math: float may use TF32 tensor cores (matmul precision high or medium), else FMA only
  // (cudnn_math_type).
  // dropout: cuDNN's dropout between the layers (a CudnnStackDropout's descriptor, which outlives this),
  // or null for none.
  RnnCall(const Tensor& x, int64_t hidden, int64_t directions, int64_t layers, const std::vector<int32_t>& lengths,
          cudnnForwardMode_t mode, bool tensor_op_math, cudnnDropoutDescriptor_t dropout = nullptr)
      : handle_(context(x.device().index).cudnn), L_(checked_int(x.size(0), "L", "cuDNN LSTM")),
        B_(checked_int(x.size(1), "B", "cuDNN LSTM")), n_in_(checked_int(x.size(2), "n_in", "cuDNN LSTM")),
        H_(checked_int(hidden, "H", "cuDNN LSTM")), D_(static_cast<int>(directions)),
        N_(checked_int(layers, "layers", "cuDNN LSTM")), type_(cudnn_type(x.dtype())),
        lengths_(lengths.begin(), lengths.end()) {
    if (dropout != nullptr) {
      dropout_ = dropout;
    } else {
      // No dropout inside cuDNN: nn::LSTM applies its own between layers (the CPU's masks), unless it
      // hands a CudnnStackDropout over.
      CUDNN_CHECK(cudnnCreateDropoutDescriptor(&own_dropout_));
      CUDNN_CHECK(cudnnSetDropoutDescriptor(own_dropout_, handle_, 0.0f, nullptr, 0, 0));
      dropout_ = own_dropout_;
    }
    CUDNN_CHECK(cudnnCreateRNNDescriptor(&rnn_));
    CUDNN_CHECK(cudnnSetRNNDescriptor_v8(rnn_, CUDNN_RNN_ALGO_STANDARD, CUDNN_LSTM, CUDNN_RNN_DOUBLE_BIAS,
                                         D_ == 2 ? CUDNN_BIDIRECTIONAL : CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT, type_,
                                         cudnn_math_precision(type_), cudnn_math_type(type_, tensor_op_math), n_in_,
                                         H_, H_, N_, dropout_,
                                         CUDNN_RNN_PADDED_IO_ENABLED));
    CUDNN_CHECK(cudnnCreateRNNDataDescriptor(&x_desc_));
    CUDNN_CHECK(cudnnCreateRNNDataDescriptor(&y_desc_));
    // The padding fill is read as the data type: a zero of each width (bf16 zero is all-zero bits).
    void* fill = type_ == CUDNN_DATA_DOUBLE ? static_cast<void*>(&fill_d_)
                 : type_ == CUDNN_DATA_FLOAT ? static_cast<void*>(&fill_f_)
                                              : static_cast<void*>(&fill_16_);
    CUDNN_CHECK(cudnnSetRNNDataDescriptor(x_desc_, type_, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED, L_, B_, n_in_,
                                          lengths_.data(), fill));
    CUDNN_CHECK(cudnnSetRNNDataDescriptor(y_desc_, type_, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED, L_, B_, D_ * H_,
                                          lengths_.data(), fill));
    checked_int(layers * x.size(1) * directions * hidden, "N * B * D * H (state elements)", "cuDNN LSTM");
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&h_desc_));
    const int dims[3] = {N_ * D_, B_, H_}, strides[3] = {B_ * H_, H_, 1};
    CUDNN_CHECK(cudnnSetTensorNdDescriptor(h_desc_, type_, 3, dims, strides));
    CUDNN_CHECK(cudnnGetRNNWeightSpaceSize(handle_, rnn_, &weight_bytes_));
    CUDNN_CHECK(cudnnGetRNNTempSpaceSizes(handle_, rnn_, mode, x_desc_, &work_bytes_, &reserve_bytes_));
  }
  ~RnnCall() {
    cudnnDestroyTensorDescriptor(h_desc_);
    cudnnDestroyRNNDataDescriptor(y_desc_);
    cudnnDestroyRNNDataDescriptor(x_desc_);
    cudnnDestroyRNNDescriptor(rnn_);
    if (own_dropout_ != nullptr) cudnnDestroyDropoutDescriptor(own_dropout_);
  }
  RnnCall(const RnnCall&) = delete;
  RnnCall& operator=(const RnnCall&) = delete;

  // Copies each named parameter into its place in the flat weight space (to_flat) or the flat
  // gradient into each parameter (!to_flat). params[l][dir] is cuDNN's pseudo-layer l * D + dir;
  // matrices 0-3 are the i, f, g, o rows of weight_ih (n_in columns in layer 0, D * H above), 4-7
  // those of weight_hh; biases likewise from bias_ih and bias_hh.
  void transfer(void* flat, const std::vector<std::vector<LstmDirectionWeights>>& params, bool to_flat,
                cudaStream_t stream) const {
    cudnnTensorDescriptor_t m_desc, b_desc;
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&m_desc));
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&b_desc));
    const size_t elem = type_ == CUDNN_DATA_DOUBLE ? 8 : type_ == CUDNN_DATA_FLOAT ? 4 : 2;
    for (int pseudo = 0; pseudo < N_ * D_; ++pseudo) {
      const int layer = pseudo / D_;
      const LstmDirectionWeights& p = params[layer][pseudo % D_];
      for (int lin = 0; lin < 8; ++lin) {
        void *m_addr = nullptr, *b_addr = nullptr;
        CUDNN_CHECK(cudnnGetRNNWeightParams(handle_, rnn_, pseudo, weight_bytes_, flat, lin, m_desc, &m_addr, b_desc,
                                            &b_addr));
        const int gate = lin % 4;
        const int64_t cols = lin >= 4 ? H_ : layer == 0 ? n_in_ : D_ * H_;
        SRU_CHECK(elements_of(m_desc) == H_ * cols && elements_of(b_desc) == H_, "cuDNN LSTM: unexpected layout of ",
                  "matrix ", lin, " in the weight space");
        char* m_param = static_cast<char*>((lin < 4 ? p.weight_ih : p.weight_hh).data_ptr()) + gate * H_ * cols * elem;
        char* b_param = static_cast<char*>((lin < 4 ? p.bias_ih : p.bias_hh).data_ptr()) + gate * H_ * elem;
        if (to_flat) {
          CUDA_CHECK(cudaMemcpyAsync(m_addr, m_param, H_ * cols * elem, cudaMemcpyDeviceToDevice, stream));
          CUDA_CHECK(cudaMemcpyAsync(b_addr, b_param, H_ * elem, cudaMemcpyDeviceToDevice, stream));
        } else {
          CUDA_CHECK(cudaMemcpyAsync(m_param, m_addr, H_ * cols * elem, cudaMemcpyDeviceToDevice, stream));
          CUDA_CHECK(cudaMemcpyAsync(b_param, b_addr, H_ * elem, cudaMemcpyDeviceToDevice, stream));
        }
      }
    }
    cudnnDestroyTensorDescriptor(b_desc);
    cudnnDestroyTensorDescriptor(m_desc);
  }

  cudnnHandle_t handle_;
  int L_, B_, n_in_, H_, D_, N_;
  cudnnDataType_t type_;
  std::vector<int> lengths_;
  cudnnDropoutDescriptor_t dropout_ = nullptr, own_dropout_ = nullptr;
  cudnnRNNDescriptor_t rnn_ = nullptr;
  cudnnRNNDataDescriptor_t x_desc_ = nullptr, y_desc_ = nullptr;
  cudnnTensorDescriptor_t h_desc_ = nullptr;
  size_t weight_bytes_ = 0, work_bytes_ = 0, reserve_bytes_ = 0;

 private:
  float fill_f_ = 0.0f;  // outputs past a sequence's length (kept alive with the descriptors)
  double fill_d_ = 0.0;
  uint16_t fill_16_ = 0;
  static int64_t elements_of(cudnnTensorDescriptor_t desc) {
    cudnnDataType_t type;
    int n = 0, dims[8], strides[8];
    CUDNN_CHECK(cudnnGetTensorNdDescriptor(desc, 8, &type, &n, dims, strides));
    int64_t total = 1;
    for (int i = 0; i < n; ++i) total *= dims[i];
    return total;
  }
};

using RnnCallKey = std::tuple<int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, int, bool>;

}  // namespace
}  // namespace sru::cuda

namespace sru {

// cudnn_stack_dropout's object (ops/lstm_cudnn.h): the dropout descriptor with its RNG states, and the
// descriptors of this module's calls per shape (they point at this dropout descriptor).
class CudnnStackDropout {
 public:
  CudnnStackDropout(Device device, double p, uint64_t seed) : device_(device), p_(p) {
    SRU_CHECK(device.is_cuda() && p > 0 && p < 1, "cudnn_stack_dropout: expected a CUDA device and p in (0, 1), got ",
              device.str(), " and ", p);
    // Seeding the states runs a kernel: inside a capture it would become part of every replay.
    SRU_CHECK(!cuda::capturing(device.index), "cudnn_stack_dropout: cuDNN's dropout states are seeded by a kernel, "
              "which a CUDA graph capture would replay at every step: make them before the capture (the first "
              "training call, eager, does)");
    const cudnnHandle_t handle = cuda::context(device.index).cudnn;
    size_t bytes = 0;
    CUDNN_CHECK(cudnnDropoutGetStatesSize(handle, &bytes));
    states_ = Tensor::empty({static_cast<int64_t>((std::max<size_t>(bytes, 4) + 3) / 4)}, DType::F32, device);
    CUDNN_CHECK(cudnnCreateDropoutDescriptor(&desc_));
    CUDNN_CHECK(cudnnSetDropoutDescriptor(desc_, handle, static_cast<float>(p), states_.data_ptr(), bytes, seed));
  }
  ~CudnnStackDropout() {
    calls_.clear();  // the RNN descriptors that point at the dropout descriptor go first
    cudnnDestroyDropoutDescriptor(desc_);
  }
  CudnnStackDropout(const CudnnStackDropout&) = delete;
  CudnnStackDropout& operator=(const CudnnStackDropout&) = delete;
  Device device() const { return device_; }
  double p() const { return p_; }
  const Tensor& states() const { return states_; }
  cudnnDropoutDescriptor_t descriptor() const { return desc_; }
  std::map<cuda::RnnCallKey, std::shared_ptr<const cuda::RnnCall>>& calls() { return calls_; }

 private:
  Device device_;
  double p_;
  Tensor states_;  // cuDNN's RNG states (bytes), kept as long as the descriptor
  cudnnDropoutDescriptor_t desc_ = nullptr;
  std::map<cuda::RnnCallKey, std::shared_ptr<const cuda::RnnCall>> calls_;
};

std::shared_ptr<CudnnStackDropout> cudnn_stack_dropout(Device device, double p, uint64_t seed) {
  return std::make_shared<CudnnStackDropout>(device, p, seed);
}

bool cudnn_stack_dropout_serves(const CudnnStackDropout& dropout, Device device, double p) {
  return dropout.device() == device && dropout.p() == p;
}

Tensor cudnn_stack_dropout_states(const CudnnStackDropout& dropout) { return dropout.states(); }

}  // namespace sru

namespace sru::cuda {
namespace {

// The descriptors of a call: kept per shape for calls without padding (the header's comment; with
// cuDNN's dropout, in that dropout's object), made for this call otherwise. Inside a CUDA graph capture
// a padded call is refused (its lengths would be frozen into the graph), and so is a shape past the
// cache's bound (its descriptors would be destroyed while the graph lives).
std::shared_ptr<const RnnCall> rnn_call(const Tensor& x, int64_t hidden, int64_t directions, int64_t layers,
                                        const std::vector<int32_t>& lengths, cudnnForwardMode_t mode,
                                        bool tensor_op_math, CudnnStackDropout* dropout) {
  const int device = x.device().index;
  const bool unpadded = std::all_of(lengths.begin(), lengths.end(), [&](int32_t n) { return n == x.size(0); });
  const bool in_capture = capturing(device);
  SRU_CHECK(unpadded || !in_capture, "cuDNN LSTM: a batch with padding (sequence lengths below ", x.size(0),
            ") inside a CUDA graph capture: cuDNN takes the lengths as host values, which every replay would "
            "reuse; train such steps eagerly (train.cuda_graphs auto does)");
  const cudnnDropoutDescriptor_t dropout_desc = dropout ? dropout->descriptor() : nullptr;
  if (!unpadded)
    return std::make_shared<const RnnCall>(x, hidden, directions, layers, lengths, mode, tensor_op_math, dropout_desc);
  static std::mutex& mutex = *new std::mutex;  // process lifetime, as the allocator's state
  static auto& process_kept = *new std::map<RnnCallKey, std::shared_ptr<const RnnCall>>;
  auto& kept = dropout ? dropout->calls() : process_kept;
  constexpr size_t kMaxKept = 256;  // shapes; the language models use one or two
  const RnnCallKey key{device,  x.size(0), x.size(1), x.size(2), hidden, directions, layers,
                       static_cast<int>(x.dtype()), static_cast<int>(mode), tensor_op_math};
  std::lock_guard<std::mutex> lock(mutex);
  if (const auto found = kept.find(key); found != kept.end()) return found->second;
  auto made =
      std::make_shared<const RnnCall>(x, hidden, directions, layers, lengths, mode, tensor_op_math, dropout_desc);
  SRU_CHECK(kept.size() < kMaxKept || !in_capture, "cuDNN LSTM: more than ", kMaxKept,
            " shapes of calls; a new one cannot be captured into a CUDA graph");
  if (kept.size() < kMaxKept) kept.emplace(key, made);
  return made;
}

}  // namespace

CudnnLstmSaved lstm_cudnn_forward(const Tensor& x, const Tensor& h0, const Tensor& c0,
                                  const std::vector<std::vector<LstmDirectionWeights>>& layers,
                                  const std::vector<int32_t>& lengths, bool training, const Tensor& y, const Tensor& hy,
                                  const Tensor& cy, const std::shared_ptr<CudnnStackDropout>& dropout) {
  ::sru::detail::host_profile_mark("lstm_cudnn_forward (descriptors, weight copies, cudnnRNNForward)");
  const int64_t H = layers[0][0].weight_hh.size(1), D = static_cast<int64_t>(layers[0].size());
  const int64_t N = static_cast<int64_t>(layers.size());
  const cudnnForwardMode_t mode = training ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE;
  CudnnLstmSaved saved;
  saved.tensor_op_math = matmul_precision() != MatmulPrecision::Highest;
  saved.dropout = dropout;
  SRU_CHECK(!dropout || (training && dropout->device() == x.device()), "cuDNN LSTM: its dropout is for training "
            "calls on ", dropout ? dropout->device().str() : "", ", got a", training ? "" : "n inference", " call on ",
            x.device().str());
  const std::shared_ptr<const RnnCall> kept_call =
      rnn_call(x, H, D, N, lengths, mode, saved.tensor_op_math, dropout.get());
  const RnnCall& call = *kept_call;
  ::sru::detail::host_profile_mark("(lstm_cudnn_forward: weight copies, scratch, lengths to the device)");
  const cudaStream_t stream = stream_of(x);
  saved.weight_space = scratch_bytes(call.weight_bytes_, x.device());
  call.transfer(saved.weight_space.data_ptr(), layers, true, stream);
  saved.reserve_space = scratch_bytes(call.reserve_bytes_, x.device());
#if CUDNN_VERSION < 8901
  saved.device_lengths =
      Tensor::from_vector(std::vector<int32_t>(lengths.begin(), lengths.end()), {x.size(1)}, DType::I32).to(x.device());
#endif
  const Tensor work = scratch_bytes(call.work_bytes_, x.device());
  // Steps past a sequence's length: cuDNN is not documented to write them there; the CPU LSTM's are
  // exact zeros, so start from zeros.
  Tensor(y).zero_();
  ::sru::detail::host_profile_mark("cudnnRNNForward");
  CUDNN_CHECK(cudnnRNNForward(call.handle_, call.rnn_, mode, device_seq_lengths(saved), call.x_desc_,
                              x.data_ptr(), call.y_desc_, y.data_ptr(), call.h_desc_, data_ptr_or_null(h0), hy.data_ptr(),
                              call.h_desc_, data_ptr_or_null(c0), cy.data_ptr(), call.weight_bytes_,
                              saved.weight_space.data_ptr(), call.work_bytes_, work.data_ptr(),
                              training ? call.reserve_bytes_ : 0, training ? saved.reserve_space.data_ptr() : nullptr));
  ::sru::detail::host_profile_mark("(lstm_cudnn_forward after cudnnRNNForward)");
  return saved;
}

void lstm_cudnn_backward(const Tensor& x, const Tensor& h0, const Tensor& c0,
                         const std::vector<std::vector<LstmDirectionWeights>>& layers,
                         const std::vector<int32_t>& lengths, const CudnnLstmSaved& saved, const Tensor& y,
                         const Tensor& dy, const Tensor& dhy, const Tensor& dcy, const Tensor& dx, const Tensor& dh0,
                         const Tensor& dc0, const std::vector<std::vector<LstmDirectionWeights>>& dweights) {
  ::sru::detail::host_profile_mark("lstm_cudnn_backward (descriptors, cudnnRNNBackwardData/Weights, copies)");
  const int64_t H = layers[0][0].weight_hh.size(1), D = static_cast<int64_t>(layers[0].size());
  const int64_t N = static_cast<int64_t>(layers.size());
  SRU_CHECK(dweights.size() == layers.size(), "cuDNN LSTM backward: ", dweights.size(), " gradient layers for ",
            layers.size());
  for (size_t l = 0; l < layers.size(); ++l)
    SRU_CHECK(dweights[l].size() == layers[l].size(), "cuDNN LSTM backward: layer ", l, " has ", dweights[l].size(),
              " gradient directions for ", layers[l].size());
  const std::shared_ptr<const RnnCall> kept_call =
      rnn_call(x, H, D, N, lengths, CUDNN_FWD_MODE_TRAINING, saved.tensor_op_math, saved.dropout.get());
  const RnnCall& call = *kept_call;
  const cudaStream_t stream = stream_of(x);
  const Tensor work = scratch_bytes(call.work_bytes_, x.device());
  // dx at steps past a sequence's length: nothing in cuDNN promises to write it, and dx comes from a
  // recycled block; those steps get no gradient, as on the CPU.
  Tensor(dx).zero_();
  ::sru::detail::host_profile_mark("cudnnRNNBackwardData_v8");
  CUDNN_CHECK(cudnnRNNBackwardData_v8(call.handle_, call.rnn_, device_seq_lengths(saved), call.y_desc_,
                                      y.data_ptr(), dy.data_ptr(), call.x_desc_, dx.data_ptr(), call.h_desc_,
                                      data_ptr_or_null(h0), data_ptr_or_null(dhy), data_ptr_or_null(dh0), call.h_desc_,
                                      data_ptr_or_null(c0), data_ptr_or_null(dcy), data_ptr_or_null(dc0), call.weight_bytes_,
                                      saved.weight_space.data_ptr(), call.work_bytes_, work.data_ptr(),
                                      call.reserve_bytes_, saved.reserve_space.data_ptr()));
  Tensor dweight = scratch_bytes(call.weight_bytes_, x.device());
  CUDA_CHECK(cudaMemsetAsync(dweight.data_ptr(), 0, call.weight_bytes_, stream));
  ::sru::detail::host_profile_mark("cudnnRNNBackwardWeights_v8");
  CUDNN_CHECK(cudnnRNNBackwardWeights_v8(call.handle_, call.rnn_, CUDNN_WGRAD_MODE_ADD,
                                         device_seq_lengths(saved), call.x_desc_, x.data_ptr(), call.h_desc_,
                                         data_ptr_or_null(h0), call.y_desc_, y.data_ptr(), call.weight_bytes_,
                                         dweight.data_ptr(), call.work_bytes_, work.data_ptr(), call.reserve_bytes_,
                                         saved.reserve_space.data_ptr()));
  ::sru::detail::host_profile_mark("(lstm_cudnn_backward: gradient copies)");
  call.transfer(dweight.data_ptr(), dweights, false, stream);
}

}  // namespace sru::cuda
