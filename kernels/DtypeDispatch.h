//===- DtypeDispatch.h - a float dtype to its storage type ------*- C++ -*-===//
//
// Every float kernel is a template over its storage type, and every factory
// ends by picking the instantiation for the dtype its contract accepted.
// This is that choice, written once for both backends: each names its own
// storage types (kernels/cpu/Common.h: float and its bf16 / f16 structs;
// kernels/cuda/Common.cuh: float, __nv_bfloat16, __half).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_DTYPEDISPATCH_H
#define LLMC_KERNELS_DTYPEDISPATCH_H

#include "kernels/Kernel.h"

#include <memory>
#include <utility>

namespace llmc {

/// A type passed as a value, to the generic lambdas of dispatchFloat.
template <typename T> struct TypeTag {
  using type = T;
};

/// A backend's storage types of f32, bf16 and f16.
template <typename F32, typename BF16, typename F16> struct FloatStorage {
  using f32 = F32;
  using bf16 = BF16;
  using f16 = F16;
};

/// `fn(TypeTag<T>{})` with T the `Storage` type of the float `dtype`. Other
/// dtypes are f32: the contracts reject them before a factory dispatches.
template <typename Storage, typename Fn> decltype(auto) dispatchFloat(DType dtype, Fn &&fn) {
  switch (dtype) {
  case DType::BF16: return fn(TypeTag<typename Storage::bf16>{});
  case DType::F16: return fn(TypeTag<typename Storage::f16>{});
  default: return fn(TypeTag<typename Storage::f32>{});
  }
}

/// `K<T>(args...)` for the `Storage` type T of the float `dtype`.
template <typename Storage, template <typename> class K, typename... Args>
std::unique_ptr<Kernel> makeFloatKernelFor(DType dtype, Args &&...args) {
  return dispatchFloat<Storage>(dtype, [&](auto tag) -> std::unique_ptr<Kernel> {
    return std::make_unique<K<typename decltype(tag)::type>>(std::forward<Args>(args)...);
  });
}

} // namespace llmc

#endif
