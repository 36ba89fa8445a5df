#include "src/common/blocking_socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "src/common/util.h"

namespace manta {

void SetBlockingTimeouts(int fd, int64_t timeout_ms) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  timeval tv{static_cast<time_t>(timeout_ms / 1000), static_cast<suseconds_t>((timeout_ms % 1000) * 1000)};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

absl::Status SocketIoError(const char* what, ssize_t n) {
  if (n == 0) return absl::UnavailableError(std::string(what) + ": the connection was closed");
  if (errno == EAGAIN || errno == EWOULDBLOCK) return absl::UnavailableError(std::string(what) + ": timed out");
  return absl::UnavailableError(std::string(what) + ": " + std::strerror(errno));
}

namespace {

// Sets the socket's `option` timeout to what is left before `deadline_ms`; false
// when nothing is left.
bool TimeoutUntil(int fd, int option, int64_t deadline_ms) {
  int64_t left = deadline_ms - MonotonicMs();
  if (left <= 0) return false;
  timeval tv{static_cast<time_t>(left / 1000), static_cast<suseconds_t>((left % 1000) * 1000)};
  setsockopt(fd, SOL_SOCKET, option, &tv, sizeof(tv));
  return true;
}

// Moves all `n` bytes with recv or send, by `deadline_ms` when it is not kNoDeadline
// (else each call waits as the socket's own timeouts say).
constexpr int64_t kNoDeadline = -1;
absl::Status MoveAll(int fd, char* p, size_t n, bool reading, int64_t deadline_ms) {
  const char* what = reading ? "read" : "write";
  while (n > 0) {
    if (deadline_ms != kNoDeadline && !TimeoutUntil(fd, reading ? SO_RCVTIMEO : SO_SNDTIMEO, deadline_ms)) {
      return absl::UnavailableError(std::string(what) + ": timed out");
    }
    ssize_t moved = reading ? recv(fd, p, n, 0) : send(fd, p, n, MSG_NOSIGNAL);
    if (moved < 0 && errno == EINTR) continue;
    if (moved <= 0) return SocketIoError(what, moved);
    p += moved;
    n -= static_cast<size_t>(moved);
  }
  return absl::OkStatus();
}

}  // namespace

bool SetTimeoutsWithin(int fd, int64_t io_timeout_ms, int64_t deadline_ms) {
  const int64_t left = deadline_ms - MonotonicMs();
  if (left <= 0) return false;
  // Called before every read or write of a transfer: no system call until the
  // deadline is nearer than the I/O timeout the socket already has.
  if (left < io_timeout_ms) {
    timeval tv{static_cast<time_t>(left / 1000), static_cast<suseconds_t>((left % 1000) * 1000)};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  }
  return true;
}

int64_t TransferDeadline(int64_t io_timeout_ms, uint64_t bytes, int64_t min_bytes_per_s) {
  const uint64_t rate = static_cast<uint64_t>(std::max<int64_t>(1, min_bytes_per_s));
  // No overflow: objects are under 2^44 bytes (and the product is capped anyway).
  const uint64_t ms = std::min<uint64_t>(bytes, uint64_t{1} << 50) * 1000 / rate;
  return MonotonicMs() + io_timeout_ms + static_cast<int64_t>(ms);
}

absl::Status ReadExact(int fd, void* buf, size_t n) {
  return MoveAll(fd, static_cast<char*>(buf), n, /*reading=*/true, kNoDeadline);
}

absl::Status WriteAll(int fd, const void* buf, size_t n) {
  return MoveAll(fd, const_cast<char*>(static_cast<const char*>(buf)), n, /*reading=*/false, kNoDeadline);
}

absl::Status ReadExactBefore(int fd, void* buf, size_t n, int64_t deadline_ms) {
  return MoveAll(fd, static_cast<char*>(buf), n, /*reading=*/true, deadline_ms);
}

absl::Status WriteAllBefore(int fd, const void* buf, size_t n, int64_t deadline_ms) {
  return MoveAll(fd, const_cast<char*>(static_cast<const char*>(buf)), n, /*reading=*/false, deadline_ms);
}

absl::StatusOr<sockaddr_in> ParseIpv4SocketAddress(const std::string& address) {
  size_t colon = address.rfind(':');
  sockaddr_in out{};
  out.sin_family = AF_INET;
  int port = colon == std::string::npos ? 0 : std::atoi(address.c_str() + colon + 1);
  std::string host = colon == std::string::npos ? address : address.substr(0, colon);
  if (host == "localhost") host = "127.0.0.1";
  if (port <= 0 || port > 65535 || inet_pton(AF_INET, host.c_str(), &out.sin_addr) != 1) {
    return absl::InvalidArgumentError("malformed address '" + address + "' (want a.b.c.d:port)");
  }
  out.sin_port = htons(static_cast<uint16_t>(port));
  return out;
}

absl::StatusOr<int> ConnectWithin(const std::string& address, int64_t timeout_ms) {
  auto addr = ParseIpv4SocketAddress(address);
  if (!addr.ok()) return addr.status();
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return absl::UnavailableError(std::string("socket: ") + std::strerror(errno));
  if (connect(fd, reinterpret_cast<const sockaddr*>(&*addr), sizeof(*addr)) != 0 && errno != EINPROGRESS) {
    int err = errno;
    close(fd);
    return absl::UnavailableError("cannot connect to " + address + ": " + std::strerror(err));
  }
  pollfd p{fd, POLLOUT, 0};
  int ready = poll(&p, 1, static_cast<int>(timeout_ms));
  int err = 0;
  socklen_t len = sizeof(err);
  if (ready <= 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
    close(fd);
    return absl::UnavailableError("cannot connect to " + address + ": " +
                                  (ready <= 0 ? "timed out" : std::strerror(err)));
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

}  // namespace manta
