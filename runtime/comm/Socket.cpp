//===- Socket.cpp - sockets with deadlines, quiet threads -----------------===//

#include "runtime/comm/Socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <sstream>
#include <thread>

namespace llmc {
namespace net {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string seconds(double s) {
  std::ostringstream os;
  os << s;
  return os.str();
}

void closeFd(int &fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

bool waitFor(int fd, short events, double deadline) {
  while (true) {
    double left = deadline - now();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, static_cast<int>(std::min(1000.0, std::ceil(left * 1000))));
    if (rc > 0) return true;
    if (rc < 0 && errno != EINTR) return true; // let the caller's read/write report it
  }
}

std::string writeAll(int fd, const void *data, size_t n, double deadline) {
  const char *p = static_cast<const char *>(data);
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      p += w;
      n -= static_cast<size_t>(w);
    } else if (w < 0 && errno == EINTR) {
      continue;
    } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!waitFor(fd, POLLOUT, deadline)) return "timed out";
    } else {
      return std::strerror(errno);
    }
  }
  return "";
}

int listenOn(int port, std::string &error) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    error = std::strerror(errno);
    return -1;
  }
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) != 0 ||
      ::listen(fd, SOMAXCONN) != 0) {
    error = std::strerror(errno);
    closeFd(fd);
    return -1;
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

int dial(const std::string &host, int port, double deadline, std::string &error) {
  error = "no attempt was made";
  do {
    addrinfo hints{}, *found = nullptr;
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
    if (rc != 0) {
      error = std::string("cannot resolve '") + host + "': " + ::gai_strerror(rc);
    } else {
      int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      int status = fd < 0 ? errno : 0;
      if (!status && ::connect(fd, found->ai_addr, found->ai_addrlen) != 0) {
        status = errno;
        if (status == EINPROGRESS || status == EINTR) {
          // A silent host must not hold one attempt past the deadline.
          status = ETIMEDOUT;
          if (waitFor(fd, POLLOUT, std::min(deadline, now() + 10))) {
            socklen_t len = sizeof status;
            ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &status, &len);
          }
        }
      }
      ::freeaddrinfo(found);
      if (!status) return fd;
      error = std::strerror(status);
      closeFd(fd);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  } while (now() < deadline);
  return -1;
}

static std::string addressText(const sockaddr_in &addr) {
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &addr.sin_addr, text, sizeof text);
  return text;
}

std::string localAddress(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len);
  return addressText(addr);
}

std::string peerAddress(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof addr;
  ::getpeername(fd, reinterpret_cast<sockaddr *>(&addr), &len);
  return addressText(addr);
}

SignalsBlocked::SignalsBlocked() {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &saved_);
}

SignalsBlocked::~SignalsBlocked() { pthread_sigmask(SIG_SETMASK, &saved_, nullptr); }

} // namespace net
} // namespace llmc
