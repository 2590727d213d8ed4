//===- MpiCommunicator.cpp - collectives over MPI ranks -------------------===//

#include "runtime/comm/MpiCommunicator.h"
#include "runtime/comm/CommWatchdog.h"
#include "runtime/comm/IntCounts.h"
#include "runtime/comm/MeshGroup.h"

#include "common/Half.h"
#include "runtime/support/Error.h"

#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <random>
#include <thread>

namespace llmc {

/// The thread support MPI_Init_thread granted. Serialized: an
/// --overlap-comm program calls MPI from its communication thread, the
/// trainer from the main thread between programs, never both at once.
static int threadLevel = MPI_THREAD_SINGLE;

static void initMpi() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized)
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &threadLevel);
  else
    MPI_Query_thread(&threadLevel);
}

bool mpiCallableFromAnyThread() {
  initMpi();
  return threadLevel >= MPI_THREAD_SERIALIZED;
}

int mpiWorldRank() {
  initMpi();
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int mpiWorldSize() {
  initMpi();
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

namespace {

// bf16 reductions: MPI has no bf16 type, so bf16 buffers travel as uint16
// with user-defined operators that add (or max) in fp32.
float bf16(uint16_t v) {
  uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
uint16_t toBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}
void bf16Sum(void *in, void *inout, int *len, MPI_Datatype *) {
  auto *a = static_cast<uint16_t *>(in), *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *len; ++i) b[i] = toBf16(bf16(a[i]) + bf16(b[i]));
}
void bf16Max(void *in, void *inout, int *len, MPI_Datatype *) {
  auto *a = static_cast<uint16_t *>(in), *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *len; ++i) b[i] = toBf16(std::max(bf16(a[i]), bf16(b[i])));
}
// f16 the same way (fp16 training's gradients); an overflowing sum becomes
// inf, which the gradient norm then reports.
void f16Sum(void *in, void *inout, int *len, MPI_Datatype *) {
  auto *a = static_cast<uint16_t *>(in), *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *len; ++i) b[i] = half::fromFloat(half::toFloat(a[i]) + half::toFloat(b[i]));
}
void f16Max(void *in, void *inout, int *len, MPI_Datatype *) {
  auto *a = static_cast<uint16_t *>(in), *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *len; ++i)
    b[i] = half::fromFloat(std::max(half::toFloat(a[i]), half::toFloat(b[i])));
}

MPI_Datatype mpiType(DType t) {
  switch (t) {
  case DType::F32: return MPI_FLOAT;
  case DType::F64: return MPI_DOUBLE;
  case DType::I32: return MPI_INT32_T;
  case DType::I64: return MPI_INT64_T;
  case DType::U8: return MPI_UINT8_T;
  case DType::BF16:
  case DType::F16: return MPI_UINT16_T;
  }
  return MPI_BYTE;
}

class MpiGroup;

class MpiCommunicator final : public Communicator {
public:
  MpiCommunicator(std::vector<std::pair<std::string, int>> mesh, CommOptions options);
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  CommGroup &group(const std::vector<std::string> &axes) override;
  void send(const void *data, size_t bytes, const std::string &axis, int shift, int tag,
            int channel) override;
  void recv(void *data, size_t bytes, const std::string &axis, int shift, int tag,
            int channel) override;
  void completeSends() override;
  void barrier() override {
    guarded(CommLabel{"barrier"}, [] { MPI_Barrier(MPI_COMM_WORLD); });
  }
  std::vector<uint64_t> allGatherWorld(uint64_t value) override {
    std::vector<uint64_t> all(static_cast<size_t>(size_));
    guarded(CommLabel{"start-up exchange"}, [&] {
      MPI_Allgather(&value, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
    });
    return all;
  }

  /// Runs `body` as the named collective: optional debug delay, watchdog.
  template <typename F> void guarded(const CommLabel &what, F &&body);
  MPI_Op op(Reduction r, DType t) const;

private:
  std::vector<std::pair<std::string, int>> mesh_;
  CommOptions options_;
  int rank_ = 0, size_ = 1;
  std::vector<int> coords_;
  std::vector<MPI_Request> pendingSends_; ///< started, not yet known delivered
  std::map<uint32_t, std::unique_ptr<MpiGroup>> groups_; ///< by MeshGroup::mask
  MPI_Op bf16Sum_ = MPI_OP_NULL, bf16Max_ = MPI_OP_NULL, f16Sum_ = MPI_OP_NULL,
         f16Max_ = MPI_OP_NULL;
  std::unique_ptr<CommWatchdog> watchdog_; ///< the collective in flight
  std::mt19937 rng_;
};

class MpiGroup final : public CommGroup {
public:
  MpiGroup(MpiCommunicator &owner, MPI_Comm comm, std::string name)
      : owner_(owner), comm_(comm), name_(std::move(name)) {
    MPI_Comm_size(comm_, &size_);
    MPI_Comm_rank(comm_, &rank_);
  }
  ~MpiGroup() override { MPI_Comm_free(&comm_); }

  int size() const override { return size_; }
  int rank() const override { return rank_; }

  void allReduce(const void *in, void *out, size_t n, DType t, Reduction r) override {
    owner_.guarded(CommLabel{"all_reduce over ", &name_}, [&] {
      forEachIntPiece(n, [&](size_t first, int count) {
        check(MPI_Allreduce(in == out ? MPI_IN_PLACE : at(in, first, t), at(out, first, t), count,
                            mpiType(t), owner_.op(r, t), comm_));
      });
    });
    if (r == Reduction::Mean) divide(out, n, t);
  }
  void allGather(const void *in, void *out, size_t n, DType t) override {
    owner_.guarded(CommLabel{"all_gather over ", &name_}, [&] {
      const int count = intCount(n, "all_gather");
      check(MPI_Allgather(in, count, mpiType(t), out, count, mpiType(t), comm_));
    });
  }
  void reduceScatter(const void *in, void *out, size_t n, DType t, Reduction r) override {
    owner_.guarded(CommLabel{"reduce_scatter over ", &name_}, [&] {
      check(MPI_Reduce_scatter_block(in, out, intCount(n, "reduce_scatter"), mpiType(t),
                                     owner_.op(r, t), comm_));
    });
    if (r == Reduction::Mean) divide(out, n, t);
  }
  void broadcast(void *buffer, size_t n, DType t, int root) override {
    owner_.guarded(CommLabel{"broadcast over ", &name_}, [&] {
      forEachIntPiece(n, [&](size_t first, int count) {
        check(MPI_Bcast(at(buffer, first, t), count, mpiType(t), root, comm_));
      });
    });
  }
  void reduce(const void *in, void *out, size_t n, DType t, Reduction r, int root) override {
    owner_.guarded(CommLabel{"reduce over ", &name_}, [&] {
      bool inPlace = in == out && rank_ == root;
      forEachIntPiece(n, [&](size_t first, int count) {
        check(MPI_Reduce(inPlace ? MPI_IN_PLACE : at(in, first, t), at(out, first, t), count,
                         mpiType(t), owner_.op(r, t), root, comm_));
      });
    });
    if (r == Reduction::Mean && rank_ == root) divide(out, n, t);
  }
  void allToAll(const void *in, void *out, size_t n, DType t) override {
    owner_.guarded(CommLabel{"all_to_all over ", &name_}, [&] {
      const int count = intCount(n, "all_to_all");
      check(MPI_Alltoall(in, count, mpiType(t), out, count, mpiType(t), comm_));
    });
  }

private:
  void check(int status) {
    if (status != MPI_SUCCESS)
      fail("rank ", owner_.rank(), ": MPI error ", status, " in a collective over ", name_);
  }
  /// Element `first` of a buffer of `t`s.
  static void *at(void *data, size_t first, DType t) {
    return static_cast<char *>(data) + first * dtypeSize(t);
  }
  static const void *at(const void *data, size_t first, DType t) {
    return static_cast<const char *>(data) + first * dtypeSize(t);
  }
  /// n as MPI's int count, for a collective whose ranks' pieces interleave.
  int intCount(size_t n, const char *collective) const {
    if (!fitsIntCount(n))
      fail("rank ", owner_.rank(), ": ", collective, " over ", name_, " moves ", n,
           " elements per rank, more than MPI's int count allows (", INT_MAX, ")");
    return static_cast<int>(n);
  }
  void divide(void *data, size_t n, DType t) {
    if (t == DType::F32)
      for (size_t i = 0; i < n; ++i) static_cast<float *>(data)[i] /= static_cast<float>(size_);
    else if (t == DType::F64)
      for (size_t i = 0; i < n; ++i) static_cast<double *>(data)[i] /= size_;
    else if (t == DType::BF16)
      for (size_t i = 0; i < n; ++i) {
        uint16_t &v = static_cast<uint16_t *>(data)[i];
        v = toBf16(bf16(v) / static_cast<float>(size_));
      }
    else if (t == DType::F16)
      for (size_t i = 0; i < n; ++i) {
        uint16_t &v = static_cast<uint16_t *>(data)[i];
        v = half::fromFloat(half::toFloat(v) / static_cast<float>(size_));
      }
    else
      fail("mean reduction of ", dtypeName(t), " is not supported");
  }

  MpiCommunicator &owner_;
  MPI_Comm comm_;
  std::string name_;
  int size_ = 1, rank_ = 0;
};

MpiCommunicator::MpiCommunicator(std::vector<std::pair<std::string, int>> mesh,
                                 CommOptions options)
    : mesh_(std::move(mesh)), options_(options) {
  initMpi();
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  int expected = 1;
  for (auto &axis : mesh_) expected *= axis.second;
  if (expected != size_)
    fail(worldSizeMismatch(mesh_, size_));
  coords_ = meshCoordinates(mesh_, rank_);
  MPI_Op_create(bf16Sum, 1, &bf16Sum_);
  MPI_Op_create(bf16Max, 1, &bf16Max_);
  MPI_Op_create(f16Sum, 1, &f16Sum_);
  MPI_Op_create(f16Max, 1, &f16Max_);
  rng_.seed(static_cast<unsigned>(rank_ * 7919 + 17));
  // A blocked MPI call cannot be interrupted: a stuck collective ends the
  // process, and mpirun, seeing the failed rank, stops the job.
  watchdog_ = std::make_unique<CommWatchdog>(
      rank_, options_.timeoutSeconds, nullptr, [](const std::string &reason) {
        std::fprintf(stderr, "llmc-run: error: %s; aborting\n", reason.c_str());
        std::fflush(stderr);
        std::_Exit(1);
      });
}

MpiCommunicator::~MpiCommunicator() {
  watchdog_.reset();
  groups_.clear();
  MPI_Op_free(&bf16Sum_);
  MPI_Op_free(&bf16Max_);
  MPI_Op_free(&f16Sum_);
  MPI_Op_free(&f16Max_);
  // Unwinding from this rank's error (a bad --weights file on one
  // pipeline stage): MPI_Finalize would wait for peers still blocked on
  // this rank. Leaving without it, after the error is printed, makes
  // mpirun stop the job at once.
  if (std::uncaught_exceptions() > 0 && size_ > 1)
    return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

MPI_Op MpiCommunicator::op(Reduction r, DType t) const {
  if (t == DType::BF16)
    return r == Reduction::Max ? bf16Max_ : bf16Sum_;
  if (t == DType::F16)
    return r == Reduction::Max ? f16Max_ : f16Sum_;
  return r == Reduction::Max ? MPI_MAX : MPI_SUM;
}

template <typename F> void MpiCommunicator::guarded(const CommLabel &what, F &&body) {
  if (options_.debugMaxDelayMs > 0) {
    std::uniform_int_distribution<int> pick(0, options_.debugMaxDelayMs);
    std::this_thread::sleep_for(std::chrono::milliseconds(pick(rng_)));
  }
  watchdog_->begin(what);
  body();
  watchdog_->end();
}

CommGroup &MpiCommunicator::group(const std::vector<std::string> &axes) {
  MeshGroup g = meshGroup(mesh_, coords_, axes, rank_);
  auto it = groups_.find(g.mask);
  if (it != groups_.end()) return *it->second;
  MPI_Comm comm;
  MPI_Comm_split(MPI_COMM_WORLD, g.color, g.position, &comm);
  auto group = std::make_unique<MpiGroup>(*this, comm, g.name);
  CommGroup &ref = *group;
  groups_[g.mask] = std::move(group);
  return ref;
}

// Matched by tag: the channel (an NCCL communicator) changes nothing here.
void MpiCommunicator::send(const void *data, size_t bytes, const std::string &axis, int shift,
                           int tag, int) {
  int dest = meshNeighbour(mesh_, coords_, meshAxis(mesh_, axis, rank_), shift);
  // In pieces MPI can count, received in the order sent (MPI does not
  // overtake messages of one source, tag and communicator).
  guarded(CommLabel{"send to rank ", nullptr, dest}, [&] {
    forEachIntPiece(bytes, [&](size_t first, int count) {
      MPI_Request request;
      MPI_Isend(static_cast<const char *>(data) + first, count, MPI_BYTE, dest, tag, MPI_COMM_WORLD,
                &request);
      pendingSends_.push_back(request);
    });
  });
}

void MpiCommunicator::completeSends() {
  if (pendingSends_.empty())
    return;
  guarded(CommLabel{"completion of the step's sends"}, [&] {
    MPI_Waitall(static_cast<int>(pendingSends_.size()), pendingSends_.data(),
                MPI_STATUSES_IGNORE);
  });
  pendingSends_.clear();
}

void MpiCommunicator::recv(void *data, size_t bytes, const std::string &axis, int shift, int tag,
                           int) {
  int src = meshNeighbour(mesh_, coords_, meshAxis(mesh_, axis, rank_), shift);
  guarded(CommLabel{"recv from rank ", nullptr, src}, [&] {
    forEachIntPiece(bytes, [&](size_t first, int count) {
      MPI_Recv(static_cast<char *>(data) + first, count, MPI_BYTE, src, tag, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
    });
  });
}

} // namespace

std::unique_ptr<Communicator>
makeMpiCommunicator(const std::vector<std::pair<std::string, int>> &mesh,
                    const CommOptions &options) {
  return std::make_unique<MpiCommunicator>(mesh, options);
}

} // namespace llmc
