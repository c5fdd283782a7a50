// Tensor factories, views, conversions and in-place updates. CPU tensors are handled here; CUDA
// tensors go through the CUDA backend's runtime (core/cuda/runtime.h).
#include "core/tensor.h"

#include <cmath>
#include <cstring>
#include <ostream>
#include <sstream>

#include "core/cuda/runtime.h"
#include "core/host_sync.h"
#include "core/kernel_count.h"
#include "core/parallel.h"
#include "core/philox.h"
#include "core/philox_fill.h"

namespace sru {

namespace {

std::shared_ptr<TensorImpl> make_impl(const Shape& shape, DType dtype, Device device) {
  for (int64_t s : shape) SRU_CHECK(s >= 0, "negative dimension in shape ", shape_str(shape));
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(shape_numel(shape) * dtype_size(dtype), device);
  impl->shape = shape;
  impl->dtype = dtype;
  return impl;
}

// Writes src[0..n) into dst (CPU), each value converted to dst's dtype, spread over the threads
// (conversions around bf16 kernels are on the training step's path).
template <typename S>
void convert_into(const Tensor& dst, const S* src, int64_t n) {
  SRU_DISPATCH_ALL(dst.dtype(), "convert", [&]<typename T>() {
    T* to = dst.data<T>();
    parallel_for(0, n, kParallelGrain, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) to[i] = static_cast<T>(src[i]);
    });
  });
}

void convert_into(const Tensor& dst, const Tensor& src) {
  SRU_DISPATCH_ALL(src.dtype(), "to", [&]<typename S>() { convert_into(dst, src.data<S>(), src.numel()); });
}

}  // namespace

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  return Tensor(make_impl(shape, dtype, device));
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.zero_();
  return t;
}

Tensor Tensor::ones(const Shape& shape, DType dtype, Device device) { return full(shape, 1.0, dtype, device); }

Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.fill_(value);
  return t;
}

Tensor Tensor::arange(int64_t n, DType dtype) {
  Tensor t = empty({n}, dtype);
  SRU_DISPATCH_ALL(dtype, "arange", [&]<typename T>() {
    T* d = t.data<T>();
    for (int64_t i = 0; i < n; ++i) d[i] = static_cast<T>(i);
  });
  return t;
}

template <typename T>
Tensor Tensor::from_vector(const std::vector<T>& values, const Shape& shape, DType dtype) {
  SRU_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape), "from_vector: ", values.size(),
            " values do not fill shape ", shape_str(shape));
  Tensor t = empty(shape, dtype);
  convert_into(t, values.data(), static_cast<int64_t>(values.size()));
  return t;
}

Tensor Tensor::uniform(const Shape& shape, double low, double high, DType dtype, Generator& gen) {
  // bf16 / f16: the float32 draw (the same generator words), rounded to nearest even.
  if (is_floating(dtype) && !is_compute_floating(dtype)) return uniform(shape, low, high, DType::F32, gen).to(dtype);
  Tensor t = empty(shape, dtype);
  const int64_t n = t.numel();
  const uint64_t seed = gen.seed(), offset = gen.reserve(n);
  SRU_DISPATCH_FLOATING(dtype, "uniform", [&]<typename T>() {
    T* d = t.data<T>();
    parallel_for(0, n, kParallelGrain, [&](int64_t b, int64_t e) {
      philox::for_each_element_words<1>(seed, offset, b, e, [&](int64_t i, const uint32_t* w) {
        d[i] = static_cast<T>(low + (high - low) * static_cast<double>(philox::u32_to_unit_float(w[0])));
      });
    });
  });
  return t;
}

Tensor Tensor::randn(const Shape& shape, DType dtype, Generator& gen) {
  if (is_floating(dtype) && !is_compute_floating(dtype)) return randn(shape, DType::F32, gen).to(dtype);  // as uniform
  Tensor t = empty(shape, dtype);
  const int64_t n = t.numel();
  // Two words per element: Box-Muller on (u1, u2), u1 shifted into (0, 1] so log(u1) is finite.
  const uint64_t seed = gen.seed(), offset = gen.reserve(2 * static_cast<uint64_t>(n));
  SRU_DISPATCH_FLOATING(dtype, "randn", [&]<typename T>() {
    T* d = t.data<T>();
    parallel_for(0, n, kParallelGrain, [&](int64_t b, int64_t e) {
      philox::for_each_element_words<2>(seed, offset, b, e, [&](int64_t i, const uint32_t* w) {
        const double u1 = 1.0 - philox::u32_to_unit_float(w[0]);
        const double u2 = philox::u32_to_unit_float(w[1]);
        d[i] = static_cast<T>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
      });
    });
  });
  return t;
}

int64_t Tensor::size(int d) const { return shape()[normalize_dim(d, dim(), "size")]; }

std::string Tensor::str() const {
  if (!defined()) return "Tensor(undefined)";
  return detail::concat("Tensor(", dtype_name(dtype()), ", ", shape_str(shape()),
                        device().is_cpu() ? "" : ", " + device().str(), ")");
}

void* Tensor::data_ptr() const {
  const TensorImpl& t = checked();
  return static_cast<char*>(t.storage->data()) + t.offset * dtype_size(t.dtype);
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  detail::count_value_read("item / to_vector");
  Tensor host = *this;
  if (device().is_cuda()) {  // a copy to the host, not counted again as to(cpu)
    host = empty(shape(), dtype());
    host.copy_(*this);
  }
  std::vector<T> out(numel());
  SRU_DISPATCH_ALL(dtype(), "to_vector", [&]<typename S>() {
    const S* s = host.data<S>();
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<T>(s[i]);
  });
  return out;
}

template <typename T>
T Tensor::item() const {
  SRU_CHECK(numel() == 1, "item(): tensor ", shape_str(shape()), " has ", numel(), " elements, expected 1");
  return to_vector<T>()[0];
}

Tensor Tensor::clone() const {
  Tensor t = empty(shape(), dtype(), device());
  t.copy_(*this);
  return t;
}

Tensor& Tensor::to_(Device target) {
  if (target == device()) return *this;
  TensorImpl& t = checked();
  SRU_CHECK(is_whole(), "to_(", target.str(), "): ", str(),
            " is a view of a larger tensor; move the whole tensor");
  const Tensor moved = to(target);
  t.storage = moved.impl_->storage;
  t.grad = nullptr;
  return *this;
}

void Tensor::swap_data_(Tensor& other) {
  TensorImpl& a = checked();
  TensorImpl& b = other.checked();
  SRU_CHECK(a.shape == b.shape && a.dtype == b.dtype && device() == other.device(), "swap_data_: ", str(), " on ",
            device().str(), " and ", other.str(), " on ", other.device().str(), " differ");
  if (is_whole() && other.is_whole()) {
    std::swap(a.storage, b.storage);
    return;
  }
  const Tensor kept = clone();
  copy_(other);
  other.copy_(kept);
}

Tensor Tensor::to(Device target) const {
  if (target == device()) return *this;
  if (target.is_cpu()) detail::count_value_read("to(cpu)");
  Tensor t = empty(shape(), dtype(), target);
  t.copy_(*this);
  return t;
}

Tensor Tensor::to(DType target) const {
  if (target == dtype()) return *this;
  Tensor t = empty(shape(), target, device());
  detail::count_kernel_dispatch("convert");
  if (device().is_cuda()) {
    cuda::convert(*this, t);
    return t;
  }
  convert_into(t, *this);
  return t;
}

Tensor Tensor::detach() const {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = checked().storage;
  impl->offset = checked().offset;
  impl->shape = checked().shape;
  impl->dtype = checked().dtype;
  return Tensor(impl);
}

Tensor Tensor::view(const Shape& new_shape) const {
  Shape resolved = new_shape;
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < resolved.size(); ++i) {
    if (resolved[i] == -1) {
      SRU_CHECK(infer < 0, "view: more than one -1 in shape ", shape_str(new_shape));
      infer = static_cast<int>(i);
    } else {
      SRU_CHECK(resolved[i] >= 0, "view: negative dimension in shape ", shape_str(new_shape));
      known *= resolved[i];
    }
  }
  if (infer >= 0) {
    SRU_CHECK(known > 0 && numel() % known == 0, "view: cannot infer -1 in ", shape_str(new_shape),
              " for ", numel(), " elements");
    resolved[infer] = numel() / known;
  }
  SRU_CHECK(shape_numel(resolved) == numel(), "view: shape ", shape_str(new_shape), " does not match ",
            numel(), " elements of a tensor of shape ", shape_str(shape()));
  Tensor t = detach();
  t.impl_->shape = resolved;
  return t;
}

Tensor Tensor::narrow0(int64_t start, int64_t length) const {
  SRU_CHECK(dim() >= 1, "narrow0 needs a tensor of rank >= 1");
  SRU_CHECK(start >= 0 && length >= 0 && start + length <= shape()[0], "narrow0: rows [", start, ", ",
            start + length, ") out of range for dim 0 of size ", shape()[0]);
  Tensor t = detach();
  t.impl_->offset += start * shape_prod(shape(), 1, dim());
  t.impl_->shape[0] = length;
  return t;
}

Tensor& Tensor::zero_() {
  detail::count_kernel_dispatch("zero_");
  if (device().is_cuda()) {
    cuda::zero(*this);
    return *this;
  }
  std::memset(data_ptr(), 0, nbytes());
  return *this;
}

Tensor& Tensor::fill_(double value) {
  detail::count_kernel_dispatch("fill_");
  if (device().is_cuda()) {
    cuda::fill(*this, value);
    return *this;
  }
  SRU_DISPATCH_ALL(dtype(), "fill_", [&]<typename T>() {
    T* d = data<T>();
    const T v = static_cast<T>(value);
    parallel_for(0, numel(), kParallelGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) d[i] = v;
    });
  });
  return *this;
}

Tensor& Tensor::copy_(const Tensor& src) {
  SRU_CHECK(src.numel() == numel(), "copy_: source ", src.str(), " does not match destination ", str());
  if (src.dtype() != dtype()) {  // a converting copy: one kernel, no temporary
    SRU_CHECK(src.device() == device(), "copy_: converting ", src.str(), " into ", str(), " needs one device");
    detail::count_kernel_dispatch("convert");
    if (device().is_cuda())
      cuda::convert(src, *this);
    else
      convert_into(*this, src);
    return *this;
  }
  // A copy within a device is a kernel; one between host and device (a batch's upload, a value read) is
  // a transfer that a CPU run does not make, so it is not counted (core/kernel_count.h).
  if (device() == src.device()) detail::count_kernel_dispatch("copy_");
  if (device().is_cuda() || src.device().is_cuda()) {
    cuda::copy_bytes(data_ptr(), device(), src.data_ptr(), src.device(), nbytes());
    return *this;
  }
  std::memmove(data_ptr(), src.data_ptr(), nbytes());
  return *this;
}

Tensor& Tensor::add_(const Tensor& other, double alpha) {
  SRU_CHECK(other.numel() == numel() && other.dtype() == dtype(), "add_: ", other.str(),
            " does not match ", str());
  check_same_device(*this, other, "add_");
  detail::count_kernel_dispatch("add_");
  if (device().is_cuda()) {
    cuda::add_scaled(*this, other, alpha);
    return *this;
  }
  // bf16 (gradients that the autograd engine sums): float32 math, rounded once, as the CUDA twin.
  SRU_DISPATCH_FLOATING_BF16(dtype(), "add_", [&]<typename T>() {
    using C = compute_t<T>;
    T* d = data<T>();
    const T* o = other.data<T>();
    const C a = static_cast<C>(alpha);
    parallel_for(0, numel(), kParallelGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) d[i] = T(C(d[i]) + a * C(o[i]));
    });
  });
  return *this;
}

Tensor& Tensor::mul_(double factor) {
  detail::count_kernel_dispatch("mul_");
  if (device().is_cuda()) {
    cuda::scale(*this, factor);
    return *this;
  }
  SRU_DISPATCH_FLOATING(dtype(), "mul_", [&]<typename T>() {
    T* d = data<T>();
    const T f = static_cast<T>(factor);
    parallel_for(0, numel(), kParallelGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) d[i] *= f;
    });
  });
  return *this;
}

Tensor& Tensor::clamp_(double low, double high) {
  SRU_CHECK(low <= high, "clamp_: low (", low, ") must not exceed high (", high, ")");
  detail::count_kernel_dispatch("clamp_");
  if (device().is_cuda()) {
    cuda::clamp(*this, low, high);
    return *this;
  }
  SRU_DISPATCH_FLOATING(dtype(), "clamp_", [&]<typename T>() {
    T* d = data<T>();
    const T lo = static_cast<T>(low), hi = static_cast<T>(high);
    parallel_for(0, numel(), kParallelGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) d[i] = d[i] < lo ? lo : (d[i] > hi ? hi : d[i]);
    });
  });
  return *this;
}

Tensor& Tensor::set_requires_grad(bool on) {
  SRU_CHECK(is_leaf(), "set_requires_grad: only leaf tensors (not results of ops) can be marked");
  SRU_CHECK(!on || is_floating(dtype()), "set_requires_grad: only floating tensors can require grad, got ",
            dtype_name(dtype()));
  checked().requires_grad = on;
  return *this;
}

void Tensor::set_history(std::shared_ptr<autograd::Node> fn, int output_nr) {
  checked().grad_fn = std::move(fn);
  checked().output_nr = output_nr;
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  os << t.str();
  if (!t.defined()) return os;
  const auto values = t.to_vector<double>();
  os << " [";
  const size_t shown = std::min<size_t>(values.size(), 8);
  for (size_t i = 0; i < shown; ++i) os << (i ? ", " : "") << values[i];
  if (values.size() > shown) os << ", ...";
  return os << "]";
}

void check_same_shape(const Tensor& a, const Tensor& b, const char* op) {
  SRU_CHECK(a.shape() == b.shape(), op, ": shapes ", shape_str(a.shape()), " and ", shape_str(b.shape()),
            " differ");
}

void check_same_dtype(const Tensor& a, const Tensor& b, const char* op) {
  SRU_CHECK(a.dtype() == b.dtype(), op, ": dtypes ", dtype_name(a.dtype()), " and ", dtype_name(b.dtype()),
            " differ");
}

void check_same_device(const Tensor& a, const Tensor& b, const char* op) {
  SRU_CHECK(a.device() == b.device(), op, ": tensors on ", a.device().str(), " and ", b.device().str(),
            "; move them to one device first (Tensor::to)");
}

void check_floating(const Tensor& t, const char* op) {
  SRU_CHECK(is_compute_floating(t.dtype()), op, ": expected a floating tensor (f32 or f64), got ",
            dtype_name(t.dtype()));
}

void check_floating16(const Tensor& t, const char* op) {
  SRU_CHECK(is_compute_floating(t.dtype()) || t.dtype() == DType::BF16, op,
            ": expected a floating tensor (f32, f64 or bf16), got ", dtype_name(t.dtype()));
}

#define SRU_INSTANTIATE(T)                                                                  \
  template Tensor Tensor::from_vector<T>(const std::vector<T>&, const Shape&, DType);      \
  template std::vector<T> Tensor::to_vector<T>() const;                                    \
  template T Tensor::item<T>() const;
SRU_INSTANTIATE(float)
SRU_INSTANTIATE(double)
SRU_INSTANTIATE(int32_t)
SRU_INSTANTIATE(int64_t)
SRU_INSTANTIATE(bf16)
SRU_INSTANTIATE(f16)
#undef SRU_INSTANTIATE

}  // namespace sru
