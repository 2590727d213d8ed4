//===- TransferChannel.h - streams and channels of a program ----*- C++ -*-===//
//
// A program's instructions run on numbered streams: kernels on stream 0,
// collectives on stream 1. Pipeline sends and receives travel on channels,
// each with a stream (and, under NCCL, a communicator) of its own, because
// an NCCL send blocks its stream until the peer posts the matching receive,
// the n-th send from one rank to another pairs with the n-th receive there
// per communicator, and one communicator's operations run in issue order.
//
// A transfer's channel is its direction — downstream to a later stage
// (activations; an interleaved schedule's gradient wrapping from the first
// stage to the last) or upstream to an earlier one (gradients; the wrapping
// activation; a tied embedding's gradient) — and its link: between
// neighbouring stages, by the parity of the lower of the two, or a far link
// (the first and last stage of more than two). Both ends compute the same
// channel, a send waiting in one direction never holds up a transfer in the
// other, and every stream of a rank only sends or only receives, to one
// peer: stage s sends downstream to s + 1 on its own parity's channel and
// receives from s - 1 on the other, as in an odd-even exchange
// (docs/cuda.md, "Pipeline transfers").
//
// Channel 0 is the collectives' communicator on stream 1: what artifacts
// before schema 1.7 used for every transfer, and still valid.
//
// The compiler assigns channels and streams; the runtime's communicators
// and execution devices honour them.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMMON_TRANSFERCHANNEL_H
#define LLMC_COMMON_TRANSFERCHANNEL_H

#include <cstdint>

namespace llmc {

inline constexpr int kComputeStream = 0;
inline constexpr int kCollectiveStream = 1;

/// Pipeline transfer channels (the artifact's Instruction.channel).
enum TransferChannel : int32_t {
  kSharedChannel = 0,  ///< the collectives' communicator and stream
  kDownstreamEven = 1, ///< to the next stage, the lower stage even
  kDownstreamOdd = 2,  ///< to the next stage, the lower stage odd
  kUpstreamEven = 3,   ///< to the previous stage, the lower stage even
  kUpstreamOdd = 4,    ///< to the previous stage, the lower stage odd
  kDownstreamFar = 5,  ///< to a later stage further away (first to last)
  kUpstreamFar = 6,    ///< to an earlier stage further away (last to first)
};
inline constexpr int kTransferChannels = 7;

/// Copies between device and host memory (offloaded optimizer state,
/// activations and weights) run on a stream of their own, so a copy issued
/// a layer ahead overlaps the compute between it and its reader.
inline constexpr int kCopyStream = 2 + kTransferChannels - 1;

/// Streams a program may use: compute, collectives, one per channel > 0,
/// copies.
inline constexpr int kMaxStreams = kCopyStream + 1;

/// The stream a channel's transfers run on.
constexpr int streamOfChannel(int channel) {
  return channel == kSharedChannel ? kCollectiveStream : kCollectiveStream + channel;
}

/// The channel of a send (`send`) or receive of pipeline stage `stage`
/// shifted `shift` stages along the pipeline (a receive's shift points
/// back at its sender).
constexpr int channelOfTransfer(bool send, int64_t stage, int64_t shift) {
  bool downstream = send ? shift > 0 : shift < 0;
  if (shift != 1 && shift != -1)
    return downstream ? kDownstreamFar : kUpstreamFar;
  int64_t lower = shift > 0 ? stage : stage + shift;
  bool odd = ((lower % 2) + 2) % 2 != 0;
  return (downstream ? kDownstreamEven : kUpstreamEven) + (odd ? 1 : 0);
}

/// Whether `channel` can carry a transfer on a pipeline of `stages`: two
/// stages have neither an odd lower stage nor a far link.
constexpr bool channelUsedOn(int channel, int64_t stages) {
  return stages > 2 || channel == kDownstreamEven || channel == kUpstreamEven;
}

/// "downstream-even", for messages.
constexpr const char *channelName(int channel) {
  switch (channel) {
  case kDownstreamEven: return "downstream-even";
  case kDownstreamOdd: return "downstream-odd";
  case kUpstreamEven: return "upstream-even";
  case kUpstreamOdd: return "upstream-odd";
  case kDownstreamFar: return "downstream-far";
  case kUpstreamFar: return "upstream-far";
  default: return "shared";
  }
}

} // namespace llmc

#endif
