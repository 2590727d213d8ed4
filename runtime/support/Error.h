//===- Error.h - the runtime's one error type -------------------*- C++ -*-===//
//
// Runtime code reports bad input (a corrupt artifact, a short data file, a
// missing checkpoint tensor) by throwing RuntimeError with a message that
// names what and where; the tools catch it at the top, print one line and
// exit non-zero.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_SUPPORT_ERROR_H
#define LLMC_RUNTIME_SUPPORT_ERROR_H

#include <sstream>
#include <stdexcept>
#include <string>

namespace llmc {

class RuntimeError : public std::runtime_error {
public:
  explicit RuntimeError(const std::string &message) : std::runtime_error(message) {}
};

/// Builds a message from streamable parts and throws it:
/// `fail("data file ", path, ": only ", n, " tokens")`.
template <typename... Parts> [[noreturn]] void fail(const Parts &...parts) {
  std::ostringstream os;
  (os << ... << parts);
  throw RuntimeError(os.str());
}

/// Runs `body`; on an exception returns false with its message in `error`.
/// The entry points the compiler-side tools call (built without exceptions)
/// report failure this way instead of throwing across to them.
template <typename Body> bool catchErrors(std::string &error, Body &&body) {
  try {
    body();
    return true;
  } catch (const std::exception &e) {
    error = e.what();
    return false;
  }
}

} // namespace llmc

#endif
