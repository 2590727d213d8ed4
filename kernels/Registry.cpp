//===- Registry.cpp - kernel name -> factory, per backend -----------------===//

#include "kernels/Kernel.h"

#include <algorithm>
#include <stdexcept>

namespace llmc {

namespace {
using Table = std::map<std::string, KernelFactory>;
Table &table(Backend backend) {
  static Table tables[2];
  return tables[static_cast<int>(backend)];
}
} // namespace

int64_t KernelAttrs::getInt(const std::string &name, int64_t fallback) const {
  auto it = ints_.find(name);
  return it == ints_.end() ? fallback : it->second;
}

double KernelAttrs::getFloat(const std::string &name, double fallback) const {
  auto it = floats_.find(name);
  return it == floats_.end() ? fallback : it->second;
}

const std::vector<int64_t> &KernelAttrs::getInts(const std::string &name) const {
  static const std::vector<int64_t> empty;
  auto it = arrays_.find(name);
  return it == arrays_.end() ? empty : it->second;
}

const char *backendName(Backend backend) {
  return backend == Backend::CPU ? "cpu" : "cuda";
}

bool registerKernel(Backend backend, const char *name, KernelFactory factory) {
  table(backend)[name] = factory;
  return true;
}

KernelFactory findKernel(Backend backend, const std::string &name) {
  auto &t = table(backend);
  auto it = t.find(name);
  return it == t.end() ? nullptr : it->second;
}

namespace {
class SequenceKernel final : public Kernel {
public:
  explicit SequenceKernel(std::vector<std::unique_ptr<Kernel>> kernels)
      : kernels_(std::move(kernels)) {}
  void run(const StepContext &ctx) override {
    for (const std::unique_ptr<Kernel> &k : kernels_) k->run(ctx);
  }

private:
  std::vector<std::unique_ptr<Kernel>> kernels_;
};
} // namespace

std::unique_ptr<Kernel>
bindSequence(Backend backend, const std::string &who,
             const std::vector<std::pair<std::string, const KernelArgs *>> &parts,
             std::string &error) {
  std::vector<std::unique_ptr<Kernel>> kernels;
  for (const auto &[name, args] : parts) {
    std::string inner;
    KernelFactory factory = findKernel(backend, name);
    std::unique_ptr<Kernel> kernel = factory ? factory(*args, inner) : nullptr;
    if (!kernel) {
      error = who + ": " + (factory ? inner : "no " + name + " kernel");
      return nullptr;
    }
    kernels.push_back(std::move(kernel));
  }
  return std::make_unique<SequenceKernel>(std::move(kernels));
}

std::vector<std::string> kernelNames(Backend backend) {
  std::vector<std::string> names;
  for (auto &entry : table(backend)) names.push_back(entry.first);
  return names;
}

} // namespace llmc
