//===- Socket.h - sockets with deadlines, quiet threads ---------*- C++ -*-===//
//
// IPv4 TCP with deadlines: every wait ends at a deadline (seconds on the
// steady clock, see now()), and failures come back as text for an error
// message instead of errno. Writes never raise SIGPIPE. And the helper
// threads of the transport keep out of the way of signals.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_COMM_SOCKET_H
#define LLMC_RUNTIME_COMM_SOCKET_H

#include <signal.h>

#include <cstddef>
#include <string>

namespace llmc {
namespace net {

/// Seconds on the steady clock: deadlines are now() + a timeout.
double now();

/// "3" or "0.5": seconds as a person would write them.
std::string seconds(double s);

void closeFd(int &fd);

/// Waits until `fd` is ready for `events` (poll flags) or in error; false
/// once the deadline passes.
bool waitFor(int fd, short events, double deadline);

/// Writes all of `data`; "" or why it failed ("timed out" at the deadline).
std::string writeAll(int fd, const void *data, size_t n, double deadline);

/// A non-blocking listening socket on all interfaces (port 0: any free
/// port); -1 and `error` on failure.
int listenOn(int port, std::string &error);

/// Connects to host:port, retrying until the deadline (the other side may
/// not listen yet); a non-blocking socket, or -1 with the last reason in
/// `error`.
int dial(const std::string &host, int port, double deadline, std::string &error);

/// The local / remote IPv4 address of a connected socket, as text.
std::string localAddress(int fd);
std::string peerAddress(int fd);

/// Blocks every signal in the calling thread while it lives, so that the
/// threads started meanwhile (ours, Gloo's) inherit that and signals such
/// as Ctrl-C's reach the main thread only.
class SignalsBlocked {
public:
  SignalsBlocked();
  ~SignalsBlocked();

private:
  sigset_t saved_;
};

} // namespace net
} // namespace llmc

#endif
