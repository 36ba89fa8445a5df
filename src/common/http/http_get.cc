#include "src/common/http/http_get.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <utility>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>

#include "src/common/http/http_tls.h"

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

// One connected non-blocking socket, plain or TLS, read and written against one
// deadline. Errors are kept in error().
class HttpGetConnection {
 public:
  HttpGetConnection(int fd, int64_t deadline_ms) : fd_(fd), deadline_ms_(deadline_ms) {}
  ~HttpGetConnection() {
    ssl_.reset();
    close(fd_);
  }

  // The TLS handshake, checking that the server's certificate names `host`.
  bool StartTls(const HttpTls& tls, const std::string& host) {
    auto ctx = MakeTlsContext(tls, /*server=*/false);
    if (!ctx.ok()) return Fail(std::string(ctx.status().message()));
    ctx_.emplace(std::move(*ctx));
    ssl_.reset(SSL_new(ctx_->native_handle()));
    if (!ssl_ || SSL_set_fd(ssl_.get(), fd_) != 1 || X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_.get()), host.c_str()) != 1) {
      return Fail("cannot start TLS");
    }
    return Retry([this] { return SSL_connect(ssl_.get()); }, "TLS handshake") > 0;
  }

  bool SendAll(const std::string& data) {
    for (size_t sent = 0; sent < data.size();) {
      const void* at = data.data() + sent;
      const size_t left = data.size() - sent;
      ssize_t n = ssl_ ? Retry([&] { return SSL_write(ssl_.get(), at, static_cast<int>(left)); }, "sending")
                       : PlainIo(POLLOUT, [&] { return send(fd_, at, left, MSG_NOSIGNAL); }, "sending");
      if (n <= 0) return false;
      sent += static_cast<size_t>(n);
    }
    return true;
  }

  // Bytes read (0 at the end of the reply), or -1.
  ssize_t Read(char* buf, size_t size) {
    if (ssl_) return Retry([&] { return SSL_read(ssl_.get(), buf, static_cast<int>(size)); }, "reading");
    return PlainIo(POLLIN, [&] { return recv(fd_, buf, size, 0); }, "reading");
  }

  const std::string& error() const { return error_; }

 private:
  bool Fail(std::string why) {
    error_ = std::move(why);
    return false;
  }

  template <class Op>
  ssize_t PlainIo(short events, Op op, const char* what) {
    for (;;) {
      if (!WaitReady(fd_, events, deadline_ms_)) return Fail(std::string("timed out ") + what), -1;
      ssize_t n = op();
      if (n >= 0) return n;
      if (errno != EAGAIN && errno != EINTR) return Fail(std::string(what) + ": " + std::strerror(errno)), -1;
    }
  }

  // Runs an OpenSSL call until it completes, the connection ends (0) or fails (-1).
  template <class Op>
  int Retry(Op op, const char* what) {
    for (;;) {
      ERR_clear_error();
      const int n = op();
      if (n > 0) return n;
      const int e = SSL_get_error(ssl_.get(), n);
      if (e == SSL_ERROR_ZERO_RETURN) return 0;
      if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        if (!WaitReady(fd_, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline_ms_)) {
          return Fail(std::string("timed out ") + what), -1;
        }
        continue;
      }
      const long verify = SSL_get_verify_result(ssl_.get());
      char text[256] = "the connection broke";
      if (unsigned long code = ERR_peek_last_error(); code != 0) ERR_error_string_n(code, text, sizeof(text));
      return Fail(std::string(what) + ": " + (verify != X509_V_OK ? X509_verify_cert_error_string(verify) : text)), -1;
    }
  }

  struct SslFree {
    void operator()(SSL* ssl) const { SSL_free(ssl); }
  };
  const int fd_;
  const int64_t deadline_ms_;
  std::optional<boost::asio::ssl::context> ctx_;
  std::unique_ptr<SSL, SslFree> ssl_;
  std::string error_;
};

// Connects to `addr` (non-blocking); the socket, or -1 with `error` set.
int HttpGetConnect(const sockaddr_in& addr, int64_t deadline, std::string* error) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = std::string("socket: ") + std::strerror(errno);
    return -1;
  }
  int err = 0;
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0 && errno != EINPROGRESS) {
    err = errno;
  } else if (!WaitReady(fd, POLLOUT, deadline)) {
    *error = "no connection within the deadline";
  } else {
    socklen_t len = sizeof(err);
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  }
  if (err != 0) *error = std::strerror(err);
  if (!error->empty()) {
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

absl::StatusOr<HttpUrl> ParseHttpUrl(const std::string& url) {
  HttpUrl out;
  out.https = url.rfind("https://", 0) == 0;
  if (!out.https && url.rfind("http://", 0) != 0) {
    return absl::InvalidArgumentError("'" + url + "' is not an http:// or https:// URL");
  }
  std::string rest = url.substr(out.https ? 8 : 7);
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  out.port = out.https ? 443 : 80;
  if (const size_t colon = rest.rfind(':'); colon != std::string::npos) {
    out.port = std::atoi(rest.c_str() + colon + 1);
    rest.resize(colon);
  }
  out.host = rest;
  if (out.host.empty() || out.port <= 0 || out.port > 65535) {
    return absl::InvalidArgumentError("'" + url + "' names no host and port");
  }
  return out;
}

absl::StatusOr<HttpReply> HttpRequest(const std::string& host, int port, const std::string& method,
                                      const std::string& path, const std::string& body,
                                      const HttpGetOptions& options) {
  const bool https = !options.tls.ca_pem.empty();
  const std::string where =
      (https ? "https://" : "http://") + host + ":" + std::to_string(port) + path;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (port <= 0 || port > 65535 || inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    return absl::InvalidArgumentError(where + ": not a numeric IPv4 address and port");
  }
  const int64_t deadline = HttpGetNowMs() + options.timeout_ms;
  std::string error;
  const int fd = HttpGetConnect(addr, deadline, &error);
  if (fd < 0) return absl::UnavailableError(where + ": " + error);
  HttpGetConnection connection(fd, deadline);
  auto fail = [&] { return absl::UnavailableError(where + ": " + connection.error()); };
  if (https && !connection.StartTls(options.tls, host)) return fail();
  std::string request = method + " " + path + " HTTP/1.0\r\nHost: " + host + "\r\nConnection: close\r\n";
  if (!options.bearer_token.empty()) request += "Authorization: Bearer " + options.bearer_token + "\r\n";
  if (method != "GET") {
    request += "Content-Type: " + options.content_type + "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  if (!connection.SendAll(request + "\r\n" + body)) return fail();
  std::string reply;
  char buf[16384];
  for (;;) {
    const ssize_t n = connection.Read(buf, sizeof(buf));
    if (n == 0) break;
    if (n < 0) return fail();
    reply.append(buf, static_cast<size_t>(n));
    if (reply.size() > options.max_bytes) {
      return absl::UnavailableError(where + ": the reply is over " + std::to_string(options.max_bytes) + " bytes");
    }
  }
  const size_t end_of_header = reply.find("\r\n\r\n");
  if (reply.rfind("HTTP/1.", 0) != 0 || reply.size() < 12 || end_of_header == std::string::npos) {
    return absl::UnavailableError(where + ": not an HTTP reply");
  }
  HttpReply out;
  out.status = std::atoi(reply.substr(9, 3).c_str());
  out.status_line = reply.substr(9, reply.find("\r\n") - 9);
  out.body = reply.substr(end_of_header + 4);
  return out;
}

absl::StatusOr<std::string> HttpGet(const std::string& host, int port, const std::string& path,
                                    const HttpGetOptions& options) {
  absl::StatusOr<HttpReply> reply = HttpRequest(host, port, "GET", path, "", options);
  if (!reply.ok()) return reply.status();
  if (reply->status != 200) {
    const bool https = !options.tls.ca_pem.empty();
    return absl::UnavailableError((https ? "https://" : "http://") + host + ":" + std::to_string(port) + path +
                                  ": " + reply->status_line);
  }
  return std::move(reply->body);
}

}  // namespace manta::http
