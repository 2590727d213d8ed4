//===- attention_cudnn.cpp - attention on cuDNN's fused flash attention ---===//
//
// cuDNN's graph API has a scaled dot-product attention node (forward and
// backward) that runs FlashAttention-style fused kernels on tensor cores;
// cudnn-frontend (header-only C++) builds its graphs. This is the only file
// that includes cudnn-frontend: it compiles for minutes, and everything
// else sees CudnnSdpa.h.
//
// Layouts: cuDNN's tensors are [B, heads, seq, D] with arbitrary strides, so
// llmc's q [B, T, H, D] is dims {B, H, T, D} with strides {T·row, D, row, 1}
// — `row` H·D, or (H + 2·KV)·D for the column blocks of a packed qkv, read
// in place (no split copies); k and v likewise with KV heads (GQA and MQA:
// cuDNN maps query head h to kv head h / (H / KV), as llmc does); out and
// dout dense. cuDNN's `Stats` output, [B, H, T, 1] fp32, is the natural-log
// log-sum-exp of the scaled scores, m + log Σ exp(scale·q·k − m): llmc's lse
// [B, H, T] by definition (kernels/cpu/attention.cpp), so either kernel's
// forward feeds the other's backward. Causal is cuDNN's top-left diagonal
// with right bound 0 (key j visible to query i iff j <= i). llmc's
// attention has no dropout on probabilities, so none is asked for.
//
// The backward is cuDNN's deterministic algorithm: llmc reruns bit for bit
// (no floating-point atomics anywhere). On Hopper it materialises dP in its
// workspace, B·H·T·S values of 2 bytes, which the compiler plans
// (common/AttentionWorkspace.h); bindCudnnSdpa refuses a call
// whose workspace is smaller than cuDNN asks for.
//
// Plans: one graph per shape (dtype, sizes, strides, scale, causal,
// direction), built with heuristic mode A when the first kernel of that
// shape is bound — never during a CUDA graph capture, which forbids what
// plan building does — and shared by every layer of that shape. A shape
// that fails once is remembered, so its other layers fall back at once.
// The cuDNN handle and the plans live until the process ends, never
// destroyed: cuDNN's descriptors must not be freed after the CUDA context
// is torn down at exit.
//
// cuDNN is loaded at run time (CudnnLibrary.h): compiled with
// NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING, cudnn-frontend calls it through
// `cudnn_frontend::cudnn_dlhandle`, so no binary links cuDNN.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/CudnnSdpa.h"

#include "kernels/cuda/CudnnLibrary.h"

#if LLMC_HAVE_CUDNN_FRONTEND
#include <cudnn_frontend.h>

#include <cstdint>
#include <exception>
#include <map>
#include <mutex>
#include <stdexcept>
#include <unordered_map>
#include <vector>
#endif

namespace llmc::cuda {

#if LLMC_HAVE_CUDNN_FRONTEND
namespace {

namespace fe = cudnn_frontend;
using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

/// The graphs' tensor ids (the variant pack's keys).
enum Uid : int64_t { kQ = 1, kK, kV, kOut, kLse, kDout, kDq, kDk, kDv };

std::string mebibytes(int64_t bytes) {
  return std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB (" + std::to_string(bytes) +
         " bytes)";
}

/// Dims and strides of q, dq (`query`) or k, v, dk, dv as cuDNN reads them.
struct Layout {
  std::vector<int64_t> dims, strides;
};
Layout queryLayout(const CudnnSdpaShape &s) {
  return {{s.b, s.h, s.t, s.d}, {s.t * s.queryRow, s.d, s.queryRow, 1}};
}
Layout keyLayout(const CudnnSdpaShape &s) {
  return {{s.b, s.kv, s.s, s.d}, {s.s * s.keyRow, s.d, s.keyRow, 1}};
}
Layout outLayout(const CudnnSdpaShape &s) {
  return {{s.b, s.h, s.t, s.d}, {s.t * s.h * s.d, s.d, s.h * s.d, 1}};
}
Layout lseLayout(const CudnnSdpaShape &s) { return {{s.b, s.h, s.t, 1}, {s.h * s.t, s.t, 1, 1}}; }

TensorPtr input(fe::graph::Graph &g, const char *name, Uid uid, const Layout &l,
                fe::DataType_t type = fe::DataType_t::NOT_SET) {
  auto attributes =
      fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim(l.dims).set_stride(
          l.strides);
  if (type != fe::DataType_t::NOT_SET) attributes.set_data_type(type);
  return g.tensor(attributes);
}

void markOutput(const TensorPtr &t, Uid uid, const Layout &l,
                fe::DataType_t type = fe::DataType_t::NOT_SET) {
  t->set_output(true).set_uid(uid).set_dim(l.dims).set_stride(l.strides);
  if (type != fe::DataType_t::NOT_SET) t->set_data_type(type);
}

/// Causal: cuDNN's top-left diagonal, keys up to the query's own position.
template <typename Attributes> void maskCausal(Attributes &a, bool causal) {
  if (causal)
    a.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT).set_diagonal_band_right_bound(0);
}

std::shared_ptr<fe::graph::Graph> describe(const CudnnSdpaShape &s) {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(s.bf16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  TensorPtr q = input(*g, "q", kQ, queryLayout(s));
  TensorPtr k = input(*g, "k", kK, keyLayout(s));
  TensorPtr v = input(*g, "v", kV, keyLayout(s));
  if (!s.backward) {
    // The composite graph, as the backward always is: left to choose, the
    // frontend takes its unified SDPA operation for every op without a
    // mask (a separate backend operation, whose Hopper support the headers
    // do not state), and a refused plan is not retried with the other.
    auto options = fe::graph::SDPA_attributes()
                       .set_name("attention")
                       .set_implementation(fe::AttentionImplementation_t::COMPOSITE)
                       .set_generate_stats(true)
                       .set_attn_scale(s.scale);
    maskCausal(options, s.causal);
    auto [out, stats] = g->sdpa(q, k, v, options);
    markOutput(out, kOut, outLayout(s));
    markOutput(stats, kLse, lseLayout(s), fe::DataType_t::FLOAT);
    return g;
  }
  TensorPtr out = input(*g, "out", kOut, outLayout(s));
  TensorPtr dout = input(*g, "dout", kDout, outLayout(s));
  TensorPtr lse = input(*g, "lse", kLse, lseLayout(s), fe::DataType_t::FLOAT);
  auto options = fe::graph::SDPA_backward_attributes()
                     .set_name("attention_grad")
                     .set_attn_scale(s.scale)
                     .set_deterministic_algorithm(true);
  maskCausal(options, s.causal);
  auto [dq, dk, dv] = g->sdpa_backward(q, k, v, out, dout, lse, options);
  markOutput(dq, kDq, queryLayout(s));
  markOutput(dk, kDk, keyLayout(s));
  markOutput(dv, kDv, keyLayout(s));
  return g;
}

/// A shape's plan, or why there is none.
struct Plan {
  std::shared_ptr<fe::graph::Graph> graph;
  int64_t workspace = 0;
  std::string why;
};

/// The process's cuDNN handle and plans (see the file comment for why they
/// are never destroyed).
struct Plans {
  std::mutex mutex;
  bool handleTried = false;
  cudnnHandle_t handle = nullptr;
  std::string handleWhy;
  std::map<CudnnSdpaShape, std::shared_ptr<const Plan>> byShape;
};
Plans &plans() {
  static Plans *p = new Plans;
  return *p;
}

std::string statusText(cudnnStatus_t status) {
  const char *text = fe::detail::get_error_string(status);
  return text ? text : "status " + std::to_string(static_cast<int>(status));
}

/// The handle, created on first use (after cuDNN was loaded); null with the
/// reason when that fails. Called with the mutex held.
cudnnHandle_t handleOf(Plans &p, std::string &why) {
  if (!p.handleTried) {
    p.handleTried = true;
    cudnnStatus_t status = fe::detail::create_handle(&p.handle);
    if (status != CUDNN_STATUS_SUCCESS) {
      p.handle = nullptr;
      p.handleWhy = "cudnnCreate failed: " + statusText(status);
    }
  }
  why = p.handleWhy;
  return p.handle;
}

std::shared_ptr<const Plan> build(cudnnHandle_t handle, const CudnnSdpaShape &s) {
  auto plan = std::make_shared<Plan>();
  try {
    std::shared_ptr<fe::graph::Graph> g = describe(s);
    fe::error_t status = g->build(handle, {fe::HeurMode_t::A});
    if (status.is_good()) status = g->get_workspace_size(plan->workspace);
    if (status.is_good())
      plan->graph = std::move(g);
    else
      plan->why = "cuDNN has no plan for it: " + status.err_msg;
  } catch (const std::exception &e) {
    plan->why = std::string("cuDNN failed while planning it: ") + e.what();
  }
  return plan;
}

/// The plan for `s`, built on the first request; null with `why`.
std::shared_ptr<const Plan> planFor(const CudnnSdpaShape &s, std::string &why) {
  const CudnnLoad &library = processCudnn();
  if (!library.handle) {
    why = "cuDNN is not loaded: " + library.why;
    return nullptr;
  }
  Plans &p = plans();
  std::lock_guard<std::mutex> lock(p.mutex);
  // cudnn-frontend throws when a cuDNN symbol it resolves lazily is
  // missing (a library older than its own calls); that is a refusal too.
  try {
    cudnnHandle_t handle = handleOf(p, why);
    if (!handle) return nullptr;
    std::shared_ptr<const Plan> &plan = p.byShape[s];
    if (!plan) plan = build(handle, s);
    why = plan->why;
    return plan->graph ? plan : nullptr;
  } catch (const std::exception &e) {
    why = std::string("cuDNN failed: ") + e.what();
    return nullptr;
  }
}

bool aligned(const void *p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

class Call final : public CudnnSdpaCall {
public:
  Call(std::shared_ptr<const Plan> plan, const CudnnSdpaShape &s, const CudnnSdpaOperands &o)
      : plan_(std::move(plan)), workspace_(o.workspace) {
    auto pointer = [](const void *p) { return const_cast<void *>(p); };
    pack_ = {{kQ, pointer(o.q)}, {kK, pointer(o.k)}, {kV, pointer(o.v)}, {kLse, o.lse}};
    pack_[kOut] = o.out;
    if (s.backward) {
      pack_[kDout] = pointer(o.dout);
      pack_[kDq] = o.dq;
      pack_[kDk] = o.dk;
      pack_[kDv] = o.dv;
    }
  }

  void run(void *stream) override {
    cudnnHandle_t handle = plans().handle;
    cudnnStatus_t status = fe::detail::set_stream(handle, static_cast<cudaStream_t>(stream));
    if (status != CUDNN_STATUS_SUCCESS)
      throw std::runtime_error("cudnnSetStream failed: " + statusText(status));
    fe::error_t result = plan_->graph->execute(handle, pack_, workspace_);
    if (result.is_bad())
      throw std::runtime_error("cuDNN attention failed to run: " + result.err_msg);
  }

private:
  std::shared_ptr<const Plan> plan_;
  std::unordered_map<int64_t, void *> pack_;
  void *workspace_;
};

} // namespace
#endif

std::unique_ptr<CudnnSdpaCall> bindCudnnSdpa(const CudnnSdpaShape &shape,
                                             const CudnnSdpaOperands &operands,
                                             std::string &why) {
#if !LLMC_HAVE_CUDNN_FRONTEND
  (void)shape, (void)operands;
  why = "this build has no cudnn-frontend headers (run scripts/setup-cudnn-frontend.sh, then "
        "configure again)";
  return nullptr;
#else
  const void *pointers[] = {operands.q,  operands.k,    operands.v,  operands.out,
                            operands.lse, operands.dout, operands.dq, operands.dk,
                            operands.dv,  operands.workspace};
  for (const void *p : pointers)
    if (!aligned(p)) {
      why = "an operand is not 16-byte aligned, as cuDNN needs";
      return nullptr;
    }
  std::shared_ptr<const Plan> plan = planFor(shape, why);
  if (!plan) return nullptr;
  if (plan->workspace > operands.workspaceBytes) {
    why = "cuDNN needs a workspace of " + mebibytes(plan->workspace) + ", the memory plan gave " +
          mebibytes(operands.workspaceBytes);
    return nullptr;
  }
  why.clear();
  return std::make_unique<Call>(std::move(plan), shape, operands);
#endif
}

} // namespace llmc::cuda
