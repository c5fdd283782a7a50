// Kernel dispatch shared by the CPU and CUDA kernels, and the one place where operand devices are checked.
//
// SRU_KERNEL(device, name, args...): checks that every defined tensor among the arguments lives on
// `device`, then calls cuda::name(args...) when `device` is a CUDA device and cpu::name(args...)
// otherwise. SRU_KERNEL_IN(ns, device, name, args...) does the same for kernels in ns::cpu / ns::cuda
// (e.g. the optimisers'). Builds without the CUDA backend never reference the CUDA kernels.
//
// Every op reaches its kernels through these macros, so no op can forget the device check: a CPU
// weight with a CUDA input is refused here with both devices named, instead of a kernel reading a
// host pointer and the fault surfacing at some later call. Arguments are visited with visit_tensors:
// scalars and enums need nothing; a struct of tensors passed to a kernel needs an overload of
// visit_tensors(const S&, F) next to its definition (found by argument-dependent lookup); any other
// argument type is a compile error, so a new kind of operand cannot slip past the check.
#pragma once

#include <type_traits>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/kernel_count.h"
#include "core/tensor.h"

namespace sru {

template <typename F>
void visit_tensors(const Tensor& t, F&& f) {
  f(t);
}
template <typename T, typename F>
void visit_tensors(const std::vector<T>& items, F&& f) {
  for (const T& item : items) visit_tensors(item, f);
}

namespace detail {

template <typename>
inline constexpr bool kAlwaysFalse = false;

// Throws unless `actual` equals `expected`; the message names the kernel, the argument (1-based) and
// both devices.
void check_operand_device(Device expected, Device actual, const char* kernel, int argument);

// Calls check_operand_device for every defined tensor inside args (anything with defined() and
// device() that visit_tensors hands over).
template <typename... Args>
void check_operand_devices(Device expected, const char* kernel, const Args&... args) {
  int argument = 0;
  auto check = [&](const auto& arg) {
    using A = std::decay_t<decltype(arg)>;
    ++argument;
    if constexpr (std::is_arithmetic_v<A> || std::is_enum_v<A>) {
      return;
    } else if constexpr (requires { visit_tensors(arg, [](const auto&) {}); }) {
      visit_tensors(arg, [&](const auto& t) {
        if (t.defined()) check_operand_device(expected, t.device(), kernel, argument);
      });
    } else {
      static_assert(kAlwaysFalse<A>, "SRU_KERNEL: an argument type without visit_tensors; add an overload next to "
                                     "its definition so that the device check sees its tensors");
    }
  };
  (check(args), ...);
}

template <typename Cpu, typename Cuda, typename... Args>
decltype(auto) run_kernel(Device device, const char* kernel, const Cpu& cpu_fn, [[maybe_unused]] const Cuda& cuda_fn,
                          Args&&... args) {
  check_operand_devices(device, kernel, args...);
  count_kernel_dispatch(kernel);
#if defined(SRU_WITH_CUDA)
  if (device.is_cuda()) return cuda_fn(std::forward<Args>(args)...);
#endif
  return cpu_fn(std::forward<Args>(args)...);
}

}  // namespace detail

#define SRU_KERNEL_IN(NS, DEVICE, NAME, ...)                                                                \
  ::sru::detail::run_kernel(                                                                                \
      (DEVICE), #NAME,                                                                                      \
      [](auto&&... sru_args_) -> decltype(auto) { return NS::cpu::NAME(std::forward<decltype(sru_args_)>(sru_args_)...); }, \
      [](auto&&... sru_args_) -> decltype(auto) { return NS::cuda::NAME(std::forward<decltype(sru_args_)>(sru_args_)...); }, \
      __VA_ARGS__)
#define SRU_KERNEL(DEVICE, NAME, ...) SRU_KERNEL_IN(::sru, DEVICE, NAME, __VA_ARGS__)

// Calls fn(const I* data) with the data of an index tensor (i64 or i32; callers check the dtype).
template <typename F>
void with_index_data(const Tensor& indices, const F& fn) {
  if (indices.dtype() == DType::I64) fn(indices.data<int64_t>());
  else fn(indices.data<int32_t>());
}

}  // namespace sru
