//===- Json.cpp - a small JSON value for headers and state files ----------===//

#include "runtime/support/Json.h"
#include "runtime/support/Error.h"
#include "runtime/support/Unicode.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_set>

namespace llmc::json {

bool Value::asBool(const std::string &what) const {
  if (kind_ != Kind::Bool) fail(what, " must be a boolean");
  return bool_;
}

int64_t Value::asInt(const std::string &what) const {
  if (kind_ == Kind::Int) return int_;
  if (kind_ == Kind::Double && std::floor(double_) == double_) return static_cast<int64_t>(double_);
  fail(what, " must be an integer");
}

double Value::asDouble(const std::string &what) const {
  if (kind_ == Kind::Int) return static_cast<double>(int_);
  if (kind_ == Kind::Double) return double_;
  fail(what, " must be a number");
}

const std::string &Value::asString(const std::string &what) const {
  if (kind_ != Kind::String) fail(what, " must be a string");
  return string_;
}

const std::vector<Value> &Value::asArray(const std::string &what) const {
  if (kind_ != Kind::Array) fail(what, " must be an array");
  return items_;
}

void Value::set(const std::string &key, Value v) {
  kind_ = Kind::Object;
  for (auto &m : members_)
    if (m.first == key) {
      m.second = std::move(v);
      return;
    }
  members_.emplace_back(key, std::move(v));
}

void Value::append(std::string key, Value v) {
  kind_ = Kind::Object;
  members_.emplace_back(std::move(key), std::move(v));
}

const Value *Value::find(const std::string &key) const {
  for (const auto &m : members_)
    if (m.first == key) return &m.second;
  return nullptr;
}

const Value &Value::at(const std::string &key) const {
  if (kind_ != Kind::Object) fail("expected an object with key '", key, "'");
  const Value *v = find(key);
  if (!v) fail("missing key '", key, "'");
  return *v;
}

namespace {
void escape(std::string &out, const std::string &s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
    case '"': out += "\\\""; break;
    case '\\': out += "\\\\"; break;
    case '\n': out += "\\n"; break;
    case '\t': out += "\\t"; break;
    case '\r': out += "\\r"; break;
    default:
      if (c < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof(buf), "\\u%04x", c);
        out += buf;
      } else {
        out += static_cast<char>(c);
      }
    }
  }
  out += '"';
}
} // namespace

void Value::dumpTo(std::string &out, int indent, int depth) const {
  auto newline = [&](int d) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(indent * d), ' ');
  };
  switch (kind_) {
  case Kind::Null: out += "null"; break;
  case Kind::Bool: out += bool_ ? "true" : "false"; break;
  case Kind::Int: out += std::to_string(int_); break;
  case Kind::Double: {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.17g", double_);
    out += std::isfinite(double_) ? buf : "null";
    // A whole number stays a float ("8.0", as Python writes it): readers
    // such as transformers' config checks tell 8 from 8.0.
    if (std::isfinite(double_) && std::strpbrk(buf, ".eE") == nullptr)
      out += ".0";
    break;
  }
  case Kind::String: escape(out, string_); break;
  case Kind::Array:
    out += '[';
    for (size_t i = 0; i < items_.size(); ++i) {
      if (i) out += indent < 0 ? "," : ",";
      newline(depth + 1);
      items_[i].dumpTo(out, indent, depth + 1);
    }
    if (!items_.empty()) newline(depth);
    out += ']';
    break;
  case Kind::Object:
    out += '{';
    for (size_t i = 0; i < members_.size(); ++i) {
      if (i) out += ',';
      newline(depth + 1);
      escape(out, members_[i].first);
      out += indent < 0 ? ":" : ": ";
      members_[i].second.dumpTo(out, indent, depth + 1);
    }
    if (!members_.empty()) newline(depth);
    out += '}';
    break;
  }
}

std::string Value::dump(int indent) const {
  std::string out;
  dumpTo(out, indent, 0);
  return out;
}

namespace {

class Parser {
public:
  Parser(const std::string &text, const std::string &source) : s(text), source(source) {}

  Value parseDocument() {
    Value v = parseValue(0);
    skipSpace();
    if (pos != s.size()) error("unexpected trailing characters");
    return v;
  }

private:
  [[noreturn]] void error(const std::string &message) {
    int line = 1, col = 1;
    for (size_t i = 0; i < pos && i < s.size(); ++i) {
      if (s[i] == '\n') { ++line; col = 1; } else { ++col; }
    }
    fail(source, ":", line, ":", col, ": ", message);
  }
  void skipSpace() {
    while (pos < s.size() && (s[pos] == ' ' || s[pos] == '\n' || s[pos] == '\t' || s[pos] == '\r'))
      ++pos;
  }
  bool consume(const char *word) {
    size_t n = std::char_traits<char>::length(word);
    if (s.compare(pos, n, word) == 0) { pos += n; return true; }
    return false;
  }
  Value parseValue(int depth) {
    if (depth > 256) error("nesting too deep");
    skipSpace();
    if (pos >= s.size()) error("unexpected end of input");
    char c = s[pos];
    if (c == '{') return parseObject(depth);
    if (c == '[') return parseArray(depth);
    if (c == '"') return Value(parseString());
    if (consume("true")) return Value(true);
    if (consume("false")) return Value(false);
    if (consume("null")) return Value();
    if (c == '-' || (c >= '0' && c <= '9')) return parseNumber();
    error(std::string("unexpected character '") + c + "'");
  }
  Value parseObject(int depth) {
    Value obj = Value::object();
    // A repeated key keeps its first position and its last value, as
    // Value::set does; the set keeps parsing linear in the member count.
    std::unordered_set<std::string> seen;
    ++pos;
    skipSpace();
    if (pos < s.size() && s[pos] == '}') { ++pos; return obj; }
    while (true) {
      skipSpace();
      if (pos >= s.size() || s[pos] != '"') error("expected a string key");
      std::string key = parseString();
      skipSpace();
      if (pos >= s.size() || s[pos] != ':') error("expected ':'");
      ++pos;
      Value value = parseValue(depth + 1);
      if (seen.insert(key).second)
        obj.append(std::move(key), std::move(value));
      else
        obj.set(key, std::move(value));
      skipSpace();
      if (pos < s.size() && s[pos] == ',') { ++pos; continue; }
      if (pos < s.size() && s[pos] == '}') { ++pos; return obj; }
      error("expected ',' or '}'");
    }
  }
  Value parseArray(int depth) {
    Value arr = Value::array();
    ++pos;
    skipSpace();
    if (pos < s.size() && s[pos] == ']') { ++pos; return arr; }
    while (true) {
      arr.push(parseValue(depth + 1));
      skipSpace();
      if (pos < s.size() && s[pos] == ',') { ++pos; continue; }
      if (pos < s.size() && s[pos] == ']') { ++pos; return arr; }
      error("expected ',' or ']'");
    }
  }
  unsigned parseHex4() {
    unsigned code = 0;
    for (int i = 0; i < 4; ++i, ++pos) {
      char h = pos < s.size() ? s[pos] : '\0';
      unsigned digit = h >= '0' && h <= '9'   ? h - '0'
                       : h >= 'a' && h <= 'f' ? h - 'a' + 10
                       : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                              : 16;
      if (digit == 16) error("bad \\u escape: expected 4 hex digits");
      code = code * 16 + digit;
    }
    return code;
  }
  std::string parseString() {
    std::string out;
    ++pos; // opening quote
    while (true) {
      if (pos >= s.size()) error("unterminated string");
      char c = s[pos++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) error("control character in string");
      if (c != '\\') { out += c; continue; }
      if (pos >= s.size()) error("unterminated escape");
      char e = s[pos++];
      switch (e) {
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      case '/': out += '/'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'u': {
        // A code point outside the BMP is a surrogate pair (RFC 8259 §7);
        // a lone surrogate is no character, so it has no UTF-8 spelling.
        unsigned code = parseHex4();
        if (code >= 0xDC00 && code <= 0xDFFF) error("lone low surrogate in \\u escape");
        if (code >= 0xD800 && code <= 0xDBFF) {
          if (!consume("\\u")) error("high surrogate not followed by a \\u low surrogate");
          unsigned low = parseHex4();
          if (low < 0xDC00 || low > 0xDFFF) error("high surrogate not followed by a \\u low surrogate");
          code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
        }
        unicode::append(out, code);
        break;
      }
      default: error(std::string("bad escape '\\") + e + "'");
      }
    }
  }
  Value parseNumber() {
    size_t start = pos;
    bool isDouble = false;
    if (s[pos] == '-') ++pos;
    while (pos < s.size() && ((s[pos] >= '0' && s[pos] <= '9') || s[pos] == '.' || s[pos] == 'e' ||
                              s[pos] == 'E' || s[pos] == '+' || s[pos] == '-')) {
      if (s[pos] == '.' || s[pos] == 'e' || s[pos] == 'E') isDouble = true;
      ++pos;
    }
    std::string text = s.substr(start, pos - start);
    char *end = nullptr;
    if (!isDouble) {
      errno = 0;
      long long v = std::strtoll(text.c_str(), &end, 10);
      if (*end == '\0' && errno == 0) return Value(static_cast<int64_t>(v));
    }
    double d = std::strtod(text.c_str(), &end);
    if (*end != '\0') { pos = start; error("bad number '" + text + "'"); }
    return Value(d);
  }

  const std::string &s;
  std::string source;
  size_t pos = 0;
};

} // namespace

Value parse(const std::string &text, const std::string &source) {
  return Parser(text, source).parseDocument();
}

} // namespace llmc::json
