//===- TcpCollectives.cpp - the TCP communicator's collectives, by Gloo ---===//
//
// Each collective of a group is one call into Gloo with the group's context,
// tagged with its number in the group. What Gloo cannot do is done here:
//  - Reductions Gloo has no type for: bf16 and f16 are widened to fp32,
//    reduced and rounded once; a mean divides the sum.
//  - reduce_scatter: Gloo's current API has none. all_to_all hands chunk c
//    of every member to member c, which adds the chunks up in member order
//    (each rank sends and receives what a ring reduce-scatter would).
//  - Off the root, Gloo's reduce writes its output as scratch: never the
//    caller's buffer.
//  - Gloo's buffers over the caller's memory are created here, so that a
//    notice of a rank that died can release their waits (see
//    TcpCommunicator::Watch); the barrier is a one-byte all-reduce for that.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/TcpCommunicatorImpl.h"

#include "common/Half.h"
#include "runtime/support/Error.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/reduce.h>

#include <cstring>

namespace llmc {
namespace tcp {
namespace {

using ReduceFn = void (*)(void *, const void *, const void *, size_t);

template <typename T> ReduceFn reduceFn(Reduction r) {
  return r == Reduction::Max ? static_cast<ReduceFn>(&gloo::max<T>)
                             : static_cast<ReduceFn>(&gloo::sum<T>);
}

/// 16-bit floats, reduced in fp32.
bool widens(DType t) { return t == DType::BF16 || t == DType::F16; }

/// Calls `f` with a value of the C++ type Gloo reduces `t` as (bf16 and
/// f16: fp32, which they are widened to first).
template <typename F> void withType(DType t, F &&f) {
  switch (t) {
  case DType::F32:
  case DType::BF16:
  case DType::F16: f(float{}); break;
  case DType::F64: f(double{}); break;
  case DType::I32: f(int32_t{}); break;
  case DType::I64: f(int64_t{}); break;
  case DType::U8: f(uint8_t{}); break;
  }
}

/// Grows `buffer` to at least `bytes` (never shrinks: reused across steps).
uint8_t *atLeast(std::vector<uint8_t> &buffer, size_t bytes) {
  if (buffer.size() < bytes) buffer.resize(bytes);
  return buffer.data();
}

} // namespace

template <typename F> void TcpGroup::run(const CommLabel &what, F &&body) {
  owner_.usable(what);
  owner_.debugDelay();
  // Gloo's tag: the collective's number in this group, alike on every
  // member, so that messages of consecutive collectives never mix.
  uint32_t tag = static_cast<uint32_t>(++entered_);
  owner_.guard(what, this, -1, false, [&] { body(tag); });
}

void TcpGroup::checkReduction(const CommLabel &what, DType t, Reduction r) const {
  if (r == Reduction::Mean && t != DType::F32 && t != DType::F64 && !widens(t))
    fail("rank ", owner_.rank(), ": ", what, ": mean reduction of ", dtypeName(t),
         " is not supported");
}

bool TcpGroup::reducesAlone(const CommLabel &what, const void *in, void *out, size_t n, DType t,
                            Reduction r) const {
  checkReduction(what, t, r);
  if (size() != 1 && n != 0) return false;
  if (in != out && n) std::memmove(out, in, n * dtypeSize(t));
  return true;
}

float *TcpGroup::widened(const void *in, size_t n, DType t) {
  if (wide_.size() < n) wide_.resize(n);
  widen(in, wide_.data(), n, t);
  return wide_.data();
}

void TcpGroup::widen(const void *in, float *out, size_t n, DType t) {
  const uint16_t *src = static_cast<const uint16_t *>(in);
  if (t == DType::BF16)
    for (size_t i = 0; i < n; ++i) out[i] = bf16ToFloat(src[i]);
  else
    for (size_t i = 0; i < n; ++i) out[i] = half::toFloat(src[i]);
}

void TcpGroup::finish(const void *work, void *out, size_t n, DType t, Reduction r) const {
  bool mean = r == Reduction::Mean;
  if (widens(t)) {
    const float *w = static_cast<const float *>(work);
    float scale = static_cast<float>(size());
    uint16_t *o = static_cast<uint16_t *>(out);
    for (size_t i = 0; i < n; ++i) {
      float v = mean ? w[i] / scale : w[i];
      o[i] = t == DType::BF16 ? floatToBf16(v) : half::fromFloat(v);
    }
    return;
  }
  if (work != out && n) std::memmove(out, work, n * dtypeSize(t));
  if (!mean) return;
  if (t == DType::F32)
    for (size_t i = 0; i < n; ++i) static_cast<float *>(out)[i] /= static_cast<float>(size());
  else
    for (size_t i = 0; i < n; ++i) static_cast<double *>(out)[i] /= size();
}

void TcpGroup::alltoallBytes(const void *in, void *out, size_t bytes, uint32_t tag) {
  gloo::AlltoallOptions o(context_);
  Buffer input = buffer(in, bytes), output = buffer(out, bytes);
  TcpCommunicator::Watch watch(owner_, {input.get(), output.get()});
  o.setInput<uint8_t>(std::move(input));
  o.setOutput<uint8_t>(std::move(output));
  o.setTag(tag);
  o.setTimeout(owner_.timeout());
  gloo::alltoall(o);
}

void TcpGroup::allReduce(const void *in, void *out, size_t n, DType t, Reduction r) {
  CommLabel what{"all_reduce over ", &info_.name};
  if (reducesAlone(what, in, out, n, t, r)) return;
  run(what, [&](uint32_t tag) {
    // In place on `out` (or on fp32 copies of bf16), which Gloo reads as
    // the input too.
    void *work = widens(t) ? widened(in, n, t) : out;
    if (work == out && in != out) std::memmove(out, in, n * dtypeSize(t));
    withType(t, [&](auto type) {
      using T = decltype(type);
      gloo::AllreduceOptions o(context_);
      Buffer b = buffer(work, n * sizeof(T));
      TcpCommunicator::Watch watch(owner_, {b.get()});
      o.setOutput<T>(std::move(b));
      o.setReduceFunction(reduceFn<T>(r));
      o.setTag(tag);
      o.setTimeout(owner_.timeout());
      gloo::allreduce(o);
    });
    finish(work, out, n, t, r);
  });
}

void TcpGroup::reduceScatter(const void *in, void *out, size_t n, DType t, Reduction r) {
  CommLabel what{"reduce_scatter over ", &info_.name};
  if (reducesAlone(what, in, out, n, t, r)) return;
  run(what, [&](uint32_t tag) {
    size_t p = static_cast<size_t>(size()), bytes = n * dtypeSize(t);
    uint8_t *chunks = atLeast(scratch_, p * bytes);
    alltoallBytes(in, chunks, p * bytes, tag);
    // Chunk m came from member m: the sum runs in member order.
    if (widens(t)) {
      float *acc = widened(chunks, n, t);
      if (part_.size() < n) part_.resize(n);
      for (size_t m = 1; m < p; ++m) {
        widen(chunks + m * bytes, part_.data(), n, t);
        reduceFn<float>(r)(acc, acc, part_.data(), n);
      }
      finish(acc, out, n, t, r);
      return;
    }
    withType(t, [&](auto type) {
      using T = decltype(type);
      for (size_t m = 1; m < p; ++m) reduceFn<T>(r)(chunks, chunks, chunks + m * bytes, n);
    });
    finish(chunks, out, n, t, r);
  });
}

void TcpGroup::reduce(const void *in, void *out, size_t n, DType t, Reduction r, int root) {
  CommLabel what{"reduce over ", &info_.name};
  if (reducesAlone(what, in, out, n, t, r)) return;
  run(what, [&](uint32_t tag) {
    bool isRoot = info_.position == root;
    // Off the root, Gloo uses the output as scratch: never the caller's.
    const void *src = widens(t) ? widened(in, n, t) : in;
    size_t workBytes = n * dtypeSize(widens(t) ? DType::F32 : t);
    void *work = isRoot && !widens(t) ? out : atLeast(scratch_, workBytes);
    withType(t, [&](auto type) {
      using T = decltype(type);
      gloo::ReduceOptions o(context_);
      Buffer input = buffer(src, n * sizeof(T)), output = buffer(work, n * sizeof(T));
      TcpCommunicator::Watch watch(owner_, {input.get(), output.get()});
      o.setInput<T>(std::move(input));
      o.setOutput<T>(std::move(output));
      o.setRoot(root);
      o.setReduceFunction(reduceFn<T>(r));
      o.setTag(tag);
      o.setTimeout(owner_.timeout());
      gloo::reduce(o);
    });
    if (isRoot) finish(work, out, n, t, r);
  });
}

void TcpGroup::broadcast(void *buffer, size_t n, DType t, int root) {
  if (size() == 1 || n == 0) return;
  run(CommLabel{"broadcast over ", &info_.name}, [&](uint32_t tag) {
    gloo::BroadcastOptions o(context_);
    Buffer b = this->buffer(buffer, n * dtypeSize(t));
    TcpCommunicator::Watch watch(owner_, {b.get()});
    o.setOutput<uint8_t>(std::move(b));
    o.setRoot(root);
    o.setTag(tag);
    o.setTimeout(owner_.timeout());
    gloo::broadcast(o);
  });
}

void TcpGroup::allGatherAs(const CommLabel &what, const void *in, void *out, size_t bytes) {
  uint8_t *mine = static_cast<uint8_t *>(out) + bytes * static_cast<size_t>(info_.position);
  if (bytes && mine != in) std::memmove(mine, in, bytes);
  if (size() == 1 || bytes == 0) return;
  run(what, [&](uint32_t tag) {
    gloo::AllgatherOptions o(context_);
    Buffer b = buffer(out, bytes * members_.size()); // in place
    TcpCommunicator::Watch watch(owner_, {b.get()});
    o.setOutput<uint8_t>(std::move(b));
    o.setTag(tag);
    o.setTimeout(owner_.timeout());
    gloo::allgather(o);
  });
}

void TcpGroup::allToAll(const void *in, void *out, size_t n, DType t) {
  size_t bytes = n * dtypeSize(t), all = bytes * members_.size();
  if (size() == 1 || bytes == 0) {
    if (bytes && in != out) std::memmove(out, in, bytes);
    return;
  }
  if (in == out) { // Gloo reads the input while it writes the output
    std::memcpy(atLeast(scratch_, all), in, all);
    in = scratch_.data();
  }
  run(CommLabel{"all_to_all over ", &info_.name},
      [&](uint32_t tag) { alltoallBytes(in, out, all, tag); });
}

void TcpGroup::barrierAs(const CommLabel &what) {
  if (size() == 1) return;
  // A one-byte all-reduce: Gloo's barrier sends from buffers of its own,
  // which no notice could release (see TcpCommunicator::Watch).
  run(what, [&](uint32_t tag) {
    uint8_t token = 0;
    gloo::AllreduceOptions o(context_);
    Buffer b = buffer(&token, 1);
    TcpCommunicator::Watch watch(owner_, {b.get()});
    o.setOutput<uint8_t>(std::move(b));
    o.setReduceFunction(reduceFn<uint8_t>(Reduction::Max));
    o.setTag(tag);
    o.setTimeout(owner_.timeout());
    gloo::allreduce(o);
  });
}

} // namespace tcp
} // namespace llmc
