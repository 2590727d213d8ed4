//===- SingleRank.cpp - the communicator of a one-rank run ----------------===//
//
// Every group has one member: reductions and gathers are copies, and a
// point-to-point transfer has no peer (the compiler never emits one for a
// mesh of size 1, so reaching it is a bug worth a clear error).
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Communicator.h"
#include "runtime/support/Error.h"

#include <cstring>

namespace llmc {

Reduction parseReduction(const std::string &name) {
  if (name == "sum") return Reduction::Sum;
  if (name == "max") return Reduction::Max;
  if (name == "mean") return Reduction::Mean;
  fail("unknown reduction '", name, "'");
}

namespace {

void copy(const void *in, void *out, size_t count, DType dtype) {
  if (in != out)
    std::memmove(out, in, count * dtypeSize(dtype));
}

class SingleGroup final : public CommGroup {
public:
  int size() const override { return 1; }
  int rank() const override { return 0; }
  void allReduce(const void *in, void *out, size_t n, DType t, Reduction) override { copy(in, out, n, t); }
  void allGather(const void *in, void *out, size_t n, DType t) override { copy(in, out, n, t); }
  void reduceScatter(const void *in, void *out, size_t n, DType t, Reduction) override { copy(in, out, n, t); }
  void broadcast(void *, size_t, DType, int) override {}
  void reduce(const void *in, void *out, size_t n, DType t, Reduction, int) override { copy(in, out, n, t); }
  void allToAll(const void *in, void *out, size_t n, DType t) override { copy(in, out, n, t); }
};

class SingleRankCommunicator final : public Communicator {
public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  CommGroup &group(const std::vector<std::string> &) override { return group_; }
  void send(const void *, size_t, const std::string &axis, int, int, int) override {
    fail("send along axis '", axis, "' in a single-rank run");
  }
  void recv(void *, size_t, const std::string &axis, int, int, int) override {
    fail("recv along axis '", axis, "' in a single-rank run");
  }
  void barrier() override {}
  std::vector<uint64_t> allGatherWorld(uint64_t value) override { return {value}; }

private:
  SingleGroup group_;
};

} // namespace

std::unique_ptr<Communicator> makeSingleRankCommunicator() {
  return std::make_unique<SingleRankCommunicator>();
}

} // namespace llmc
