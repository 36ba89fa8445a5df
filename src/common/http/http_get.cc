#include "src/common/http/http_get.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace manta::http {

namespace {

int64_t HttpGetNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Waits until `fd` is ready for `events` or the deadline passes.
bool WaitReady(int fd, short events, int64_t deadline_ms) {
  for (;;) {
    const int64_t left = deadline_ms - HttpGetNowMs();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    int n = poll(&p, 1, static_cast<int>(left));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

}  // namespace

absl::StatusOr<std::string> HttpGet(const std::string& host, int port, const std::string& path, int64_t timeout_ms,
                                    size_t max_bytes) {
  const std::string where = "http://" + host + ":" + std::to_string(port) + path;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (port <= 0 || port > 65535 || inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    return absl::InvalidArgumentError(where + ": not a numeric IPv4 address and port");
  }
  const int64_t deadline = HttpGetNowMs() + timeout_ms;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::UnavailableError(where + ": socket: " + std::strerror(errno));
  auto fail = [&](const std::string& why) {
    close(fd);
    return absl::UnavailableError(where + ": " + why);
  };
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 && errno != EINPROGRESS) {
    return fail(std::strerror(errno));
  }
  if (!WaitReady(fd, POLLOUT, deadline)) return fail("no connection within the deadline");
  int err = 0;
  socklen_t len = sizeof(err);
  getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) return fail(std::strerror(err));
  const std::string request = "GET " + path + " HTTP/1.0\r\nHost: " + host + "\r\nConnection: close\r\n\r\n";
  for (size_t sent = 0; sent < request.size();) {
    if (!WaitReady(fd, POLLOUT, deadline)) return fail("the request was not sent within the deadline");
    ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EINTR) return fail(std::strerror(errno));
    if (n > 0) sent += static_cast<size_t>(n);
  }
  std::string reply;
  char buf[16384];
  for (;;) {
    if (!WaitReady(fd, POLLIN, deadline)) return fail("no complete reply within the deadline");
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return fail(std::strerror(errno));
    }
    reply.append(buf, static_cast<size_t>(n));
    if (reply.size() > max_bytes) return fail("the reply is over " + std::to_string(max_bytes) + " bytes");
  }
  close(fd);
  const size_t body = reply.find("\r\n\r\n");
  if (reply.rfind("HTTP/1.", 0) != 0 || reply.size() < 12 || body == std::string::npos) {
    return absl::UnavailableError(where + ": not an HTTP reply");
  }
  if (reply.compare(8, 5, " 200 ") != 0) {
    return absl::UnavailableError(where + ": " + reply.substr(9, reply.find("\r\n") - 9));
  }
  return reply.substr(body + 4);
}

}  // namespace manta::http
