//===- Json.h - a small JSON value for headers and state files --*- C++ -*-===//
//
// Enough JSON for safetensors headers, checkpoint state, metrics and
// tokenizer files: objects keep insertion order, integers stay exact (int64),
// \u escapes (surrogate pairs included) become UTF-8, parse errors name the
// line and column.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_SUPPORT_JSON_H
#define LLMC_RUNTIME_SUPPORT_JSON_H

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace llmc::json {

class Value {
public:
  enum class Kind { Null, Bool, Int, Double, String, Array, Object };

  Value() = default;
  Value(bool b) : kind_(Kind::Bool), bool_(b) {}
  Value(int v) : kind_(Kind::Int), int_(v) {}
  Value(int64_t v) : kind_(Kind::Int), int_(v) {}
  Value(uint64_t v) : kind_(Kind::Int), int_(static_cast<int64_t>(v)) {}
  Value(double v) : kind_(Kind::Double), double_(v) {}
  Value(const char *s) : kind_(Kind::String), string_(s) {}
  Value(std::string s) : kind_(Kind::String), string_(std::move(s)) {}
  static Value array() { Value v; v.kind_ = Kind::Array; return v; }
  static Value object() { Value v; v.kind_ = Kind::Object; return v; }

  Kind kind() const { return kind_; }
  bool isNull() const { return kind_ == Kind::Null; }
  bool isNumber() const { return kind_ == Kind::Int || kind_ == Kind::Double; }

  /// Typed access; throws RuntimeError naming `what` on a kind mismatch.
  bool asBool(const std::string &what = "value") const;
  int64_t asInt(const std::string &what = "value") const;
  double asDouble(const std::string &what = "value") const;
  const std::string &asString(const std::string &what = "value") const;
  const std::vector<Value> &asArray(const std::string &what = "value") const;

  // Arrays.
  void push(Value v) { items_.push_back(std::move(v)); }
  // Objects (insertion order kept).
  void set(const std::string &key, Value v);
  /// Adds a member without looking for `key` among the others (linear):
  /// for callers that know the key is new, such as the parser with a
  /// vocabulary of 100k members.
  void append(std::string key, Value v);
  const Value *find(const std::string &key) const;
  /// The member `key`; throws naming the key when missing.
  const Value &at(const std::string &key) const;
  const std::vector<std::pair<std::string, Value>> &members() const { return members_; }

  /// Compact text when indent < 0, else pretty-printed.
  std::string dump(int indent = -1) const;

private:
  void dumpTo(std::string &out, int indent, int depth) const;

  Kind kind_ = Kind::Null;
  bool bool_ = false;
  int64_t int_ = 0;
  double double_ = 0;
  std::string string_;
  std::vector<Value> items_;
  std::vector<std::pair<std::string, Value>> members_;
};

/// Parses `text`; throws RuntimeError "<source>:line:col: message".
Value parse(const std::string &text, const std::string &source = "json");

} // namespace llmc::json

#endif
