// Socket helpers shared by the two ends of the task channel (task_channel.cc and
// task_channel_server.cc). Not part of the core worker's interface.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "src/common/network.h"
#include "src/common/rpc/network_limits.h"
#include "src/common/security.h"

namespace manta::core::task_channel_internal {

inline constexpr size_t kHeaderBytes = 5;  // u32 length + u8 kind

// The handshake (task_channel_security.h): nonces and MACs are 32 bytes; until it is
// done neither end accepts a frame longer than kHandshakeFrameBytes.
inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kMacBytes = 32;
inline constexpr int64_t kHandshakeFrameBytes = 128;
// What a reader buffers at most while its limit is kHandshakeFrameBytes.
inline constexpr size_t kMaxBufferedBeforeHandshake = 1 << 20;

inline std::string NewNonce() {
  std::string nonce(kNonceBytes, '\0');
  FillSecureRandom(reinterpret_cast<uint8_t*>(nonce.data()), nonce.size());
  return nonce;
}

// "ip:port" of the peer of a connected socket, for logs.
inline std::string PeerName(int fd) { return SocketPeerName(fd); }

inline uint32_t LoadLe32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return uint32_t{u[0]} | (uint32_t{u[1]} << 8) | (uint32_t{u[2]} << 16) | (uint32_t{u[3]} << 24);
}

inline std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

// No Nagle delay; and keepalive probes, so that a peer whose host vanished (no FIN
// or RST ever comes) is noticed (by default within about 20 s) instead of never.
// The timings are the process's NetworkLimits (config_def.h's
// task_channel_keepalive_*).
inline void TuneSocket(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  const rpc::NetworkLimits limits = rpc::CurrentNetworkLimits();
  auto whole_seconds = [](int64_t ms) { return static_cast<int>(std::clamp<int64_t>(ms / 1000, 1, 32767)); };
  int idle_s = whole_seconds(limits.task_channel_keepalive_idle_ms);
  int interval_s = whole_seconds(limits.task_channel_keepalive_interval_ms);
  int probes = static_cast<int>(std::clamp<int64_t>(limits.task_channel_keepalive_probes, 1, 127));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof(idle_s));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval_s, sizeof(interval_s));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof(probes));
}

// Splits "ip:port" into a sockaddr. Only numeric IPv4 addresses (what nodes report).
inline absl::Status ParseAddress(const std::string& address, sockaddr_in* out) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos) return absl::InvalidArgumentError("no port in task channel address " + address);
  std::string host = address.substr(0, colon);
  int port = std::atoi(address.c_str() + colon + 1);
  std::memset(out, 0, sizeof(*out));
  out->sin_family = AF_INET;
  out->sin_port = htons(static_cast<uint16_t>(port));
  if (port <= 0 || port > 65535 || inet_pton(AF_INET, host.c_str(), &out->sin_addr) != 1) {
    return absl::InvalidArgumentError("malformed task channel address " + address);
  }
  return absl::OkStatus();
}

enum class SendResult { kAllSent, kWouldBlock, kFailed };
// Sends out[*offset..] without blocking, advancing *offset; clears `out` once all
// of it went. On kFailed errno says why.
inline SendResult SendSome(int fd, std::string* out, size_t* offset) {
  while (*offset < out->size()) {
    ssize_t n = send(fd, out->data() + *offset, out->size() - *offset, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      *offset += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return SendResult::kWouldBlock;
    return SendResult::kFailed;
  }
  out->clear();
  *offset = 0;
  return SendResult::kAllSent;
}

}  // namespace manta::core::task_channel_internal
