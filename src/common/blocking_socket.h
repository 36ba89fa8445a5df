// Blocking TCP sockets with bounded waits, for the small binary protocols that do
// not run on an event loop: the object data channel (src/raylet) and certificate
// enrollment (src/common/enrollment.h). Every read and write of a tuned socket gives
// up after its timeout; a connect gives up after its own. Errors are Unavailable and
// say what failed ("read: timed out", "write: Broken pipe"). Thread-safe.
#pragma once

#include <netinet/in.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace manta {

// TCP_NODELAY, keepalive, and reads and writes that give up after `timeout_ms`.
void SetBlockingTimeouts(int fd, int64_t timeout_ms);
// Reads exactly `n` bytes (Unavailable when the peer closes first or the read times out).
absl::Status ReadExact(int fd, void* buf, size_t n);
// Writes all `n` bytes (never raises SIGPIPE).
absl::Status WriteAll(int fd, const void* buf, size_t n);
// As ReadExact and WriteAll, all done by `deadline_ms` (MonotonicMs, util.h), however
// the peer trickles its bytes.
absl::Status ReadExactBefore(int fd, void* buf, size_t n, int64_t deadline_ms);
absl::Status WriteAllBefore(int fd, const void* buf, size_t n, int64_t deadline_ms);
// Lowers `fd`'s read and write timeouts to what is left before `deadline_ms` once
// that is less than `io_timeout_ms` (which the socket must have already); false when
// the deadline has passed.
bool SetTimeoutsWithin(int fd, int64_t io_timeout_ms, int64_t deadline_ms);
// A transfer's deadline: `io_timeout_ms` plus `bytes` at `min_bytes_per_s`, from now.
int64_t TransferDeadline(int64_t io_timeout_ms, uint64_t bytes, int64_t min_bytes_per_s);
// The error of a recv/send that returned `n` <= 0 (errno read here).
absl::Status SocketIoError(const char* what, ssize_t n);
// "a.b.c.d:port" as a socket address; InvalidArgument otherwise.
absl::StatusOr<sockaddr_in> ParseIpv4SocketAddress(const std::string& address);
// A blocking, close-on-exec TCP connection to `address` ("a.b.c.d:port") made within
// `timeout_ms`.
absl::StatusOr<int> ConnectWithin(const std::string& address, int64_t timeout_ms);

// Little-endian integers of `bytes` bytes (at most 8), as the channels' headers are.
inline void PutLe(uint64_t v, size_t bytes, char* out) {
  for (size_t i = 0; i < bytes; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
inline uint64_t LoadLe(const char* p, size_t bytes) {
  uint64_t v = 0;
  for (size_t i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}
inline void PutLe64(uint64_t v, char* out) { PutLe(v, 8, out); }
inline uint64_t LoadLe64(const char* p) { return LoadLe(p, 8); }

}  // namespace manta
