//===- NcclTransfers.cpp - pipeline transfers as NCCL runs them -----------===//
//
// Channels: a transfer's direction and the parity of its lower stage
// (common/TransferChannel.h).
//
// Ordering: each stage's sends to a peer on a channel are delayed until
// they come in the order of the tags that peer receives on it.
//
// Progress: each stage's program becomes, per stream, a list of steps that
// can block: waits for events, groups of transfers and collectives over the
// pp axis. Everything else never blocks. A group is what the runtime issues
// between ncclGroupStart and ncclGroupEnd (runtime/Executor.cpp): a run of
// sends and receives on one stream with only waits on that stream and
// instructions that do not communicate between them (the waits inside are
// enqueued before the group's transfers start); any other communication
// instruction closes it, since NCCL would take it into the open group.
// Then every stage's streams advance as far as they can, again and again:
//  - a group posts its transfers when it reaches the head of its stream and
//    finishes once the peer has posted the matching transfer of each (the
//    n-th between the two stages on that channel);
//  - a collective over pp finishes once every stage has reached it;
//  - a wait finishes once its event is recorded on another of its streams.
// If some stream can no longer advance before its end, the programs would
// hang on GPUs, and the error says where each stuck stage stands.
//
//===----------------------------------------------------------------------===//

#include "passes/lib/NcclTransfers.h"
#include "common/TransferChannel.h"
#include "dialects/Exec/ExecDialect.h"
#include "passes/lib/EntryPoints.h"

#include "llvm/ADT/DenseSet.h"

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

using namespace mlir;
using namespace llmc;

namespace {

/// One send or receive: the stage it talks to, its channel and its place
/// among the transfers in that direction between the two on the channel.
struct Transfer {
  bool send = false;
  int64_t peer = 0, channel = 0, seq = 0;
  Operation *op = nullptr;
};

/// A point where a stream may block.
struct Step {
  enum Kind { Record, Wait, Transfers, Rendezvous } kind = Record;
  int64_t event = 0;                ///< Record, Wait
  std::vector<Transfer> transfers;  ///< Transfers
  std::vector<int64_t> waits;       ///< Transfers: events waited for first
  std::string group;                ///< Rendezvous: the axes
  int64_t seq = 0;                  ///< Rendezvous: the n-th over `group`
  Operation *op = nullptr;
};

struct StageRun {
  std::map<int64_t, std::vector<Step>> streams;
  std::map<int64_t, size_t> cursor;
  llvm::DenseSet<int64_t> recorded;
};

/// The programs (train_step, eval, ...) the stages hold, by name.
std::set<std::string> programKinds(ArrayRef<ModuleOp> stages) {
  std::set<std::string> kinds;
  for (ModuleOp stage : stages)
    for (auto program : stage.getOps<exec::ProgramOp>()) kinds.insert(program.getSymName().str());
  return kinds;
}

/// The stage a send goes to or a receive comes from, among `n`.
int64_t peerOf(int64_t stage, Operation *transfer, int64_t n) {
  int64_t shift = transfer->getAttrOfType<IntegerAttr>("shift").getInt();
  return ((stage + shift) % n + n) % n;
}

int64_t tagOf(Operation *transfer) { return transfer->getAttrOfType<IntegerAttr>("tag").getInt(); }

int64_t channelOf(Operation *transfer) {
  auto channel = transfer->getAttrOfType<IntegerAttr>("channel");
  return channel ? channel.getInt() : kSharedChannel;
}

/// Whether `op` is a communication instruction (NCCL would take it into
/// an open group).
bool communicates(Operation &op) {
  return !isa<exec::KernelOp, exec::RecordEventOp, exec::WaitEventOp, exec::BufferOp>(op);
}

int64_t streamOf(Operation *op) {
  if (auto record = dyn_cast<exec::RecordEventOp>(op))
    return record.getStream();
  if (auto wait = dyn_cast<exec::WaitEventOp>(op))
    return wait.getStream();
  auto stream = op->getAttrOfType<IntegerAttr>("stream");
  return stream ? stream.getInt() : 0;
}

std::string axesOf(ArrayAttr group) {
  std::string axes;
  for (Attribute a : group)
    axes += (axes.empty() ? "" : ",") + cast<StringAttr>(a).getValue().str();
  return axes;
}

class Simulation {
public:
  explicit Simulation(int64_t stages) : runs(stages) {}

  /// Adds stage `stage`'s program as steps on its streams.
  void addProgram(int64_t stage, exec::ProgramOp program) {
    StageRun &run = runs[stage];
    // Per stream: the open group of transfers, and the waits met since its
    // last transfer (inside the group if another transfer follows).
    std::map<int64_t, bool> groupOpen;
    std::map<int64_t, SmallVector<exec::WaitEventOp>> pendingWaits;
    std::map<std::string, int64_t> collectives;
    auto closeGroup = [&](int64_t stream) {
      for (exec::WaitEventOp wait : pendingWaits[stream])
        run.streams[stream].push_back(waitStep(wait));
      pendingWaits[stream].clear();
      groupOpen[stream] = false;
    };
    for (Operation &op : program.getBody().front()) {
      if (isa<exec::BufferOp>(op))
        continue;
      int64_t stream = streamOf(&op);
      // Communication on one stream closes the groups open on the others.
      if (communicates(op))
        for (auto &[other, open] : groupOpen)
          if (open && other != stream)
            closeGroup(other);
      std::vector<Step> &steps = run.streams[stream];
      bool isSend = isa<exec::SendOp>(op);
      auto wait = dyn_cast<exec::WaitEventOp>(op);
      if (isSend || isa<exec::RecvOp>(op)) {
        if (!groupOpen[stream])
          steps.push_back({Step::Transfers, 0, {}, {}, "", 0, &op});
        for (exec::WaitEventOp w : pendingWaits[stream]) steps.back().waits.push_back(w.getEvent());
        pendingWaits[stream].clear();
        steps.back().transfers.push_back(transfer(stage, &op, isSend));
        groupOpen[stream] = true;
        continue;
      }
      if (wait && groupOpen[stream]) {
        pendingWaits[stream].push_back(wait);
        continue;
      }
      closeGroup(stream);
      if (auto record = dyn_cast<exec::RecordEventOp>(op))
        steps.push_back(
            {Step::Record, static_cast<int64_t>(record.getEvent()), {}, {}, "", 0, &op});
      else if (wait)
        steps.push_back(waitStep(wait));
      else if (auto group = op.getAttrOfType<ArrayAttr>("group"); group && overPipeline(group)) {
        std::string axes = axesOf(group);
        steps.push_back({Step::Rendezvous, 0, {}, {}, axes, collectives[axes]++, &op});
      }
    }
    for (auto &[stream, open] : groupOpen)
      if (open)
        closeGroup(stream);
  }

  /// Advances every stream as far as it goes; true when all finish.
  bool run() {
    for (bool progress = true; progress;) {
      progress = false;
      for (int64_t s = 0; s < static_cast<int64_t>(runs.size()); ++s)
        for (auto &[stream, steps] : runs[s].streams)
          while (runs[s].cursor[stream] < steps.size() && advance(s, steps[runs[s].cursor[stream]]))
            ++runs[s].cursor[stream], progress = true;
    }
    for (StageRun &r : runs)
      for (auto &[stream, steps] : r.streams)
        if (r.cursor[stream] < steps.size())
          return false;
    return true;
  }

  /// Attaches where each stuck stream stands to `diag`.
  void describeStuck(InFlightDiagnostic &diag) {
    for (int64_t s = 0; s < static_cast<int64_t>(runs.size()); ++s)
      for (auto &[stream, steps] : runs[s].streams) {
        size_t at = runs[s].cursor[stream];
        if (at < steps.size())
          diag.attachNote(steps[at].op->getLoc())
              << "stage " << s << ", stream " << stream << ": " << describe(s, steps[at]);
      }
  }

  /// Describes two stages whose transfers would pair different tags, or "".
  std::string tagMismatch() const {
    auto list = [](const std::vector<int64_t> &tags) {
      std::string text;
      for (int64_t t : tags) text += (text.empty() ? "" : ", ") + std::to_string(t);
      return "[" + text + "]";
    };
    std::set<Link> links;
    for (auto &[key, tags] : sentTags) links.insert(key);
    for (auto &[key, tags] : receivedTags) links.insert(key);
    for (const Link &key : links) {
      auto sent = sentTags.find(key), received = receivedTags.find(key);
      std::vector<int64_t> none;
      const auto &a = sent == sentTags.end() ? none : sent->second;
      const auto &b = received == receivedTags.end() ? none : received->second;
      auto [from, to, channel] = key;
      if (a != b)
        return "stage " + std::to_string(from) + " sends tags " + list(a) + " to stage " +
               std::to_string(to) + " on channel " + std::to_string(channel) + " (" +
               channelName(static_cast<int>(channel)) + "), which receives " + list(b) +
               " from it there; NCCL pairs transfers in order";
    }
    return "";
  }

  Operation *firstStuck() {
    for (StageRun &r : runs)
      for (auto &[stream, steps] : r.streams)
        if (r.cursor[stream] < steps.size())
          return steps[r.cursor[stream]].op;
    return nullptr;
  }

private:
  static Step waitStep(exec::WaitEventOp wait) {
    return {Step::Wait, static_cast<int64_t>(wait.getEvent()), {}, {}, "", 0, wait};
  }

  static bool overPipeline(ArrayAttr group) {
    return llvm::any_of(group, [](Attribute a) { return cast<StringAttr>(a).getValue() == "pp"; });
  }

  Transfer transfer(int64_t stage, Operation *op, bool isSend) {
    int64_t peer = peerOf(stage, op, static_cast<int64_t>(runs.size()));
    int64_t from = isSend ? stage : peer, to = isSend ? peer : stage, channel = channelOf(op);
    std::vector<int64_t> &tags = (isSend ? sentTags : receivedTags)[{from, to, channel}];
    tags.push_back(tagOf(op));
    return {isSend, peer, channel, static_cast<int64_t>(tags.size()) - 1, op};
  }

  /// (from, to, channel, n-th, posted by the sender) → posted.
  using Posting = std::tuple<int64_t, int64_t, int64_t, int64_t, bool>;
  Posting posting(int64_t stage, const Transfer &t, bool bySender) const {
    int64_t from = t.send ? stage : t.peer, to = t.send ? t.peer : stage;
    return {from, to, t.channel, t.seq, bySender};
  }

  bool advance(int64_t stage, const Step &step) {
    StageRun &run = runs[stage];
    switch (step.kind) {
    case Step::Record: run.recorded.insert(step.event); return true;
    case Step::Wait: return run.recorded.contains(step.event);
    case Step::Transfers: {
      for (int64_t event : step.waits)
        if (!run.recorded.contains(event))
          return false;
      bool done = true;
      for (const Transfer &t : step.transfers) {
        posted.insert(posting(stage, t, t.send));
        done &= posted.count(posting(stage, t, !t.send)) > 0;
      }
      return done;
    }
    case Step::Rendezvous: {
      std::set<int64_t> &arrived = rendezvous[{step.group, step.seq}];
      arrived.insert(stage);
      return static_cast<int64_t>(arrived.size()) == static_cast<int64_t>(runs.size());
    }
    }
    return false;
  }

  std::string describe(int64_t stage, const Step &step) const {
    switch (step.kind) {
    case Step::Record: return "records an event";
    case Step::Wait: return "waits for event " + std::to_string(step.event) + ", never recorded";
    case Step::Rendezvous:
      return "a collective over [" + step.group + "] that not every stage reaches";
    case Step::Transfers: {
      for (int64_t event : step.waits)
        if (!runs[stage].recorded.contains(event))
          return "a group of transfers waits for event " + std::to_string(event) +
                 ", never recorded";
      std::string what = "a group of transfers waits for";
      for (const Transfer &t : step.transfers) {
        if (posted.count(posting(stage, t, !t.send)))
          continue;
        auto tag = t.op->getAttrOfType<IntegerAttr>("tag").getInt();
        auto action = t.op->getAttrOfType<StringAttr>("exec.action");
        what += std::string(" stage ") + std::to_string(t.peer) + "'s " +
                (t.send ? "receive" : "send") + " of tag " + std::to_string(tag) + " on the " +
                channelName(static_cast<int>(t.channel)) + " channel" +
                (action ? " (" + action.getValue().str() + ")" : "") + ";";
      }
      return what;
    }
    }
    return "";
  }

  /// (from, to, channel): the transfers one stage sends another on one
  /// channel, which NCCL pairs in order.
  using Link = std::tuple<int64_t, int64_t, int64_t>;
  std::vector<StageRun> runs;
  /// The tags of the transfers on each link, in order.
  std::map<Link, std::vector<int64_t>> sentTags, receivedTags;
  std::set<Posting> posted;
  std::map<std::pair<std::string, int64_t>, std::set<int64_t>> rendezvous;
};

} // namespace

LogicalResult llmc::verifyPointToPointProgress(ModuleOp module) {
  SmallVector<ModuleOp> stages = programModules(module);
  bool anyTransfer = false;
  module.walk([&](Operation *op) { anyTransfer |= isa<exec::SendOp, exec::RecvOp>(op); });
  if (!anyTransfer)
    return success();
  // Without stage modules every stage runs the one program.
  int64_t stageCount = static_cast<int64_t>(stages.size());
  if (auto mesh = module->getAttrOfType<DictionaryAttr>("exec.mesh"); mesh && stageCount == 1)
    if (auto pp = mesh.getAs<IntegerAttr>("pp"))
      stageCount = pp.getInt();
  for (const std::string &kind : programKinds(stages)) {
    Simulation simulation(stageCount);
    for (int64_t s = 0; s < stageCount; ++s)
      for (auto program : stages[stages.size() == 1 ? 0 : s].getOps<exec::ProgramOp>())
        if (program.getSymName() == kind)
          simulation.addProgram(s, program);
    if (std::string mismatch = simulation.tagMismatch(); !mismatch.empty())
      return module.emitError() << "program '" << kind << "': " << mismatch;
    if (simulation.run())
      continue;
    InFlightDiagnostic diag = simulation.firstStuck()->emitError()
                              << "program '" << kind
                              << "': the pipeline stages' transfers would hang under NCCL, "
                                 "whose sends wait for their receives (--target cuda runs the "
                                 "schedules whose transfers make progress; docs/cuda.md)";
    simulation.describeStuck(diag);
    return failure();
  }
  return success();
}

namespace {

/// (from, to, channel) → the tags `to` receives from `from` there, in order.
using TagOrders = std::map<std::tuple<int64_t, int64_t, int64_t>, std::vector<int64_t>>;

/// Moves `program`'s sends (stage `stage` of `n`) so that each peer gets
/// them on each channel in `received[{stage, peer, channel}]`'s order: a
/// send that comes early is held and placed right after the send the peer
/// receives before it.
LogicalResult orderSends(exec::ProgramOp program, int64_t stage, int64_t n,
                         const TagOrders &received) {
  using Route = std::pair<int64_t, int64_t>; // peer, channel
  SmallVector<exec::SendOp> sends(program.getOps<exec::SendOp>());
  std::map<Route, size_t> next;                            // place in the peer's order
  std::map<Route, std::map<int64_t, exec::SendOp>> held;   // tag → send
  for (exec::SendOp send : sends) {
    Route route{peerOf(stage, send, n), channelOf(send)};
    int64_t tag = send.getTag();
    auto order = received.find({stage, route.first, route.second});
    size_t &at = next[route];
    if (order == received.end() || at >= order->second.size() || order->second[at] != tag) {
      held[route][tag] = send;
      continue;
    }
    Operation *anchor = send;
    for (++at; at < order->second.size() && held[route].count(order->second[at]); ++at) {
      exec::SendOp early = held[route][order->second[at]];
      held[route].erase(order->second[at]);
      early->moveAfter(anchor);
      anchor = early;
    }
  }
  for (auto &[route, sendsLeft] : held)
    if (!sendsLeft.empty())
      return sendsLeft.begin()->second.emitOpError()
             << "stage " << stage << " sends tag " << sendsLeft.begin()->first << " to stage "
             << route.first << " on the " << channelName(static_cast<int>(route.second))
             << " channel, which does not receive it there (or not after what it receives "
                "first)";
  return success();
}

} // namespace

LogicalResult llmc::orderSendsAsReceived(ModuleOp module) {
  SmallVector<ModuleOp> stages = programModules(module);
  if (stages.size() < 2)
    return success(); // one program is every stage: no stage's order to follow
  int64_t n = static_cast<int64_t>(stages.size());
  for (const std::string &kind : programKinds(stages)) {
    TagOrders received;
    for (int64_t p = 0; p < n; ++p)
      for (auto program : stages[p].getOps<exec::ProgramOp>())
        if (program.getSymName() == kind)
          for (exec::RecvOp recv : program.getOps<exec::RecvOp>())
            received[{peerOf(p, recv, n), p, channelOf(recv)}].push_back(recv.getTag());
    for (int64_t s = 0; s < n; ++s)
      for (auto program : stages[s].getOps<exec::ProgramOp>())
        if (program.getSymName() == kind && failed(orderSends(program, s, n, received)))
          return failure();
  }
  return success();
}

void llmc::assignTransferChannels(ModuleOp module) {
  SmallVector<ModuleOp> stages = programModules(module);
  // Without stage modules the one program is every stage: its transfers
  // take the even channels.
  for (auto [stage, stageModule] : llvm::enumerate(stages))
    stageModule.walk([&](Operation *op) {
      if (!isa<exec::SendOp, exec::RecvOp>(op))
        return;
      int64_t shift = op->getAttrOfType<IntegerAttr>("shift").getInt();
      int64_t index = stages.size() > 1 ? static_cast<int64_t>(stage) : 0;
      op->setAttr("channel",
                  IntegerAttr::get(IntegerType::get(op->getContext(), 64),
                                   channelOfTransfer(isa<exec::SendOp>(op), index, shift)));
    });
}
