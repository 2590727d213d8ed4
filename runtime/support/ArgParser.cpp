//===- ArgParser.cpp - command lines of the runtime's tools ---------------===//

#include "runtime/support/ArgParser.h"

#include <algorithm>
#include <cstdlib>

namespace llmc {

ArgParser::Setter ArgParser::integer(int64_t &out) {
  return [&out](const std::string &v) {
    char *end = nullptr;
    long long parsed = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end)
      return false;
    out = parsed;
    return true;
  };
}

bool ArgParser::integerList(const std::string &list, std::vector<int64_t> &out, std::string &bad) {
  for (size_t begin = 0; begin <= list.size();) {
    size_t end = std::min(list.find(',', begin), list.size());
    std::string item = list.substr(begin, end - begin);
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    int64_t value = 0;
    if (!integer(value)(item)) {
      bad = item;
      return false;
    }
    out.push_back(value);
    begin = end + 1;
  }
  return true;
}

ArgParser::Setter ArgParser::number(double &out) {
  return [&out](const std::string &v) {
    char *end = nullptr;
    double parsed = std::strtod(v.c_str(), &end);
    if (v.empty() || *end)
      return false;
    out = parsed;
    return true;
  };
}

ArgParser::Setter ArgParser::text(std::string &out) {
  return [&out](const std::string &v) {
    out = v;
    return true;
  };
}

ArgParser::Setter ArgParser::append(std::vector<std::string> &out) {
  return [&out](const std::string &v) {
    out.push_back(v);
    return true;
  };
}

void ArgParser::flag(const std::string &name, bool &out, bool value) {
  flags_[name] = {&out, value};
}

void ArgParser::option(const std::string &name, Setter set, const std::string &expected) {
  options_[name] = {std::move(set), expected};
}

void ArgParser::retired(const std::string &name, const std::string &message) {
  retired_[name] = message;
}

std::string ArgParser::parse(int argc, char **argv, const std::string &positionalName,
                             std::string &positional) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      help_ = true;
      return "";
    }
    if (auto it = retired_.find(arg); it != retired_.end())
      return it->second;
    if (auto it = flags_.find(arg); it != flags_.end()) {
      *it->second.first = it->second.second;
      continue;
    }
    std::string value;
    bool inlineValue = false;
    if (size_t eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      inlineValue = true;
    }
    if (auto it = options_.find(arg); it != options_.end()) {
      if (!inlineValue) {
        if (i + 1 >= argc)
          return "option " + arg + " needs a value";
        value = argv[++i];
      }
      if (!it->second.set(value))
        return "bad value '" + value + "' for " + arg +
               (it->second.expected.empty() ? "" : " (expected " + it->second.expected + ")");
      continue;
    }
    if (arg.rfind("-", 0) == 0)
      return "unknown option '" + arg + "'";
    if (!positional.empty())
      return "more than one " + positionalName + " given ('" + positional + "', '" + arg + "')";
    positional = arg;
  }
  return "";
}

} // namespace llmc
