//===- TcpStoreProtocol.h - the messages of rank 0's store ------*- C++ -*-===//
//
// Shared by the store's server and client (runtime/comm/TcpStore.h). A
// message is a 16-byte header (magic, operation, request id, payload
// length) and its payload: little-endian integers and length-prefixed
// strings. A reply carries the id of its request; the server's probe pings
// carry their own.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_COMM_TCPSTOREPROTOCOL_H
#define LLMC_RUNTIME_COMM_TCPSTOREPROTOCOL_H

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace llmc {
namespace store {

constexpr uint32_t kMagic = 0x53434d4c;  // "LMCS"
constexpr uint32_t kVersion = 2;
constexpr uint32_t kMaxPayload = 64u << 20;

enum Op : uint16_t {
  Hello = 1, ///< client: version, rank, world size
  Ready,     ///< server: the address it saw the client at
  Refused,   ///< server: why
  Set,       ///< client: key, value (no reply)
  Get,       ///< client: key; server answers Value once it is set
  Value,     ///< server: value
  Wait,      ///< client: keys; server answers Done once all are set
  Missing,   ///< client: keys; server answers Value: those not set
  Report,    ///< client: kind, text; server answers Done
  Cause,     ///< client: wait ms, ranks; server answers Event
  Event,     ///< server: rank (-1: none), kind, text
  Probe,     ///< client: mask, members; server answers Probed
  Probed,    ///< server: per member: rank, answered, entered
  Ping,      ///< server -> member: probe id, mask
  Pong,      ///< member -> server: probe id, entered
  Done,      ///< server: the request is done
  Notice,    ///< server -> every other rank: a rank died or failed (rank, kind, text)
};

struct Header {
  uint32_t magic = kMagic;
  uint16_t op = 0;
  uint16_t reserved = 0;
  uint32_t id = 0;
  uint32_t bytes = 0;
};
static_assert(sizeof(Header) == 16, "the header is part of the wire format");

/// Appends fields to a payload.
class Writer {
public:
  Writer &u32(uint32_t v) { return raw(&v, 4); }
  Writer &i32(int32_t v) { return raw(&v, 4); }
  Writer &u64(uint64_t v) { return raw(&v, 8); }
  Writer &bytes(const void *p, size_t n) {
    u32(static_cast<uint32_t>(n));
    return raw(p, n);
  }
  Writer &str(const std::string &s) { return bytes(s.data(), s.size()); }
  std::vector<char> &data() { return data_; }

private:
  Writer &raw(const void *p, size_t n) {
    const char *c = static_cast<const char *>(p);
    data_.insert(data_.end(), c, c + n);
    return *this;
  }
  std::vector<char> data_;
};

/// Reads fields from a payload; a short payload reads zeros and clears ok().
class Reader {
public:
  explicit Reader(const std::vector<char> &data) : p_(data.data()), end_(p_ + data.size()) {}
  uint32_t u32() { return get<uint32_t>(); }
  int32_t i32() { return get<int32_t>(); }
  uint64_t u64() { return get<uint64_t>(); }
  std::vector<char> bytes() {
    uint32_t n = u32();
    if (static_cast<size_t>(end_ - p_) < n) {
      ok_ = false;
      return {};
    }
    std::vector<char> v(p_, p_ + n);
    p_ += n;
    return v;
  }
  std::string str() {
    std::vector<char> v = bytes();
    return std::string(v.begin(), v.end());
  }
  bool ok() const { return ok_; }

private:
  template <typename T> T get() {
    T v{};
    if (static_cast<size_t>(end_ - p_) < sizeof(T)) {
      ok_ = false;
      return v;
    }
    std::memcpy(&v, p_, sizeof(T));
    p_ += sizeof(T);
    return v;
  }
  const char *p_, *end_;
  bool ok_ = true;
};

/// Cuts a byte stream into messages.
class Framer {
public:
  void feed(const char *p, size_t n) { buffer_.insert(buffer_.end(), p, p + n); }
  /// The next whole message, if one has arrived; false with `error` set
  /// when the stream is not this protocol.
  bool next(Header &header, std::vector<char> &payload, std::string &error) {
    if (buffer_.size() - start_ < sizeof(Header)) return compact();
    std::memcpy(&header, buffer_.data() + start_, sizeof(Header));
    if (header.magic != kMagic || header.bytes > kMaxPayload) {
      error = "not llmc's store protocol";
      return false;
    }
    if (buffer_.size() - start_ < sizeof(Header) + header.bytes) return compact();
    const char *body = buffer_.data() + start_ + sizeof(Header);
    payload.assign(body, body + header.bytes);
    start_ += sizeof(Header) + header.bytes;
    return true;
  }

private:
  bool compact() {
    buffer_.erase(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(start_));
    start_ = 0;
    return false;
  }
  std::vector<char> buffer_;
  size_t start_ = 0;
};

/// A whole message as bytes.
inline std::vector<char> frame(uint16_t op, uint32_t id, const std::vector<char> &payload) {
  Header h;
  h.op = op;
  h.id = id;
  h.bytes = static_cast<uint32_t>(payload.size());
  std::vector<char> out(sizeof h + payload.size());
  std::memcpy(out.data(), &h, sizeof h);
  if (!payload.empty()) std::memcpy(out.data() + sizeof h, payload.data(), payload.size());
  return out;
}

} // namespace store
} // namespace llmc

#endif
