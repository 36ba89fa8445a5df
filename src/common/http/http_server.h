// HttpServer: a small HTTP/1.1 server for a daemon's dashboard, metrics and REST
// endpoints (Prometheus scrapes, `manta` CLI queries, a browser).
//
// One thread of its own runs one io_context: it accepts connections, parses requests
// and runs every handler, one at a time. A handler therefore needs no lock against
// other handlers, but must not block for long (it holds up every connection) and
// must lock whatever it shares with the daemon's own thread (or post there and wait).
//
// Bounds, each there so that a peer cannot make the server hold unbounded memory or
// descriptors: a request's header (start line and fields) is at most
// `max_header_bytes` (else 431) and its body at most `max_body_bytes` (else 413); at
// most `max_connections` connections are served (one more gets a 503 and is closed);
// a connection that neither sends a whole request nor reads its response within
// `idle_timeout_ms` is closed. A malformed request gets 400 and the connection is
// closed. The server speaks HTTP/1.0 and 1.1 with keep-alive (requests may be
// pipelined, bodies chunked, "Expect: 100-continue" is honoured); request targets
// must be origin-form ("/path?query", else 400); no HTTP/2, no chunked responses.
//
// TLS (Options::tls): the server then speaks HTTPS and plain HTTP on one port, told
// apart by a connection's first byte. A TLS client may present a certificate; one
// signed by `tls.ca_pem` marks its requests `client_certified` (one signed by
// anyone else fails the handshake). Plain HTTP is served to loopback peers only:
// another host gets a 403 naming HTTPS, so that nothing it would send (a token) or
// be sent crosses the network in clear. A handshake must end within
// `idle_timeout_ms`.
//
// Ownership: the server owns its thread, its sockets and the handlers. Handle(),
// Start() and Stop() are called from one controlling thread (not from a handler);
// port() and address() from any thread after Start().
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace manta::http {

struct Request {
  std::string method;                          // "GET", "POST", ... as sent
  std::string path;                            // percent-decoded, without the query
  std::map<std::string, std::string> query;    // decoded ('+' is a space); last wins
  std::vector<std::pair<std::string, std::string>> query_list;  // every parameter, in order
  std::vector<std::pair<std::string, std::string>> headers;  // as received, in order
  std::string body;
  std::string remote_address;                  // "ip:port" of the peer ("[ip6]:port")
  bool loopback = false;          // the peer is on this machine's loopback (127.0.0.0/8, ::1)
  bool secure = false;            // it came over TLS
  bool client_certified = false;  // over TLS, with a client certificate the server's CA signed

  // The first header named `name` (case-insensitive), or "" when there is none.
  std::string Header(std::string_view name) const;
  // The value of cookie `name` from the Cookie header(s) (surrounding quotes
  // removed), or "" when there is none.
  std::string Cookie(std::string_view name) const;
};

struct Response {
  int status = 200;   // 200..599; anything else is sent as 500
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  // Extra headers, e.g. Set-Cookie (may repeat) or Location. A Content-Type here
  // replaces `content_type`; Server and Cache-Control (default "no-store") here
  // replace the server's own; Content-Length, Transfer-Encoding and Connection are
  // the server's and are ignored. 204 and 304 responses are sent without a body
  // and without Content-Length, as RFC 9110 asks.
  std::vector<std::pair<std::string, std::string>> headers;
};

// Runs on the server's thread. An exception it throws becomes a 500 whose body is
// the exception's what(); the server goes on serving.
using Handler = std::function<Response(const Request&)>;

// PEM contents; all empty: no TLS.
struct HttpTls {
  std::string cert_pem;  // the server's certificate (chain)
  std::string key_pem;   // its private key
  std::string ca_pem;    // the CA whose client certificates mark requests client_certified
  bool enabled() const { return !cert_pem.empty(); }
};

// Whether `request` may see what a cluster's endpoints serve to members: it comes
// from loopback, or over TLS with a certificate of the cluster's CA, or carries
// "Authorization: Bearer <token>" (compared in constant time; never with an empty
// `token`).
bool MemberRequest(const Request& request, std::string_view token);
// Whether it carries "Authorization: Bearer <token>" (false for an empty `token`).
bool HasBearerToken(const Request& request, std::string_view token);
// The 401 for a request that is not: what to send instead.
Response Unauthorized(std::string_view what);

class HttpServer {
 public:
  struct Options {
    std::string host = "127.0.0.1";   // a numeric address or a name to resolve
    int port = 0;                     // 0 = the kernel picks; see port()
    size_t max_header_bytes = 16 * 1024;
    size_t max_body_bytes = 1 << 20;
    int max_connections = 64;         // more are sent a 503 and closed at once
    int64_t idle_timeout_ms = 30000;  // a connection silent this long is closed
    std::string server_name = "manta";  // the Server header
    HttpTls tls;                      // see the top of this file
  };

  explicit HttpServer(Options options);
  // Calls Stop().
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Routes `method` requests for `path` to `handler`. `path` (starting with '/')
  // matches exactly or, when it ends in '/', every path under it too; the longest
  // matching route wins. A request whose path has a route but not for its method
  // gets 405 with an Allow header; a path without a route gets 404. A GET route also
  // answers HEAD (same headers, no body) unless a HEAD route is given. Registering
  // the same method and path again replaces the handler.
  // REQUIRES: before Start().
  void Handle(std::string method, std::string path, Handler handler);

  // Binds host:port and starts serving on the server's own thread. Errors name the
  // address and the reason ("cannot listen on 127.0.0.1:8080: Address already in
  // use"); InvalidArgument for TLS material that does not load; FailedPrecondition
  // when already started.
  absl::Status Start();

  // The bound port (the kernel's pick when Options::port was 0). REQUIRES: Start()
  // succeeded.
  int port() const;
  // "host:port" with the bound port. REQUIRES: Start() succeeded.
  std::string address() const;

  // Closes the listener and every connection (a response being written is cut off)
  // and joins the server's thread; waits for a handler that is running to return.
  // Idempotent; a no-op when never started. REQUIRES: not called from a handler.
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace manta::http
