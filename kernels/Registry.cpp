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

std::vector<std::string> kernelNames(Backend backend) {
  std::vector<std::string> names;
  for (auto &entry : table(backend)) names.push_back(entry.first);
  return names;
}

} // namespace llmc
