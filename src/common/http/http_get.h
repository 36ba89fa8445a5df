// A small blocking HTTP/1.0 GET for loopback and cluster-internal endpoints (the
// dashboard scraping the daemons' Prometheus endpoints): a deadline on the whole
// exchange and a cap on the reply; HTTPS with the cluster's TLS material.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "src/common/http/http_server.h"

namespace manta::http {

struct HttpGetOptions {
  int64_t timeout_ms = 10000;  // for the whole exchange
  size_t max_bytes = 16 << 20;
  std::string bearer_token;    // sent as "Authorization: Bearer" when not empty
  std::string content_type = "application/json";  // of a request's body
  // With tls.ca_pem: HTTPS. The server's certificate must be signed by tls.ca_pem
  // and name the address asked; tls.cert_pem (and key_pem), when given, is presented.
  HttpTls tls;
};

// An "http[s]://host[:port][/]" URL: the port defaults to 80 (443 with https); the
// host is as written (a name or an address). InvalidArgument names a bad one.
struct HttpUrl {
  std::string host;
  int port = 0;
  bool https = false;
};
absl::StatusOr<HttpUrl> ParseHttpUrl(const std::string& url);

// The body of GET `path` from `host` (numeric IPv4) : `port`. Errors name the
// address: unreachable, a failed TLS handshake, a status other than 200, a reply
// over max_bytes, or no complete reply within the deadline.
absl::StatusOr<std::string> HttpGet(const std::string& host, int port, const std::string& path,
                                    const HttpGetOptions& options);
struct HttpReply {
  int status = 0;           // 200, 404, ...
  std::string status_line;  // "404 Not Found"
  std::string body;
};
// Any method (a body, when not GET, is sent as options.content_type): the reply whatever
// its status. Errors as HttpGet's, but for the status.
absl::StatusOr<HttpReply> HttpRequest(const std::string& host, int port, const std::string& method,
                                      const std::string& path, const std::string& body,
                                      const HttpGetOptions& options);
inline absl::StatusOr<std::string> HttpGet(const std::string& host, int port, const std::string& path,
                                           int64_t timeout_ms, size_t max_bytes) {
  HttpGetOptions options;
  options.timeout_ms = timeout_ms;
  options.max_bytes = max_bytes;
  return HttpGet(host, port, path, options);
}

}  // namespace manta::http
