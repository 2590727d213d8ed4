//===- VerifyCollectives.cpp - every rank meets its peers -----------------===//
//
// A collective completes only when every member of its group calls it with
// the same operation and sizes; a transfer only when its receive is posted.
// The lowered programs say exactly what each rank will call, so the
// compiler can check this for the whole mesh instead of discovering a hang
// at run time: per program kind, per group, the members' sequences must be
// equal; per ordered pair of ranks, sends and receives must pair up.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "runtime/Mesh.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/TypeSwitch.h"

#include <map>
#include <sstream>

namespace llmc {
#define GEN_PASS_DEF_VERIFYCOLLECTIVES
#include "passes/Passes.h.inc"
} // namespace llmc

using namespace mlir;
using namespace llmc;

namespace {

/// One collective call as the runtime will make it.
struct Call {
  std::string op, dtype, reduction;
  int64_t elements = 0, root = 0;
  Operation *where = nullptr;

  bool operator==(const Call &o) const {
    return op == o.op && dtype == o.dtype && reduction == o.reduction &&
           elements == o.elements && root == o.root;
  }
  std::string describe() const {
    std::string text;
    llvm::raw_string_ostream os(text);
    os << op << " of " << elements << " x " << dtype;
    if (op == "all_reduce" || op == "reduce_scatter" || op == "reduce")
      os << " (" << reduction << ")";
    if (op == "broadcast" || op == "reduce")
      os << " root " << root;
    return text;
  }
};

/// One point-to-point transfer between two ranks.
struct Transfer {
  int64_t tag = 0, bytes = 0;
  Operation *where = nullptr;
  bool operator==(const Transfer &o) const { return tag == o.tag && bytes == o.bytes; }
};

std::string typeName(Type t) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << t;
  return text;
}

std::string axesName(const std::vector<std::string> &axes) {
  std::string text = "[";
  for (size_t i = 0; i < axes.size(); ++i)
    text += (i ? ", " : "") + axes[i];
  return text + "]";
}

std::string locationOf(Operation *op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  op->getLoc().print(os);
  return text;
}

struct VerifyCollectivesPass : llmc::impl::VerifyCollectivesBase<VerifyCollectivesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    Mesh mesh;
    if (auto sizes = module->getAttrOfType<DictionaryAttr>(exec::kMeshAttr)) {
      auto order = module->getAttrOfType<ArrayAttr>(exec::kMeshAxesAttr);
      if (order) {
        for (StringRef axis : order.getAsValueRange<StringAttr>())
          if (auto size = sizes.getAs<IntegerAttr>(axis))
            mesh.push_back({axis.str(), static_cast<int>(size.getInt())});
      } else {
        for (NamedAttribute axis : sizes)
          mesh.push_back({axis.getName().str(),
                          static_cast<int>(cast<IntegerAttr>(axis.getValue()).getInt())});
      }
    }
    int world = 1;
    for (auto &[name, size] : mesh)
      world *= size;

    // Per program kind: the program each rank runs.
    std::map<std::string, std::vector<exec::ProgramOp>> byKind;
    for (auto program : module.getOps<exec::ProgramOp>()) {
      std::vector<exec::ProgramOp> &ranks = byKind[program.getKind().str()];
      ranks.resize(world);
      std::vector<int64_t> runs;
      if (auto list = program->getAttrOfType<DenseI64ArrayAttr>("exec.ranks"))
        runs.assign(list.asArrayRef().begin(), list.asArrayRef().end());
      else
        for (int r = 0; r < world; ++r)
          runs.push_back(r);
      for (int64_t r : runs) {
        if (r < 0 || r >= world) {
          program.emitError() << "verify-collectives: exec.ranks names rank " << r
                              << ", outside the mesh of " << world << " ranks";
          return signalPassFailure();
        }
        if (ranks[r]) {
          program.emitError() << "verify-collectives: rank " << r << " has two '"
                              << program.getKind() << "' programs (@" << ranks[r].getSymName()
                              << " and @" << program.getSymName() << ")";
          return signalPassFailure();
        }
        ranks[r] = program;
      }
    }
    for (auto &[kind, programs] : byKind)
      if (failed(verifyKind(kind, programs, mesh)))
        return signalPassFailure();
  }

  LogicalResult verifyKind(StringRef kind, const std::vector<exec::ProgramOp> &programs,
                           const Mesh &mesh) {
    int world = static_cast<int>(programs.size());
    for (int r = 0; r < world; ++r)
      if (!programs[r]) {
        exec::ProgramOp some = *llvm::find_if(programs, [](exec::ProgramOp p) { return !!p; });
        return some.emitError() << "verify-collectives: rank " << r << " has no '" << kind
                                << "' program, so its peers would wait for it forever";
      }

    // Each rank's calls, per group (axes in mesh order), and its transfers
    // per (from, to) pair.
    std::vector<std::map<std::vector<std::string>, std::vector<Call>>> calls(world);
    std::map<std::pair<int, int>, std::vector<Transfer>> sends, recvs;
    for (int r = 0; r < world; ++r) {
      exec::ProgramOp program = programs[r];
      WalkResult result = program.walk([&](Operation *op) -> WalkResult {
        if (isa<exec::SendOp, exec::RecvOp>(op))
          return collectTransfer(op, r, mesh, sends, recvs);
        std::optional<std::pair<std::vector<std::string>, Call>> call = collectiveOf(op, mesh);
        if (call)
          calls[r][call->first].push_back(call->second);
        return WalkResult::advance();
      });
      if (result.wasInterrupted())
        return failure();
    }

    for (int r = 0; r < world; ++r)
      for (auto &[axes, mine] : calls[r]) {
        // The group's first member (position 0) is the reference.
        auto [position, size] = groupPosition(mesh, r, axes);
        if (position == 0)
          continue;
        int first = firstMember(mesh, r, axes);
        const std::vector<Call> &theirs = calls[first][axes];
        size_t n = std::min(mine.size(), theirs.size());
        for (size_t i = 0; i < n; ++i)
          if (!(mine[i] == theirs[i]))
            return mismatch(kind, axes, first, r, i, theirs[i], mine[i]);
        if (mine.size() != theirs.size()) {
          bool firstLonger = theirs.size() > mine.size();
          const Call &extra = firstLonger ? theirs[n] : mine[n];
          return extra.where->emitError()
                 << "verify-collectives: program '" << kind << "': ranks " << first << " and "
                 << r << " issue " << theirs.size() << " and " << mine.size()
                 << " collectives over " << axesName(axes) << "; rank "
                 << (firstLonger ? first : r) << "'s collective #" << n << " ("
                 << extra.describe() << ") has no partner";
        }
      }

    for (auto &[pair, sent] : sends) {
      const std::vector<Transfer> &received = recvs[pair];
      size_t n = std::min(sent.size(), received.size());
      for (size_t i = 0; i < n; ++i)
        if (!(sent[i] == received[i]))
          return sent[i].where->emitError()
                 << "verify-collectives: program '" << kind << "': send #" << i << " from rank "
                 << pair.first << " to rank " << pair.second << " (tag " << sent[i].tag << ", "
                 << sent[i].bytes << " bytes) meets a receive with tag " << received[i].tag
                 << " and " << received[i].bytes << " bytes (at "
                 << locationOf(received[i].where) << ")";
      if (sent.size() > n)
        return sent[n].where->emitError()
               << "verify-collectives: program '" << kind << "': send #" << n << " from rank "
               << pair.first << " to rank " << pair.second << " has no matching receive";
    }
    for (auto &[pair, received] : recvs)
      if (received.size() > sends[pair].size()) {
        const Transfer &t = received[sends[pair].size()];
        return t.where->emitError()
               << "verify-collectives: program '" << kind << "': rank " << pair.second
               << " waits to receive from rank " << pair.first << " (tag " << t.tag
               << ") but nothing is sent";
      }
    return success();
  }

  LogicalResult mismatch(StringRef kind, const std::vector<std::string> &axes, int first, int r,
                         size_t i, const Call &theirs, const Call &mine) {
    return mine.where->emitError()
           << "verify-collectives: program '" << kind << "': ranks " << first << " and " << r
           << " disagree on collective #" << i << " over " << axesName(axes) << ": rank "
           << first << " issues " << theirs.describe() << " (at " << locationOf(theirs.where)
           << "), rank " << r << " issues " << mine.describe();
  }

  /// The rank at position 0 of `rank`'s group over `axes`.
  static int firstMember(const Mesh &mesh, int rank, const std::vector<std::string> &axes) {
    std::vector<int> coords = meshCoordinates(mesh, rank);
    int first = 0;
    for (size_t i = 0; i < mesh.size(); ++i) {
      bool inGroup = llvm::is_contained(axes, mesh[i].first);
      first = first * mesh[i].second + (inGroup ? 0 : coords[i]);
    }
    return first;
  }

  /// The group (axes in mesh order) and call of an exec collective.
  static std::optional<std::pair<std::vector<std::string>, Call>>
  collectiveOf(Operation *op, const Mesh &mesh) {
    auto groupAttr = op->getAttrOfType<ArrayAttr>("group");
    StringRef name = op->getName().stripDialect();
    if (!groupAttr || op->getNumOperands() < 1 || op->getName().getDialectNamespace() != "exec")
      return std::nullopt;
    std::vector<std::string> axes;
    for (auto &[axis, size] : mesh)
      if (llvm::any_of(groupAttr.getAsValueRange<StringAttr>(),
                       [&, &axis = axis](StringRef a) { return a == axis; }))
        axes.push_back(axis);
    auto type = cast<MemRefType>(op->getOperand(0).getType());
    Call call;
    call.op = name.str();
    call.dtype = typeName(type.getElementType());
    call.elements = type.getNumElements();
    if (auto reduction = op->getAttrOfType<StringAttr>("reduction"))
      call.reduction = reduction.getValue().str();
    if (auto root = op->getAttrOfType<IntegerAttr>("root"))
      call.root = root.getInt();
    call.where = op;
    return std::make_pair(axes, call);
  }

  static WalkResult collectTransfer(Operation *op, int rank, const Mesh &mesh,
                                    std::map<std::pair<int, int>, std::vector<Transfer>> &sends,
                                    std::map<std::pair<int, int>, std::vector<Transfer>> &recvs) {
    bool isSend = isa<exec::SendOp>(op);
    StringRef axis = isSend ? cast<exec::SendOp>(op).getAxis() : cast<exec::RecvOp>(op).getAxis();
    int64_t shift = isSend ? cast<exec::SendOp>(op).getShift() : cast<exec::RecvOp>(op).getShift();
    int64_t tag = isSend ? cast<exec::SendOp>(op).getTag() : cast<exec::RecvOp>(op).getTag();
    auto type = cast<MemRefType>(op->getOperand(0).getType());
    std::vector<int> coords = meshCoordinates(mesh, rank);
    int peer = 0;
    bool found = false;
    for (size_t i = 0; i < mesh.size(); ++i) {
      int c = coords[i];
      if (mesh[i].first == axis) {
        found = true;
        c += static_cast<int>(shift);
        if (c < 0 || c >= mesh[i].second) {
          op->emitError() << "verify-collectives: rank " << rank << " would "
                          << (isSend ? "send to" : "receive from") << " coordinate " << c
                          << " of axis '" << axis << "', outside its " << mesh[i].second
                          << " ranks";
          return WalkResult::interrupt();
        }
      }
      peer = peer * mesh[i].second + c;
    }
    if (!found) {
      op->emitError() << "verify-collectives: the mesh has no axis '" << axis << "'";
      return WalkResult::interrupt();
    }
    Transfer t{tag, type.getNumElements() * type.getElementTypeBitWidth() / 8, op};
    if (isSend)
      sends[{rank, peer}].push_back(t);
    else
      recvs[{peer, rank}].push_back(t);
    return WalkResult::advance();
  }
};

} // namespace
