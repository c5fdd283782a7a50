// Tensor: a contiguous row-major n-d array (shape, dtype, device) over shared Storage, plus the
// autograd fields (requires_grad, grad, the graph node that produced it). Tensor is a cheap handle
// (shared_ptr); copies alias the same data. Methods here never record autograd history: the
// differentiable operations are the free functions in src/ops.
#pragma once

#include <iosfwd>
#include <memory>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/rng.h"
#include "core/shape.h"
#include "core/storage.h"

namespace sru {

namespace autograd {
class Node;
}

class Tensor;

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  int64_t offset = 0;  // in elements, for zero-copy views
  Shape shape;
  DType dtype = DType::F32;
  bool requires_grad = false;  // leaves only; a non-leaf requires grad iff it has a grad_fn
  std::shared_ptr<TensorImpl> grad;
  std::shared_ptr<autograd::Node> grad_fn;
  int output_nr = 0;                                // which output of grad_fn this is
  std::weak_ptr<autograd::Node> grad_accumulator;  // leaves: owned by the graphs that use them
  // A parameter laid out in flat storage (nn/flat_parameters.h): its place in the flat gradient buffer.
  // Backward writes the parameter's first gradient of a pass there (autograd::gradient_destination) and
  // .grad becomes this view; undefined for every other tensor.
  std::shared_ptr<TensorImpl> grad_home;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- factories (uninitialised, constant, from data, random) ----
  static Tensor empty(const Shape& shape, DType dtype = DType::F32, Device device = Device::cpu());
  static Tensor zeros(const Shape& shape, DType dtype = DType::F32, Device device = Device::cpu());
  static Tensor ones(const Shape& shape, DType dtype = DType::F32, Device device = Device::cpu());
  static Tensor full(const Shape& shape, double value, DType dtype = DType::F32, Device device = Device::cpu());
  static Tensor scalar(double value, DType dtype = DType::F32) { return full({}, value, dtype); }
  static Tensor arange(int64_t n, DType dtype = DType::I64);
  // Copies `values` (converted to dtype) into a new tensor of `shape` (numel must match).
  template <typename T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& shape, DType dtype = dtype_of<T>::value);
  // Uniform in [low, high) and standard normal (Box-Muller), from Philox: same seed, same values.
  static Tensor uniform(const Shape& shape, double low, double high, DType dtype = DType::F32,
                        Generator& gen = default_generator());
  static Tensor randn(const Shape& shape, DType dtype = DType::F32, Generator& gen = default_generator());

  // ---- properties ----
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return checked().shape; }
  int dim() const { return static_cast<int>(shape().size()); }
  int64_t size(int d) const;  // negative d counts from the end
  int64_t numel() const { return shape_numel(shape()); }
  DType dtype() const { return checked().dtype; }
  Device device() const { return checked().storage->device(); }
  size_t nbytes() const { return numel() * dtype_size(dtype()); }
  std::string str() const;  // "Tensor(f32, (2, 3))"

  // ---- raw data ----
  void* data_ptr() const;
  template <typename T>
  T* data() const {
    SRU_CHECK(dtype() == dtype_of<T>::value, "tensor of dtype ", dtype_name(dtype()),
              " accessed as ", dtype_name(dtype_of<T>::value));
    return static_cast<T*>(data_ptr());
  }
  template <typename T>
  std::vector<T> to_vector() const;  // converts element type
  template <typename T>
  T item() const;                    // the single element, converted
  bool shares_storage(const Tensor& other) const { return checked().storage == other.checked().storage; }
  // Whether both begin at the same element of the same storage (two handles of one place).
  bool same_data(const Tensor& other) const { return shares_storage(other) && checked().offset == other.checked().offset; }
  // Whether this tensor spans its whole storage (no view of a larger one).
  bool is_whole() const { return checked().offset == 0 && nbytes() == checked().storage->nbytes(); }
  // Whether this tensor is defined and of `shape`, `dtype` and on `device` (a buffer that can take a result).
  bool matches(const Shape& shape, DType dtype, Device device) const {
    return defined() && this->shape() == shape && this->dtype() == dtype && this->device() == device;
  }

  // ---- copies and zero-copy views (no autograd history) ----
  Tensor clone() const;                      // deep copy, no grad history
  Tensor to(DType dtype) const;              // converted copy (or *this when already dtype)
  Tensor to(Device device) const;            // copy on `device` (or *this when already there)
  // Moves this tensor's data to `device` in place: every handle of it (a module's parameter member,
  // its entry in the module's list) follows. Its gradient is dropped. For whole tensors, not views.
  Tensor& to_(Device device);
  // Exchanges the data of two tensors of one shape, dtype and device, in place: every handle of either
  // follows, as with to_. Whole tensors swap their storage (no copy); a view (a parameter in flat
  // storage) has its values exchanged through a temporary instead (three copies). Gradients stay.
  void swap_data_(Tensor& other);
  Tensor detach() const;                     // same data, no history, requires_grad false
  Tensor view(const Shape& shape) const;     // same data, new shape (one dim may be -1)
  Tensor narrow0(int64_t start, int64_t length) const;  // rows [start, start+length) of dim 0

  // ---- in-place updates, for optimisers and initialisers (not recorded by autograd) ----
  Tensor& zero_();
  Tensor& fill_(double value);
  // Same numel; another dtype converts each value (as PyTorch's copy_; within one device).
  Tensor& copy_(const Tensor& src);
  Tensor& add_(const Tensor& other, double alpha = 1.0);  // this += alpha * other (same numel)
  Tensor& mul_(double factor);
  Tensor& clamp_(double low, double high);  // each element into [low, high] (floating tensors)

  // ---- autograd fields ----
  bool requires_grad() const { return checked().requires_grad || checked().grad_fn != nullptr; }
  Tensor& set_requires_grad(bool on);  // leaves only
  bool is_leaf() const { return checked().grad_fn == nullptr; }
  Tensor grad() const { return Tensor(checked().grad); }
  void set_grad(const Tensor& g) { checked().grad = g.impl_; }
  const std::shared_ptr<autograd::Node>& grad_fn() const { return checked().grad_fn; }
  int output_nr() const { return checked().output_nr; }
  void set_history(std::shared_ptr<autograd::Node> fn, int output_nr);

  const std::shared_ptr<TensorImpl>& impl() const { return impl_; }

 private:
  TensorImpl& checked() const {
    SRU_CHECK(impl_ != nullptr, "use of an undefined tensor");
    return *impl_;
  }
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// Throws naming `op` unless the tensors have equal shapes / dtypes / devices.
void check_same_shape(const Tensor& a, const Tensor& b, const char* op);
void check_same_dtype(const Tensor& a, const Tensor& b, const char* op);
void check_same_device(const Tensor& a, const Tensor& b, const char* op);
void check_floating(const Tensor& t, const char* op);
// f32, f64 or bf16: the operand check of the ops whose kernels also take bfloat16 storage.
void check_floating16(const Tensor& t, const char* op);

}  // namespace sru
