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

#include "common/Mesh.h"
#include "dialects/Annotations/Annotations.h"
#include "passes/Passes.h"
#include "passes/lib/EntryPoints.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/TypeSwitch.h"

#include <map>
#include <set>
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

/// (from rank, to rank, tag): what a receive matches a send by.
using TransferKey = std::tuple<int, int, int64_t>;

/// One communication call of a rank, in program order.
struct Event {
  enum Kind { Send, Recv, Collective } kind;
  TransferKey transfer;          ///< send / recv
  std::vector<std::string> axes; ///< collective: its group
  int64_t index = 0;             ///< collective: its position among the group's calls
  Operation *where = nullptr;
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
    // Pipeline stages' programs live in nested modules, each with the
    // same mesh.
    SmallVector<ModuleOp> modules = programModules(getOperation());
    ModuleOp module = modules.front();
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
    SmallVector<exec::ProgramOp> all;
    for (ModuleOp m : modules)
      for (auto program : m.getOps<exec::ProgramOp>())
        all.push_back(program);
    for (exec::ProgramOp program : all) {
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

    // Each distinct program's collective calls, per group (axes in mesh
    // order), collected once: ranks running the same program make the same
    // calls, so the work does not grow with the number of ranks.
    using Calls = std::map<std::vector<std::string>, std::vector<Call>>;
    llvm::DenseMap<Operation *, Calls> callsOf;
    llvm::DenseMap<Operation *, std::vector<Event>> collectiveEventsOf;
    llvm::DenseMap<Operation *, SmallVector<Operation *>> transfersOf;
    for (exec::ProgramOp program : programs) {
      if (callsOf.count(program))
        continue;
      Calls &calls = callsOf[program];
      std::vector<Event> &collectiveEvents = collectiveEventsOf[program];
      SmallVector<Operation *> &transfers = transfersOf[program];
      program.walk([&](Operation *op) {
        if (isa<exec::SendOp, exec::RecvOp>(op)) {
          transfers.push_back(op);
          collectiveEvents.push_back({Event::Send, {}, {}, -1, op}); // placeholder
          return;
        }
        if (std::optional<std::pair<std::vector<std::string>, Call>> call = collectiveOf(op, mesh)) {
          std::vector<Call> &list = calls[call->first];
          collectiveEvents.push_back({Event::Collective, {}, call->first,
                                      static_cast<int64_t>(list.size()), op});
          list.push_back(call->second);
        }
      });
    }

    // Per rank, its transfers (their peers depend on the rank) in program
    // order among its collectives.
    std::map<TransferKey, std::vector<Transfer>> sends, recvs;
    std::vector<std::vector<Event>> events(world);
    bool anyTransfer = false;
    for (int r = 0; r < world; ++r) {
      const std::vector<Event> &pattern = collectiveEventsOf[programs[r]];
      if (transfersOf[programs[r]].empty()) {
        events[r] = pattern;
        continue;
      }
      anyTransfer = true;
      for (const Event &e : pattern) {
        if (e.kind == Event::Collective) {
          events[r].push_back(e);
          continue;
        }
        std::optional<TransferKey> key = collectTransfer(e.where, r, mesh, sends, recvs);
        if (!key)
          return failure();
        events[r].push_back(
            {isa<exec::SendOp>(e.where) ? Event::Send : Event::Recv, *key, {}, 0, e.where});
      }
    }

    for (int r = 0; r < world; ++r)
      for (auto &[axes, mine] : callsOf[programs[r]]) {
        // The group's first member (position 0) is the reference.
        auto [position, size] = groupPosition(mesh, r, axes);
        if (position == 0)
          continue;
        int first = firstMember(mesh, r, axes);
        if (programs[first] == programs[r])
          continue; // the same program makes the same calls
        const std::vector<Call> &theirs = callsOf[programs[first]][axes];
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
    for (auto &[key, sent] : sends) {
      auto [from, to, tag] = key;
      const std::vector<Transfer> &received = recvs[key];
      size_t n = std::min(sent.size(), received.size());
      for (size_t i = 0; i < n; ++i)
        if (!(sent[i] == received[i]))
          return sent[i].where->emitError()
                 << "verify-collectives: program '" << kind << "': send #" << i << " from rank "
                 << from << " to rank " << to << " with tag " << tag << " (" << sent[i].bytes
                 << " bytes) meets a receive of " << received[i].bytes << " bytes (at "
                 << locationOf(received[i].where) << ")";
      if (sent.size() > n)
        return sent[n].where->emitError()
               << "verify-collectives: program '" << kind << "': send #" << n << " from rank "
               << from << " to rank " << to << " with tag " << tag
               << " has no matching receive";
    }
    for (auto &[key, received] : recvs)
      if (received.size() > sends[key].size()) {
        auto [from, to, tag] = key;
        const Transfer &t = received[sends[key].size()];
        return t.where->emitError()
               << "verify-collectives: program '" << kind << "': rank " << to
               << " waits to receive from rank " << from << " (tag " << tag
               << ") but nothing is sent";
      }
    // One program on every rank and no transfers: every group's members
    // reach each collective together, so nothing can wait forever.
    if (!anyTransfer && llvm::all_equal(programs))
      return success();
    return simulate(kind, events, mesh);
  }

  /// Runs every rank's communication in program order — sends complete at
  /// once (the runtime sends asynchronously), a receive waits for its send,
  /// a collective for all its group — and fails if some ranks would wait
  /// for each other forever.
  LogicalResult simulate(StringRef kind, const std::vector<std::vector<Event>> &events,
                         const Mesh &mesh) {
    int world = static_cast<int>(events.size());
    std::vector<size_t> pc(world, 0);
    std::vector<bool> arrivedHere(world, false); // counted at its current event
    std::map<TransferKey, int64_t> sent, taken;
    using Instance = std::tuple<std::vector<std::string>, int, int64_t>;
    std::map<Instance, int> arrived;
    auto groupSize = [&](const std::vector<std::string> &axes) {
      int size = 1;
      for (auto &[name, extent] : mesh)
        if (llvm::is_contained(axes, name))
          size *= extent;
      return size;
    };
    for (bool progress = true; progress;) {
      progress = false;
      for (int r = 0; r < world; ++r)
        while (pc[r] < events[r].size()) {
          const Event &e = events[r][pc[r]];
          if (e.kind == Event::Send) {
            ++sent[e.transfer];
          } else if (e.kind == Event::Recv) {
            if (sent[e.transfer] <= taken[e.transfer])
              break;
            ++taken[e.transfer];
          } else {
            // A collective completes once every member of its group has
            // reached it.
            Instance instance{e.axes, firstMember(mesh, r, e.axes), e.index};
            int &count = arrived[instance];
            if (!arrivedHere[r]) {
              arrivedHere[r] = true;
              ++count;
              progress = true;
            }
            if (count < groupSize(e.axes))
              break;
          }
          ++pc[r];
          arrivedHere[r] = false;
          progress = true;
        }
    }
    std::string stuck;
    Operation *first = nullptr;
    for (int r = 0; r < world; ++r)
      if (pc[r] < events[r].size()) {
        const Event &e = events[r][pc[r]];
        if (!first)
          first = e.where;
        stuck += (stuck.empty() ? "" : "; ") + ("rank " + std::to_string(r) + " at " +
                                                e.where->getName().getStringRef().str() + " (" +
                                                locationOf(e.where) + ")");
      }
    if (!first)
      return success();
    return first->emitError() << "verify-collectives: program '" << kind
                              << "' would hang, its ranks waiting for each other: " << stuck;
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

  static std::optional<TransferKey>
  collectTransfer(Operation *op, int rank, const Mesh &mesh,
                  std::map<TransferKey, std::vector<Transfer>> &sends,
                  std::map<TransferKey, std::vector<Transfer>> &recvs) {
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
          return std::nullopt;
        }
      }
      peer = peer * mesh[i].second + c;
    }
    if (!found) {
      op->emitError() << "verify-collectives: the mesh has no axis '" << axis << "'";
      return std::nullopt;
    }
    Transfer t{tag, type.getNumElements() * type.getElementTypeBitWidth() / 8, op};
    TransferKey key = isSend ? TransferKey{rank, peer, tag} : TransferKey{peer, rank, tag};
    (isSend ? sends : recvs)[key].push_back(t);
    return key;
  }
};

} // namespace
