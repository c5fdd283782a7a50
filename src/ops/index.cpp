// Autograd wrappers of index_select and topk, and the in-place index_copy_ (math and shapes in
// ops/index.h).
#include "ops/index.h"
#include "ops/dispatch.h"

#include "autograd/node.h"

namespace sru {

namespace {

// The checks index_select and index_copy_ make of (dim, index) against `target`, the tensor indexed along
// dim, which their messages call `name` ("x", "dst"); returns dim made non-negative.
int64_t check_dim_and_index(const char* op, const char* name, const Tensor& target, int64_t dim,
                            const Tensor& index) {
  SRU_CHECK(target.dim() >= 1, op, ": ", name, " must have at least one dim, got a 0-d tensor");
  SRU_CHECK(dim >= -target.dim() && dim < target.dim(), op, ": dim ", dim, " out of range for a tensor of rank ",
            target.dim());
  SRU_CHECK(index.dtype() == DType::I64 || index.dtype() == DType::I32, op, ": index must be i64 or i32, got ",
            dtype_name(index.dtype()));
  SRU_CHECK(index.dim() == 1, op, ": index must be 1-d, got shape ", shape_str(index.shape()));
  return dim < 0 ? dim + target.dim() : dim;
}

// The index on target's device: itself, or a CPU index checked on the host (free there, and the error comes
// at the call instead of at the next host wait), then copied (queued, no host wait). Refuses an index on
// another GPU. `error` names the op: index_select_index_error or index_copy_index_error.
Tensor index_on_device_of(const char* op, const char* name, const Tensor& target, int64_t d, const Tensor& index,
                          std::string (*error)(int64_t, int64_t, int64_t, int64_t)) {
  if (index.device() == target.device()) return index;
  SRU_CHECK(index.device().is_cpu(), op, ": index on ", index.device().str(), " and ", name, " on ",
            target.device().str(), ": the index must be on ", name, "'s device or on the CPU");
  check_host_index(index, d, target.size(static_cast<int>(d)), error);
  return index.to(target.device());
}

std::string index_error_message(const char* op, int64_t value, int64_t position, int64_t dim, int64_t size) {
  return detail::concat(op, ": index ", value, " at position ", position, " is out of range for dim ", dim,
                        " of size ", size);
}

}  // namespace

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  const int64_t d = check_dim_and_index("index_select", "x", x, dim, index);
  const Tensor idx = index_on_device_of("index_select", "x", x, d, index, index_select_index_error);
  Shape out_shape = x.shape();
  out_shape[d] = idx.numel();
  Tensor out = Tensor::empty(out_shape, x.dtype(), x.device());
  SRU_KERNEL(x.device(), index_select_forward, x, idx, d, out);
  if (autograd::needs_grad({x})) {
    autograd::record("IndexSelectBackward", {x}, {out},
                     [d, xshape = x.shape(), dtype = x.dtype(), device = x.device(), idx = idx.detach()](
                         const std::vector<Tensor>& g) {
                       Tensor gx = Tensor::zeros(xshape, dtype, device);
                       SRU_KERNEL(device, index_add, g[0], idx, d, gx);
                       return std::vector<Tensor>{gx};
                     });
  }
  return out;
}

TopK topk(const Tensor& x, int64_t k) {
  check_floating(x, "topk");
  SRU_CHECK(x.dim() >= 1, "topk: x must have at least one dim (topk runs over the last), got a 0-d tensor");
  const int64_t C = x.size(-1);
  SRU_CHECK(k >= 1 && k <= C, "topk: k = ", k, " must be in [1, ", C, "] (the size of the last dim of x, shape ",
            shape_str(x.shape()), ")");
  Shape out_shape = x.shape();
  out_shape.back() = k;
  TopK result{Tensor::empty(out_shape, x.dtype(), x.device()), Tensor::empty(out_shape, DType::I64, x.device())};
  SRU_KERNEL(x.device(), topk_forward, x, k, result.values, result.indices);
  if (autograd::needs_grad({x})) {
    // Only the values carry a gradient; the indices stay a plain integer tensor.
    autograd::record("TopKBackward", {x}, {result.values},
                     [xshape = x.shape(), dtype = x.dtype(), device = x.device(),
                      indices = result.indices.detach()](const std::vector<Tensor>& g) {
                       Tensor gx = Tensor::zeros(xshape, dtype, device);
                       SRU_KERNEL(device, topk_backward, g[0], indices, gx);
                       return std::vector<Tensor>{gx};
                     });
  }
  return result;
}

Tensor& index_copy_(Tensor& dst, int64_t dim, const Tensor& index, const Tensor& src) {
  SRU_CHECK(dst.defined() && src.defined() && index.defined(), "index_copy_: dst, index and src must be defined");
  const int64_t d = check_dim_and_index("index_copy_", "dst", dst, dim, index);
  // Not differentiable: the op is for decoding caches, which carry no history.
  SRU_CHECK(!dst.requires_grad(), "index_copy_: dst requires grad; index_copy_ records no autograd history (it "
                                  "writes decoding caches): pass a tensor that does not require grad");
  SRU_CHECK(!autograd::needs_grad({src}), "index_copy_: src requires grad and grad mode is on; index_copy_ records no "
                                          "autograd history (it writes decoding caches): detach src or use "
                                          "autograd::NoGradGuard");
  check_same_dtype(dst, src, "index_copy_");
  check_same_device(dst, src, "index_copy_");
  Shape expected = dst.shape();
  expected[d] = index.numel();
  SRU_CHECK(src.shape() == expected, "index_copy_: src must be dst's shape with size(", d, ") = index.numel() = ",
            index.numel(), ", i.e. ", shape_str(expected), ", got ", shape_str(src.shape()), " (dst ",
            shape_str(dst.shape()), ")");
  SRU_CHECK(src.numel() == 0 || !src.shares_storage(dst), "index_copy_: src shares dst's storage; pass a copy");
  const Tensor idx = index_on_device_of("index_copy_", "dst", dst, d, index, index_copy_index_error);
  SRU_KERNEL(dst.device(), index_copy_forward, dst, idx, d, src);
  return dst;
}

void check_host_index(const Tensor& index, int64_t dim, int64_t size,
                      std::string (*error)(int64_t, int64_t, int64_t, int64_t)) {
  const int64_t m = index.numel();
  with_index_data(index, [&](const auto* idx) {
    for (int64_t i = 0; i < m; ++i) {
      const int64_t v = static_cast<int64_t>(idx[i]);
      SRU_CHECK(v >= 0 && v < size, error(v, i, dim, size));
    }
  });
}

std::string index_select_index_error(int64_t value, int64_t position, int64_t dim, int64_t size) {
  return index_error_message("index_select", value, position, dim, size);
}

std::string index_copy_index_error(int64_t value, int64_t position, int64_t dim, int64_t size) {
  return index_error_message("index_copy_", value, position, dim, size);
}

}  // namespace sru
