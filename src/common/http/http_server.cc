#include "src/common/http/http_server.h"

#include <glog/logging.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/detect_ssl.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <chrono>
#include <exception>
#include <optional>
#include <sstream>
#include <thread>
#include <unordered_map>
#include <variant>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/common/http/http_tls.h"
#include "src/common/logging.h"
#include "src/common/security.h"

namespace manta::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using HttpTcp = asio::ip::tcp;
using HttpTlsStream = beast::ssl_stream<beast::tcp_stream>;

namespace {

// After an error response the server stops sending but reads (and drops) what the
// peer still sends, for a while, before closing: closing a socket with unread input
// makes the kernel send a reset, which can destroy the response before the peer
// reads it (a client that sent a 10 MB body would see "connection reset" instead of
// 413).
constexpr int64_t kHttpLingerMs = 2000;
constexpr size_t kHttpLingerMaxBytes = 4 << 20;
// How long accepting pauses after accept() fails (out of descriptors, say).
constexpr int64_t kHttpAcceptRetryMs = 100;
constexpr std::string_view kHttpContinue = "HTTP/1.1 100 Continue\r\n\r\n";
constexpr char kHttpsNeeded[] =
    "this server speaks plain HTTP to loopback only: the cluster runs TLS, so use https:// "
    "(the cluster's CA is <session>/tls/ca.crt on the head) with the cluster token "
    "(Authorization: Bearer) or a certificate of the cluster's CA";

// (Debian's Abseil has its own string_view, so these take std::string_view themselves.)
bool HttpEqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (absl::ascii_tolower(static_cast<unsigned char>(a[i])) != absl::ascii_tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

std::string_view HttpTrim(std::string_view s) {
  const size_t begin = s.find_first_not_of(" \t");
  if (begin == std::string_view::npos) return std::string_view();
  return s.substr(begin, s.find_last_not_of(" \t") - begin + 1);
}

std::string HttpStr(beast::string_view s) { return std::string(s.data(), s.size()); }

int HttpHexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Decodes %XX escapes (and '+' as a space when `plus_is_space`); false on a '%' not
// followed by two hex digits.
bool HttpPercentDecode(std::string_view in, bool plus_is_space, std::string* out) {
  out->clear();
  out->reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c == '%') {
      if (in.size() - i < 3) return false;
      int hi = HttpHexValue(in[i + 1]);
      int lo = HttpHexValue(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      out->push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out->push_back(' ');
    } else {
      out->push_back(c);
    }
  }
  return true;
}

// Splits the request target into the decoded path and query; false when the target
// is not origin-form ("/path?query") or an escape is malformed.
bool HttpParseTarget(std::string_view target, Request* request) {
  size_t question = target.find('?');
  std::string_view path = target.substr(0, question);
  if (path.empty() || path[0] != '/') return false;
  if (!HttpPercentDecode(path, false, &request->path)) return false;
  if (request->path.find('\0') != std::string::npos) return false;
  if (question == std::string_view::npos) return true;
  std::string_view query = target.substr(question + 1);
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    size_t eq = pair.find('=');
    std::string key, value;
    if (!HttpPercentDecode(pair.substr(0, eq), true, &key)) return false;
    if (eq != std::string_view::npos && !HttpPercentDecode(pair.substr(eq + 1), true, &value)) return false;
    request->query_list.emplace_back(key, value);
    request->query[std::move(key)] = std::move(value);
  }
  return true;
}

// A header a handler may send: a token name and a value without CR, LF or NUL (which
// would let a value smuggle in headers of its own).
bool HttpHeaderIsSafe(std::string_view name, std::string_view value) {
  if (name.empty()) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && std::string_view("!#$%&'*+-.^_`|~").find(c) == std::string_view::npos) {
      return false;
    }
  }
  return value.find_first_of(std::string_view("\r\n\0", 3)) == std::string_view::npos;
}

std::string HttpEndpointString(const HttpTcp::endpoint& endpoint) {
  const auto address = endpoint.address();
  std::string host = address.to_string();
  if (address.is_v6()) host = absl::StrCat("[", host, "]");
  return absl::StrCat(host, ":", endpoint.port());
}

bool HttpIsLoopback(const asio::ip::address& a) {
  if (a.is_v6() && a.to_v6().is_v4_mapped()) return asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6()).is_loopback();
  return a.is_loopback();
}

Response HttpErrorResponse(int status, std::string body) {
  Response response;
  response.status = status;
  response.body = std::move(body);
  response.body.push_back('\n');
  return response;
}

}  // namespace

// Not in the anonymous namespace: HttpServer::Impl derives from HttpCore.
namespace http_internal {

class HttpConnection;

// The server's state; everything but `options`, `routes` and `port` (fixed before
// the thread starts) is touched only by the server's thread.
struct HttpCore {
  explicit HttpCore(HttpServer::Options o) : options(std::move(o)) {}

  void Accept();
  void OnAccept(const beast::error_code& ec, HttpTcp::socket socket);
  // Sends a 503 without waiting and closes: the server is at max_connections.
  void Reject(HttpTcp::socket socket);
  // Closes the listener and every connection; the thread's run() then returns.
  void Shutdown();
  // The routed (or error) response to `request`.
  Response Route(const Request& request);
  const std::map<std::string, Handler>* FindRoute(const std::string& path) const;
  Response RunHandler(const Handler& handler, const Request& request);

  const HttpServer::Options options;
  std::map<std::string, std::map<std::string, Handler>> routes;  // path -> method -> handler
  int port = 0;
  bool started = false;
  bool stop_called = false;
  bool stopping = false;
  uint64_t next_connection_id = 0;
  // Declared before `io`, so that connections the io_context destroys with their
  // pending handlers can still remove themselves.
  std::unordered_map<uint64_t, std::weak_ptr<HttpConnection>> connections;
  LogRateLimiter warnings;
  std::optional<asio::ssl::context> tls;  // with Options::tls
  asio::io_context io{1};
  HttpTcp::acceptor acceptor{io};
  asio::steady_timer accept_retry{io};
  std::thread thread;
};

// One connection: reads a request, runs its handler, writes the response, and again
// while the peer keeps the connection alive. Owned by the pending asio operations
// (each holds a shared_ptr); gone when the last one completes.
class HttpConnection : public std::enable_shared_from_this<HttpConnection> {
 public:
  HttpConnection(HttpCore* core, HttpTcp::socket socket, uint64_t id, std::string remote, bool loopback)
      : core_(core),
        stream_(std::in_place_index<0>, std::move(socket)),
        id_(id),
        remote_(std::move(remote)),
        loopback_(loopback) {}
  ~HttpConnection() { core_->connections.erase(id_); }

  void Start();
  // Closes the socket; pending operations complete with errors and end the connection.
  void Close();

 private:
  // With TLS: after the first bytes told whether the peer starts a TLS handshake.
  void OnDetected(const beast::error_code& ec, bool tls);
  void OnHandshake(const beast::error_code& ec, size_t used);
  beast::tcp_stream& Tcp() {
    return std::visit([](auto& s) -> beast::tcp_stream& { return beast::get_lowest_layer(s); }, stream_);
  }
  // Reading a request: its header, then (after a 100 Continue when asked) its body.
  // Bytes are read into buffer_ and fed to parser_, so that the stream (plain or TLS)
  // has one read and one write operation, not one per stage of Beast's HTTP ops.
  void ReadHeader();
  void OnHeader();
  void ReadBody();
  void Parse();
  void ReadSome();
  void OnRead(const beast::error_code& ec, size_t n);
  void OnReadError(const beast::error_code& ec);
  void Dispatch();
  // Sends `response`; then closes when `close`, else reads the next request.
  void Send(Response response, unsigned version, bool head, bool close);
  // What follows writing out_.
  enum class AfterWrite { kReadBody, kReadHeader, kLinger };
  void Write(AfterWrite next);
  void OnWritten(const beast::error_code& ec);
  void SendError(int status, std::string text) { Send(HttpErrorResponse(status, std::move(text)), 11, false, true); }
  void Linger();
  std::chrono::milliseconds IdleTimeout() const { return std::chrono::milliseconds(core_->options.idle_timeout_ms); }

  HttpCore* const core_;
  std::variant<beast::tcp_stream, HttpTlsStream> stream_;  // plain, or TLS once the handshake starts
  const uint64_t id_;
  const std::string remote_;
  const bool loopback_;
  bool certified_ = false;  // the TLS peer presented a certificate of the CA
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  bool reading_header_ = false;
  std::string out_;  // being written
  AfterWrite after_write_ = AfterWrite::kReadHeader;
  bool closed_ = false;
  bool lingering_ = false;
  size_t lingered_bytes_ = 0;
  char discard_[4096];
};

void HttpConnection::Start() {
  if (!core_->tls) return ReadHeader();
  Tcp().expires_after(IdleTimeout());
  beast::async_detect_ssl(std::get<0>(stream_), buffer_,
                          [self = shared_from_this()](const beast::error_code& ec, bool tls) {
                            self->OnDetected(ec, tls);
                          });
}

void HttpConnection::OnDetected(const beast::error_code& ec, bool tls) {
  if (closed_) return;
  if (ec) return OnReadError(ec);
  if (!tls) {
    if (loopback_) return ReadHeader();
    return SendError(403, kHttpsNeeded);
  }
  beast::tcp_stream tcp = std::move(std::get<0>(stream_));
  auto& ssl = stream_.emplace<1>(std::move(tcp), *core_->tls);
  Tcp().expires_after(IdleTimeout());
  ssl.async_handshake(asio::ssl::stream_base::server, buffer_.data(),
                      [self = shared_from_this()](const beast::error_code& handshake_ec, size_t used) {
                        self->OnHandshake(handshake_ec, used);
                      });
}

void HttpConnection::OnHandshake(const beast::error_code& ec, size_t used) {
  if (closed_) return;
  if (ec) {
    int64_t left_out = 0;
    if (core_->warnings.Allow(&left_out)) {
      LOG(WARNING) << "https server on port " << core_->port << ": TLS handshake with " << remote_
                   << " failed: " << ec.message() << LogRateLimiter::LeftOut(left_out);
    }
    return Close();
  }
  buffer_.consume(used);
  SSL* ssl = std::get<1>(stream_).native_handle();
  X509* peer = SSL_get1_peer_certificate(ssl);
  certified_ = peer != nullptr && SSL_get_verify_result(ssl) == X509_V_OK;
  X509_free(peer);
  ReadHeader();
}

void HttpConnection::Close() {
  if (closed_) return;
  closed_ = true;
  beast::error_code ignored;
  Tcp().socket().shutdown(HttpTcp::socket::shutdown_both, ignored);
  Tcp().close();
}

void HttpConnection::ReadHeader() {
  if (closed_) return;
  parser_.emplace();
  parser_->header_limit(static_cast<uint32_t>(std::min<size_t>(core_->options.max_header_bytes, UINT32_MAX)));
  parser_->body_limit(static_cast<uint64_t>(core_->options.max_body_bytes));
  reading_header_ = true;
  Tcp().expires_after(IdleTimeout());
  Parse();  // a pipelined request may be in the buffer already
}

void HttpConnection::OnHeader() {
  if (parser_->is_done()) return Dispatch();
  const auto& message = parser_->get();
  if (message.version() >= 11 && beast::iequals(message[bhttp::field::expect], "100-continue")) {
    // The client waits for this before it sends the body.
    out_.assign(kHttpContinue);
    return Write(AfterWrite::kReadBody);
  }
  ReadBody();
}

void HttpConnection::ReadBody() {
  reading_header_ = false;
  Tcp().expires_after(IdleTimeout());
  Parse();
}

void HttpConnection::Parse() {
  auto stage_done = [this] { return reading_header_ ? parser_->is_header_done() : parser_->is_done(); };
  while (buffer_.size() > 0 && !stage_done()) {
    beast::error_code ec;
    const size_t used = parser_->put(buffer_.data(), ec);
    buffer_.consume(used);
    if (ec == bhttp::error::need_more || (!ec && used == 0)) break;  // more bytes are needed
    if (ec) return OnReadError(ec);
  }
  if (!stage_done()) return ReadSome();
  if (reading_header_) return OnHeader();
  Dispatch();
}

void HttpConnection::ReadSome() {
  constexpr size_t kReadChunk = 64 << 10;
  auto buffers = buffer_.prepare(kReadChunk);
  auto done = [self = shared_from_this()](const beast::error_code& ec, size_t n) { self->OnRead(ec, n); };
  std::visit([&](auto& stream) { stream.async_read_some(buffers, std::move(done)); }, stream_);
}

void HttpConnection::OnRead(const beast::error_code& ec, size_t n) {
  if (closed_) return;
  buffer_.commit(n);
  if (!ec) return Parse();
  if (ec == asio::error::eof) {
    // The peer closed its side: between requests, or in the middle of one.
    const bool started = parser_->got_some() || buffer_.size() > 0;
    return OnReadError(started ? bhttp::error::partial_message : bhttp::error::end_of_stream);
  }
  OnReadError(ec);
}

void HttpConnection::OnReadError(const beast::error_code& ec) {
  if (ec == bhttp::error::header_limit) {
    return SendError(431, absl::StrCat("request header larger than ", core_->options.max_header_bytes, " bytes"));
  }
  if (ec == bhttp::error::body_limit) {
    return SendError(413, absl::StrCat("request body larger than ", core_->options.max_body_bytes, " bytes"));
  }
  // The peer left (end_of_stream: between requests; partial_message: during one),
  // went silent (timeout), or the socket failed: nobody to answer.
  const bool malformed = ec.category() == bhttp::make_error_code(bhttp::error::bad_method).category() &&
                         ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message;
  if (!malformed) {
    VLOG(2) << "http connection from " << remote_ << " ends: " << ec.message();
    return Close();
  }
  SendError(400, absl::StrCat("malformed request: ", ec.message()));
}

void HttpConnection::Dispatch() {
  auto& message = parser_->get();
  Request request;
  request.method = HttpStr(message.method_string());
  request.remote_address = remote_;
  request.loopback = loopback_;
  request.secure = stream_.index() == 1;
  request.client_certified = certified_;
  const unsigned version = message.version();
  const bool close = !message.keep_alive();
  if (!HttpParseTarget(std::string_view(message.target().data(), message.target().size()), &request)) {
    return Send(HttpErrorResponse(400, "malformed request target"), version, false, close);
  }
  request.headers.reserve(std::distance(message.begin(), message.end()));
  for (const auto& field : message) request.headers.emplace_back(HttpStr(field.name_string()), HttpStr(field.value()));
  request.body = std::move(message.body());
  parser_.reset();
  Response response = core_->Route(request);
  Send(std::move(response), version, request.method == "HEAD", close);
}

void HttpConnection::Send(Response response, unsigned version, bool head, bool close) {
  if (response.status < 200 || response.status > 599) {
    response = HttpErrorResponse(500, absl::StrCat("handler returned HTTP status ", response.status));
  }
  close = close || core_->stopping;
  bhttp::response<bhttp::string_body> out;
  out.version(version);
  out.result(static_cast<unsigned>(response.status));
  bool has_type = false, has_server = false, has_cache = false;
  for (const auto& [name, value] : response.headers) {
    if (!HttpHeaderIsSafe(name, value)) {
      LOG(WARNING) << "http handler for " << remote_ << " set an invalid header '" << absl::CEscape(name) << "': dropped";
      continue;
    }
    if (HttpEqualsIgnoreCase(name, "Content-Length") || HttpEqualsIgnoreCase(name, "Transfer-Encoding") ||
        HttpEqualsIgnoreCase(name, "Connection")) {
      continue;
    }
    has_type = has_type || HttpEqualsIgnoreCase(name, "Content-Type");
    has_server = has_server || HttpEqualsIgnoreCase(name, "Server");
    has_cache = has_cache || HttpEqualsIgnoreCase(name, "Cache-Control");
    out.insert(name, value);
  }
  if (!has_type && HttpHeaderIsSafe("Content-Type", response.content_type)) {
    out.set(bhttp::field::content_type, response.content_type);
  }
  if (!has_server) out.set(bhttp::field::server, core_->options.server_name);
  if (!has_cache) out.set(bhttp::field::cache_control, "no-store");
  if (response.status != 204 && response.status != 304) {
    // Set by hand, not by prepare_payload(): a HEAD response states the GET body's
    // length but carries no body.
    out.content_length(response.body.size());
    if (!head) out.body() = std::move(response.body);
  }
  out.keep_alive(!close);
  std::ostringstream text;
  text << out;  // the header, then the body (if any)
  out_ = std::move(text).str();
  Write(close ? AfterWrite::kLinger : AfterWrite::kReadHeader);
}

void HttpConnection::Write(AfterWrite next) {
  after_write_ = next;
  Tcp().expires_after(IdleTimeout());
  auto done = [self = shared_from_this()](const beast::error_code& ec, size_t) { self->OnWritten(ec); };
  std::visit([&](auto& stream) { asio::async_write(stream, asio::buffer(out_), std::move(done)); }, stream_);
}

void HttpConnection::OnWritten(const beast::error_code& ec) {
  out_.clear();
  if (ec || closed_) return Close();
  switch (after_write_) {
    case AfterWrite::kReadBody:
      return ReadBody();
    case AfterWrite::kReadHeader:
      return ReadHeader();
    case AfterWrite::kLinger:
      return Linger();
  }
}

void HttpConnection::Linger() {
  if (closed_) return;
  if (stream_.index() == 1) {
    // TLS: close_notify (a client reading to the end of the reply needs it), then
    // whatever the peer answers, within the linger time.
    Tcp().expires_after(std::min(IdleTimeout(), std::chrono::milliseconds(kHttpLingerMs)));
    std::get<1>(stream_).async_shutdown([self = shared_from_this()](const beast::error_code&) { self->Close(); });
    return;
  }
  if (!lingering_) {
    lingering_ = true;
    beast::error_code ignored;
    Tcp().socket().shutdown(HttpTcp::socket::shutdown_send, ignored);
    Tcp().expires_after(std::min(IdleTimeout(), std::chrono::milliseconds(kHttpLingerMs)));
  }
  Tcp().async_read_some(asio::buffer(discard_), [self = shared_from_this()](const beast::error_code& ec, size_t n) {
    self->lingered_bytes_ += n;
    if (ec || self->closed_ || self->lingered_bytes_ > kHttpLingerMaxBytes) return self->Close();
    self->Linger();
  });
}

void HttpCore::Accept() {
  acceptor.async_accept([this](const beast::error_code& ec, HttpTcp::socket socket) { OnAccept(ec, std::move(socket)); });
}

void HttpCore::OnAccept(const beast::error_code& ec, HttpTcp::socket socket) {
  if (stopping || ec == asio::error::operation_aborted) return;
  if (ec) {
    int64_t left_out = 0;
    if (warnings.Allow(&left_out)) {
      LOG(WARNING) << "http server on port " << port << " cannot accept: " << ec.message() << "; retrying in "
                   << kHttpAcceptRetryMs << " ms" << LogRateLimiter::LeftOut(left_out);
    }
    accept_retry.expires_after(std::chrono::milliseconds(kHttpAcceptRetryMs));
    accept_retry.async_wait([this](const beast::error_code& wait_ec) {
      if (!wait_ec && !stopping) Accept();
    });
    return;
  }
  beast::error_code peer_ec;
  const auto peer = socket.remote_endpoint(peer_ec);
  if (peer_ec) {
    // The peer has already gone.
  } else if (connections.size() >= static_cast<size_t>(std::max(options.max_connections, 1))) {
    Reject(std::move(socket));
  } else {
    beast::error_code ignored;
    socket.set_option(HttpTcp::no_delay(true), ignored);
    const uint64_t id = next_connection_id++;
    auto connection =
        std::make_shared<HttpConnection>(this, std::move(socket), id, HttpEndpointString(peer), HttpIsLoopback(peer.address()));
    connections.emplace(id, connection);
    connection->Start();
  }
  Accept();
}

void HttpCore::Reject(HttpTcp::socket socket) {
  int64_t left_out = 0;
  if (warnings.Allow(&left_out)) {
    LOG(WARNING) << "http server on port " << port << " is at its limit of " << options.max_connections
                 << " connections: refusing one" << LogRateLimiter::LeftOut(left_out);
  }
  const std::string body = "too many connections\n";
  const std::string text =
      absl::StrCat("HTTP/1.1 503 Service Unavailable\r\nServer: ", options.server_name,
                   "\r\nContent-Type: text/plain; charset=utf-8\r\nCache-Control: no-store\r\nConnection: close\r\n",
                   "Content-Length: ", body.size(), "\r\n\r\n", body);
  // One non-blocking send: a fresh socket's buffer takes it, and if it does not the
  // peer just sees the connection closed.
  beast::error_code ignored;
  socket.non_blocking(true, ignored);
  socket.send(asio::buffer(text), 0, ignored);
  socket.shutdown(HttpTcp::socket::shutdown_both, ignored);
  socket.close(ignored);
}

void HttpCore::Shutdown() {
  stopping = true;
  beast::error_code ignored;
  acceptor.close(ignored);
  accept_retry.cancel();
  // Copied first: a connection whose last owner is this list would otherwise remove
  // itself from `connections` while it is being walked.
  std::vector<std::shared_ptr<HttpConnection>> open;
  for (auto& [id, weak] : connections) {
    if (auto connection = weak.lock()) open.push_back(std::move(connection));
  }
  for (auto& connection : open) connection->Close();
}

const std::map<std::string, Handler>* HttpCore::FindRoute(const std::string& path) const {
  auto exact = routes.find(path);
  if (exact != routes.end()) return &exact->second;
  const std::map<std::string, Handler>* best = nullptr;
  size_t best_length = 0;
  for (const auto& [prefix, methods] : routes) {
    if (prefix.back() == '/' && prefix.size() > best_length && absl::StartsWith(path, prefix)) {
      best = &methods;
      best_length = prefix.size();
    }
  }
  return best;
}

Response HttpCore::RunHandler(const Handler& handler, const Request& request) {
  try {
    return handler(request);
  } catch (const std::exception& e) {
    LOG(WARNING) << "http handler for " << request.method << " " << request.path << " threw: " << e.what();
    return HttpErrorResponse(500, e.what());
  } catch (...) {
    LOG(WARNING) << "http handler for " << request.method << " " << request.path << " threw a non-std exception";
    return HttpErrorResponse(500, "unknown exception");
  }
}

Response HttpCore::Route(const Request& request) {
  const auto* methods = FindRoute(request.path);
  if (methods == nullptr) return HttpErrorResponse(404, "not found");
  auto it = methods->find(request.method);
  if (it == methods->end() && request.method == "HEAD") it = methods->find("GET");
  if (it != methods->end()) return RunHandler(it->second, request);
  std::vector<std::string> allowed;
  for (const auto& [method, handler] : *methods) allowed.push_back(method);
  if (methods->count("GET") != 0 && methods->count("HEAD") == 0) allowed.push_back("HEAD");
  std::sort(allowed.begin(), allowed.end());
  Response response = HttpErrorResponse(405, "method not allowed");
  response.headers.emplace_back("Allow", absl::StrJoin(allowed, ", "));
  return response;
}

}  // namespace http_internal

bool MemberRequest(const Request& request, std::string_view token) {
  return request.loopback || request.client_certified || HasBearerToken(request, token);
}

bool HasBearerToken(const Request& request, std::string_view token) {
  const std::string authorization = request.Header("Authorization");
  constexpr std::string_view kBearer = "bearer ";
  if (token.empty() || authorization.size() <= kBearer.size() ||
      !HttpEqualsIgnoreCase(std::string_view(authorization).substr(0, kBearer.size()), kBearer)) {
    return false;
  }
  return ConstantTimeEquals(HttpTrim(std::string_view(authorization).substr(kBearer.size())), token);
}

Response Unauthorized(std::string_view what) {
  Response response = HttpErrorResponse(
      401, absl::StrCat(std::string(what),
                        " from another host needs the cluster token (Authorization: Bearer <token>) or, over"
                        " HTTPS, a certificate of the cluster's CA"));
  response.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"manta\"");
  return response;
}

std::string Request::Header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (HttpEqualsIgnoreCase(key, name)) return value;
  }
  return "";
}

std::string Request::Cookie(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (!HttpEqualsIgnoreCase(key, "Cookie")) continue;
    std::string_view rest = value;
    while (!rest.empty()) {
      size_t semicolon = rest.find(';');
      std::string_view pair = HttpTrim(rest.substr(0, semicolon));
      rest = semicolon == std::string_view::npos ? std::string_view() : rest.substr(semicolon + 1);
      size_t eq = pair.find('=');
      if (eq == std::string_view::npos || HttpTrim(pair.substr(0, eq)) != name) continue;
      std::string_view cookie = HttpTrim(pair.substr(eq + 1));
      if (cookie.size() >= 2 && cookie.front() == '"' && cookie.back() == '"') cookie = cookie.substr(1, cookie.size() - 2);
      return std::string(cookie);
    }
  }
  return "";
}

struct HttpServer::Impl : http_internal::HttpCore {
  using HttpCore::HttpCore;
};

HttpServer::HttpServer(Options options) : impl_(std::make_unique<Impl>(std::move(options))) {}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Handle(std::string method, std::string path, Handler handler) {
  CHECK(!impl_->started) << "HttpServer::Handle(" << method << ", " << path << ") after Start()";
  CHECK(!path.empty() && path[0] == '/') << "HttpServer::Handle: path '" << path << "' does not start with '/'";
  impl_->routes[std::move(path)][std::move(method)] = std::move(handler);
}

absl::Status HttpServer::Start() {
  Impl& s = *impl_;
  if (s.started) return absl::FailedPreconditionError("HttpServer::Start: already started");
  const std::string where = absl::StrCat(s.options.host, ":", s.options.port);
  auto fail = [&where](const std::string& reason) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", where, ": ", reason));
  };
  if (s.options.port < 0 || s.options.port > 65535) return fail("port out of range");
  beast::error_code ec;
  HttpTcp::endpoint endpoint;
  const auto address = asio::ip::make_address(s.options.host, ec);
  if (!ec) {
    endpoint = HttpTcp::endpoint(address, static_cast<uint16_t>(s.options.port));
  } else {
    HttpTcp::resolver resolver(s.io);
    auto results = resolver.resolve(s.options.host, std::to_string(s.options.port), ec);
    if (ec || results.empty()) return fail(ec ? ec.message() : "host not found");
    endpoint = results.begin()->endpoint();
  }
  if (s.acceptor.open(endpoint.protocol(), ec); ec) return fail(ec.message());
  s.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  s.acceptor.bind(endpoint, ec);
  if (!ec) s.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    beast::error_code ignored;
    s.acceptor.close(ignored);
    return fail(ec.message());
  }
  s.port = s.acceptor.local_endpoint().port();
  if (s.options.tls.enabled()) {
    auto ctx = MakeTlsContext(s.options.tls, /*server=*/true);
    if (!ctx.ok()) {
      beast::error_code ignored;
      s.acceptor.close(ignored);
      return absl::InvalidArgumentError(absl::StrCat("cannot serve HTTPS on ", where, ": ", ctx.status().message()));
    }
    s.tls.emplace(std::move(*ctx));
  }
  s.started = true;
  s.Accept();
  s.thread = std::thread([&s] {
    for (;;) {
      try {
        s.io.run();
        return;
      } catch (const std::exception& e) {
        LOG(ERROR) << "http server on port " << s.port << ": " << e.what();
      }
    }
  });
  return absl::OkStatus();
}

int HttpServer::port() const { return impl_->port; }

std::string HttpServer::address() const {
  const std::string& host = impl_->options.host;
  if (host.find(':') != std::string::npos) return absl::StrCat("[", host, "]:", impl_->port);
  return absl::StrCat(host, ":", impl_->port);
}

void HttpServer::Stop() {
  Impl& s = *impl_;
  if (!s.started || s.stop_called) return;
  CHECK(std::this_thread::get_id() != s.thread.get_id()) << "HttpServer::Stop called from a handler";
  s.stop_called = true;
  asio::post(s.io, [&s] { s.Shutdown(); });
  s.thread.join();
}

}  // namespace manta::http
