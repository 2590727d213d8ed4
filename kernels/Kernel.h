//===- Kernel.h - the kernel registry shared by every backend -------------===//
//
// The exec dialect names kernels by string ("matmul", "layernorm_grad", ...).
// At load time the runtime binds each instruction once: the factory checks
// shapes, dtypes and attributes and returns a Kernel holding everything it
// needs, so a training step only calls run() — no lookups, no allocation.
// CPU and CUDA register the same names (see docs/kernels.md for the contract
// of each name).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_KERNEL_H
#define LLMC_KERNELS_KERNEL_H

#include "kernels/Tensor.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace llmc {

/// Attribute values of one kernel call, by name.
class KernelAttrs {
public:
  void setInt(const std::string &name, int64_t v) { ints_[name] = v; }
  void setFloat(const std::string &name, double v) { floats_[name] = v; }
  void setInts(const std::string &name, std::vector<int64_t> v) { arrays_[name] = std::move(v); }

  bool hasInt(const std::string &name) const { return ints_.count(name) != 0; }
  bool hasFloat(const std::string &name) const { return floats_.count(name) != 0; }
  bool hasInts(const std::string &name) const { return arrays_.count(name) != 0; }
  int64_t getInt(const std::string &name, int64_t fallback = 0) const;
  double getFloat(const std::string &name, double fallback = 0.0) const;
  const std::vector<int64_t> &getInts(const std::string &name) const;

  const std::map<std::string, int64_t> &ints() const { return ints_; }
  const std::map<std::string, double> &floats() const { return floats_; }
  const std::map<std::string, std::vector<int64_t>> &arrays() const { return arrays_; }

private:
  std::map<std::string, int64_t> ints_;
  std::map<std::string, double> floats_;
  std::map<std::string, std::vector<int64_t>> arrays_;
};

/// Everything a kernel call is bound to: its tensors (already placed in the
/// arena) and attributes.
struct KernelArgs {
  std::vector<TensorView> inputs;
  std::vector<TensorView> outputs;
  KernelAttrs attrs;
};

/// Per-step values the runtime passes to every kernel.
struct StepContext {
  int64_t step = 0;       ///< 1-based optimizer step being computed
  void *stream = nullptr; ///< backend stream (cudaStream_t on CUDA)
  /// On CUDA, the step in device memory: a kernel replayed from a CUDA
  /// graph keeps the `step` it was captured with, so kernels that depend on
  /// the step (dropout) read it here when it is set.
  const int64_t *deviceStep = nullptr;
};

/// A kernel bound to its arguments.
class Kernel {
public:
  virtual ~Kernel() = default;
  virtual void run(const StepContext &ctx) = 0;
  /// Called once the parameters hold their final values (the weights
  /// loaded), before the runs that follow. `constantInputs[i]`: input i is
  /// such a parameter, which no run changes (not a buffer the program
  /// writes, such as a layer's weights streamed into a reused slot). A
  /// kernel may derive what it keeps from those inputs then (a repacked
  /// copy of its weights); unprepared, it reads them as bound.
  virtual void prepare(const std::vector<bool> &constantInputs) {}
};

/// Validates `args` and binds them. On bad arguments returns null and sets
/// `error` to a one-line reason naming the operand or attribute.
using KernelFactory = std::unique_ptr<Kernel> (*)(const KernelArgs &args,
                                                  std::string &error);

enum class Backend : uint8_t { CPU = 0, CUDA = 1 };
const char *backendName(Backend backend);

/// Registers a kernel; called from static initialisers in each backend.
bool registerKernel(Backend backend, const char *name, KernelFactory factory);
/// The factory for `name`, or null when the backend has no such kernel.
KernelFactory findKernel(Backend backend, const std::string &name);
/// All registered names for a backend, sorted.
std::vector<std::string> kernelNames(Backend backend);

/// Registered kernels run one after the other, for a fused op a backend
/// has no single kernel for: binds each (name, arguments) part; null with
/// `error` ("<who>: <the part's error>") when one does not bind.
std::unique_ptr<Kernel>
bindSequence(Backend backend, const std::string &who,
             const std::vector<std::pair<std::string, const KernelArgs *>> &parts,
             std::string &error);

} // namespace llmc

/// Registers `Factory` under `NAME` for `BACKEND` at static-initialisation time.
#define LLMC_REGISTER_KERNEL(BACKEND, NAME, FACTORY)                              \
  static const bool llmc_registered_##FACTORY =                                   \
      ::llmc::registerKernel(::llmc::Backend::BACKEND, NAME, FACTORY)

#endif
