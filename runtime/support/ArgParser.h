//===- ArgParser.h - command lines of the runtime's tools -------*- C++ -*-===//
//
// llmc-run and llmc-generate link only the runtime (no LLVM, so no
// llvm::cl): this reads their command lines. Options are `--name value` or
// `--name=value`, flags take no value, and one positional argument (the
// artifact) is allowed.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_SUPPORT_ARGPARSER_H
#define LLMC_RUNTIME_SUPPORT_ARGPARSER_H

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace llmc {

class ArgParser {
public:
  /// Stores an option's value; false when the value is malformed.
  using Setter = std::function<bool(const std::string &)>;
  static Setter integer(int64_t &out);
  static Setter number(double &out);
  static Setter text(std::string &out);
  /// Each occurrence adds one value (repeatable options).
  static Setter append(std::vector<std::string> &out);
  /// Reads "1, 2,3" into `out`; false, with the first malformed item in
  /// `bad`, when an item is not an integer.
  static bool integerList(const std::string &list, std::vector<int64_t> &out, std::string &bad);

  /// `--name` sets `out` to `value`.
  void flag(const std::string &name, bool &out, bool value = true);
  /// `--name V`; `expected` ends the message for a malformed V.
  void option(const std::string &name, Setter set, const std::string &expected = "");
  /// A retired spelling, refused with `message`.
  void retired(const std::string &name, const std::string &message);

  /// Reads argv[1..argc); the positional argument, if any, lands in
  /// `positional` (named `positionalName` in the message when there are
  /// two). Returns the first error, or "" (also when -h/--help was seen:
  /// helpRequested() says so, and nothing after it is read).
  std::string parse(int argc, char **argv, const std::string &positionalName,
                    std::string &positional);
  bool helpRequested() const { return help_; }

private:
  struct Option {
    Setter set;
    std::string expected;
  };
  std::map<std::string, Option> options_;
  std::map<std::string, std::pair<bool *, bool>> flags_;
  std::map<std::string, std::string> retired_;
  bool help_ = false;
};

} // namespace llmc

#endif
