#include "src/common/rpc/tls_relay.h"

#include <glog/logging.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "src/common/rpc/tcp_acceptor.h"

namespace manta::rpc {

namespace {

// The most recent OpenSSL error as text (and the queue cleared), or `fallback`.
std::string OpenSslError(const std::string& fallback) {
  unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return fallback;
  char text[256];
  ERR_error_string_n(code, text, sizeof(text));
  return text;
}

// Reads every certificate in `pem`, in order.
std::vector<X509*> ReadCertificates(const std::string& pem) {
  std::vector<X509*> out;
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (bio == nullptr) return out;
  while (X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) out.push_back(cert);
  ERR_clear_error();  // the end of the input reads as an error
  BIO_free(bio);
  return out;
}

// gRPC clients insist that the server selects HTTP/2 by ALPN.
int SelectHttp2(SSL*, const unsigned char** out, unsigned char* out_len, const unsigned char* offered,
                unsigned int offered_len, void*) {
  static const unsigned char kHttp2[] = {2, 'h', '2'};
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, out_len, kHttp2, sizeof(kHttp2), offered, offered_len) !=
      OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_ALERT_FATAL;
  }
  *out = selected;
  return SSL_TLSEXT_ERR_OK;
}

}  // namespace

// Named, not anonymous: TlsRelay::Connection holds two (GCC warns about a member of
// an anonymous type when this file is compiled inside a unity batch).
namespace tls_relay_internal {

// Bytes read from one side and not yet written to the other.
// Allocated when first written to (after the handshake): a connection that never
// completes one costs no more than its SSL state.
class Buffer {
 public:
  bool empty() const { return begin_ == end_; }
  bool full() const { return !bytes_.empty() && begin_ == 0 && end_ == bytes_.size(); }
  const char* data() const { return bytes_.data() + begin_; }
  size_t size() const { return end_ - begin_; }
  // Room at the end, after moving what is held to the front when that makes more.
  char* space(size_t* n) {
    if (bytes_.empty()) bytes_.resize(TlsRelay::kBufferBytes);
    if (begin_ > 0 && end_ == bytes_.size()) {
      std::memmove(bytes_.data(), bytes_.data() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    *n = bytes_.size() - end_;
    return bytes_.data() + end_;
  }
  void Added(size_t n) { end_ += n; }
  void Consumed(size_t n) {
    begin_ += n;
    if (begin_ == end_) begin_ = end_ = 0;
  }

 private:
  std::vector<char> bytes_;
  size_t begin_ = 0;
  size_t end_ = 0;
};

}  // namespace tls_relay_internal

using tls_relay_internal::Buffer;

namespace {
constexpr uint64_t kWakeTag = 0;
}  // namespace

struct TlsRelay::Connection {
  // epoll data: the connection's address with the low bit set for the gRPC side
  // (both are at least 2-aligned).
  uint64_t Tag(bool grpc_side) const { return reinterpret_cast<uint64_t>(this) | (grpc_side ? 1 : 0); }

  int tcp = -1;   // the peer's TLS connection
  int app = -1;   // our end of the socketpair; gRPC holds the other
  SSL* ssl = nullptr;
  std::string peer;  // "ipv4:10.0.0.5:41234", for log lines
  bool sniffed = false;  // its first byte was looked at (with a plain handler)
  bool handshake_done = false;
  bool tcp_eof = false;  // the peer will send nothing more
  bool app_eof = false;  // gRPC will send nothing more
  bool app_shut = false;  // we told gRPC that the peer will send nothing more
  bool app_deaf = false;  // gRPC reads nothing more: what the peer sends is dropped
  bool tcp_wants_write = false;  // the last TLS operation waits for room on the socket
  bool closed = false;
  uint32_t tcp_events = 0;  // what epoll watches now
  uint32_t app_events = 0;
  Buffer up;    // peer -> gRPC
  Buffer down;  // gRPC -> peer
};

absl::StatusOr<std::unique_ptr<TlsRelay>> TlsRelay::Create(const std::string& cert_pem, const std::string& key_pem,
                                                           const std::string& ca_pem) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return absl::InternalError("SSL_CTX_new: " + OpenSslError("failed"));
  auto fail = [ctx](const std::string& what) {
    SSL_CTX_free(ctx);
    return absl::InvalidArgumentError(what);
  };
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_TICKET | SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_num_tickets(ctx, 0);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS);

  std::vector<X509*> chain = ReadCertificates(cert_pem);
  if (chain.empty()) return fail("the TLS certificate holds no PEM certificate");
  bool used = SSL_CTX_use_certificate(ctx, chain[0]) == 1;
  X509_free(chain[0]);
  for (size_t i = 1; i < chain.size(); ++i) {
    if (SSL_CTX_add0_chain_cert(ctx, chain[i]) != 1) X509_free(chain[i]);  // add0 owns it when it succeeds
  }
  if (!used) return fail("the TLS certificate cannot be used: " + OpenSslError("unknown error"));

  BIO* bio = BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size()));
  EVP_PKEY* key = bio == nullptr ? nullptr : PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  if (key == nullptr) return fail("the TLS key holds no PEM private key: " + OpenSslError("unreadable"));
  used = SSL_CTX_use_PrivateKey(ctx, key) == 1;
  EVP_PKEY_free(key);
  if (!used || SSL_CTX_check_private_key(ctx) != 1) {
    return fail("the TLS key does not match the TLS certificate: " + OpenSslError("mismatch"));
  }

  std::vector<X509*> authorities = ReadCertificates(ca_pem);
  if (authorities.empty()) return fail("the TLS CA file holds no PEM certificate");
  X509_STORE* store = SSL_CTX_get_cert_store(ctx);
  for (X509* ca : authorities) {
    X509_STORE_add_cert(store, ca);
    X509_free(ca);
  }
  ERR_clear_error();
  // Mutual: a peer without a certificate from the CA does not get past the handshake.
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  SSL_CTX_set_alpn_select_cb(ctx, SelectHttp2, nullptr);

  int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  int wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd < 0 || wake_fd < 0) {
    std::string why = std::strerror(errno);
    if (epoll_fd >= 0) close(epoll_fd);
    if (wake_fd >= 0) close(wake_fd);
    SSL_CTX_free(ctx);
    return absl::UnavailableError("cannot start the TLS relay: " + why);
  }
  epoll_event wake{};
  wake.events = EPOLLIN;
  wake.data.u64 = kWakeTag;
  epoll_ctl(epoll_fd, EPOLL_CTL_ADD, wake_fd, &wake);
  return std::unique_ptr<TlsRelay>(new TlsRelay(ctx, epoll_fd, wake_fd));
}

TlsRelay::TlsRelay(SSL_CTX* ctx, int epoll_fd, int wake_fd) : ctx_(ctx), epoll_fd_(epoll_fd), wake_fd_(wake_fd) {}

TlsRelay::~TlsRelay() {
  Stop();
  close(epoll_fd_);
  close(wake_fd_);
  SSL_CTX_free(ctx_);
}

void TlsRelay::Start(OnReady on_ready) {
  on_ready_ = std::move(on_ready);
  thread_ = std::thread([this] { Run(); });
}

void TlsRelay::Add(int fd) {
  {
    std::lock_guard<std::mutex> lock(incoming_mu_);
    incoming_.push_back(fd);
  }
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(wake_fd_, &one, sizeof(one));
}

void TlsRelay::StopHandoffs() {
  std::lock_guard<std::mutex> lock(handoff_mu_);
  handoffs_stopped_ = true;
}

void TlsRelay::Stop() {
  if (stopping_.exchange(true)) return;
  StopHandoffs();
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(wake_fd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  for (auto& [ptr, c] : connections_) Close(*c);
  connections_.clear();
  closed_.clear();
  std::lock_guard<std::mutex> lock(incoming_mu_);
  for (int fd : incoming_) close(fd);
  incoming_.clear();
}

void TlsRelay::TakeNewConnections() {
  std::vector<int> fds;
  {
    std::lock_guard<std::mutex> lock(incoming_mu_);
    fds.swap(incoming_);
  }
  for (int fd : fds) {
    auto c = std::make_unique<Connection>();
    c->tcp = fd;
    c->peer = DescribePeer("fd:" + std::to_string(fd));
    c->ssl = SSL_new(ctx_);
    if (c->ssl == nullptr || SSL_set_fd(c->ssl, fd) != 1) {
      LOG(WARNING) << "TLS relay: cannot start a session for " << c->peer << ": " << OpenSslError("out of memory");
      if (c->ssl != nullptr) SSL_free(c->ssl);
      close(fd);
      continue;
    }
    SSL_set_accept_state(c->ssl);
    ++num_connections_;
    Connection* raw = c.get();
    connections_.emplace(raw, std::move(c));
    Pump(*raw);  // the ClientHello may be here already
  }
}

void TlsRelay::Run() {
  // OpenSSL writes to the socket with write(), not send(MSG_NOSIGNAL): a peer that
  // is gone would raise SIGPIPE and kill the process. Blocked in this thread, the
  // signal (thread-directed) stays pending and the write fails with EPIPE.
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
  std::vector<epoll_event> events(256);
  while (!stopping_.load()) {
    int n = epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), -1);
    ++num_wakeups_;
    if (n < 0) {
      if (errno == EINTR) continue;
      PLOG(ERROR) << "TLS relay: epoll_wait";
      return;
    }
    for (int i = 0; i < n; ++i) {
      if (events[i].data.u64 == kWakeTag) {
        uint64_t count;
        [[maybe_unused]] ssize_t r = read(wake_fd_, &count, sizeof(count));
        continue;
      }
      auto* c = reinterpret_cast<Connection*>(events[i].data.u64 & ~uint64_t{1});
      if (c->closed) continue;  // closed earlier in this batch
      const bool moved = Pump(*c);
      // A hung-up side that nothing could be moved for will never move again (and
      // would keep waking the thread).
      if (!moved && !c->closed && (events[i].events & (EPOLLHUP | EPOLLERR))) Close(*c);
    }
    if (stopping_.load()) return;
    TakeNewConnections();
    for (Connection* c : closed_) connections_.erase(c);
    closed_.clear();
  }
}

TlsRelay::Sniffed TlsRelay::Sniff(Connection& c) {
  if (c.sniffed || !plain_handler_) return Sniffed::kTls;
  unsigned char first = 0;
  ssize_t n = recv(c.tcp, &first, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return Sniffed::kWait;
  c.sniffed = true;
  constexpr unsigned char kTlsHandshakeRecord = 0x16;
  if (n <= 0 || first == kTlsHandshakeRecord) return Sniffed::kTls;  // the handshake reports errors
  if (c.tcp_events != 0) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.tcp, nullptr);
  c.tcp_events = 0;
  SSL_free(c.ssl);
  c.ssl = nullptr;
  const int fd = c.tcp;
  c.tcp = -1;
  c.closed = true;
  --num_connections_;
  closed_.push_back(&c);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  plain_handler_(fd);
  return Sniffed::kHandedOff;
}

bool TlsRelay::Handshake(Connection& c) {
  // A connection handed to the plain handler is closed here: nothing more to do.
  if (Sniff(c) != Sniffed::kTls) return false;
  ERR_clear_error();
  int r = SSL_do_handshake(c.ssl);
  if (r != 1) {
    int error = SSL_get_error(c.ssl, r);
    if (error == SSL_ERROR_WANT_READ) return false;
    if (error == SSL_ERROR_WANT_WRITE) {
      c.tcp_wants_write = true;
      return false;
    }
    std::string why = OpenSslError(error == SSL_ERROR_SYSCALL ? "the connection ended" : "protocol error");
    if (long verify = SSL_get_verify_result(c.ssl); verify != X509_V_OK) {
      why += " (peer certificate: " + std::string(X509_verify_cert_error_string(verify)) + ")";
    }
    int64_t others = 0;
    if (warnings_.Allow(&others)) {
      LOG(WARNING) << "TLS handshake with " << c.peer << " failed: " << why << LogRateLimiter::LeftOut(others);
    }
    Close(c);
    return false;
  }
  c.handshake_done = true;
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair) != 0) {
    PLOG(WARNING) << "TLS relay: socketpair for " << c.peer;
    Close(c);
    return false;
  }
  c.app = pair[0];
  std::lock_guard<std::mutex> lock(handoff_mu_);
  if (handoffs_stopped_) {
    close(pair[1]);
    Close(c);
    return false;
  }
  on_ready_(c.tcp, pair[1]);
  return true;
}

TlsRelay::SslOutcome TlsRelay::Outcome(Connection& c, int result) {
  if (result > 0) return SslOutcome::kMoved;
  const int error = SSL_get_error(c.ssl, result);
  if (error == SSL_ERROR_WANT_WRITE) c.tcp_wants_write = true;
  return error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE ? SslOutcome::kWait : SslOutcome::kOver;
}

bool TlsRelay::Pump(Connection& c) {
  bool moved_any = false;
  bool moved = true;
  c.tcp_wants_write = false;
  while (moved && !c.closed) {
    moved = false;
    if (!c.handshake_done) {
      if (!Handshake(c)) break;
      moved = true;
    }
    // Peer -> gRPC.
    if (!c.tcp_eof && !c.app_deaf && !c.up.full()) {
      size_t room = 0;
      char* into = c.up.space(&room);
      ERR_clear_error();
      int r = SSL_read(c.ssl, into, static_cast<int>(room));
      SslOutcome outcome = Outcome(c, r);
      if (outcome == SslOutcome::kMoved) c.up.Added(static_cast<size_t>(r));
      if (outcome == SslOutcome::kOver) c.tcp_eof = true;  // closed, cleanly or not: nothing more comes
      moved |= outcome != SslOutcome::kWait;
    }
    if (!c.up.empty()) {
      ssize_t n = send(c.app, c.up.data(), c.up.size(), MSG_NOSIGNAL);
      if (n > 0) {
        c.up.Consumed(static_cast<size_t>(n));
        moved = true;
      } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        // gRPC closed its end. What it wrote before that (its last replies, a
        // GOAWAY) is still to be read and sent on; what the peer sends is dropped.
        c.app_deaf = true;
        c.up.Consumed(c.up.size());
        moved = true;
      }
    }
    if (c.tcp_eof && c.up.empty() && !c.app_shut) {
      shutdown(c.app, SHUT_WR);
      c.app_shut = true;
    }
    // gRPC -> peer.
    if (!c.app_eof && !c.down.full()) {
      size_t room = 0;
      char* into = c.down.space(&room);
      ssize_t n = read(c.app, into, room);
      if (n > 0) {
        c.down.Added(static_cast<size_t>(n));
        moved = true;
      } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        c.app_eof = true;
        moved = true;
      }
    }
    if (!c.down.empty()) {
      ERR_clear_error();
      int r = SSL_write(c.ssl, c.down.data(), static_cast<int>(c.down.size()));
      SslOutcome outcome = Outcome(c, r);
      if (outcome == SslOutcome::kOver) {
        Close(c);  // the peer is gone
        break;
      }
      if (outcome == SslOutcome::kMoved) {
        c.down.Consumed(static_cast<size_t>(r));
        moved = true;
      }
    }
    // gRPC is done with the connection and all it said has gone out (a peer that
    // is gone makes SSL_write fail above): nothing is left to relay.
    if (c.app_eof && c.down.empty()) {
      if (!c.tcp_eof) SSL_shutdown(c.ssl);  // close_notify, if there is room for it
      Close(c);
      break;
    }
    moved_any |= moved;
  }
  if (!c.closed) Watch(c);
  return moved_any;
}

void TlsRelay::Watch(Connection& c) {
  auto update = [this](int fd, uint64_t tag, uint32_t wanted, uint32_t* current) {
    if (fd < 0 || wanted == *current) return;
    epoll_event event{};
    event.events = wanted;
    event.data.u64 = tag;
    int op = *current == 0 ? EPOLL_CTL_ADD : wanted == 0 ? EPOLL_CTL_DEL : EPOLL_CTL_MOD;
    if (epoll_ctl(epoll_fd_, op, fd, &event) == 0) *current = wanted;
  };
  uint32_t tcp = 0;
  if (!c.tcp_eof && !c.app_deaf && (!c.handshake_done || !c.up.full())) tcp |= EPOLLIN;
  if (c.tcp_wants_write) tcp |= EPOLLOUT;
  // Nothing watched (a full buffer) is not watched at all: a hang-up would be
  // reported at once, again and again, while nothing can be done about it.
  update(c.tcp, c.Tag(false), tcp, &c.tcp_events);
  if (c.app >= 0) {
    uint32_t app = 0;
    if (!c.app_eof && !c.down.full()) app |= EPOLLIN;
    if (!c.up.empty()) app |= EPOLLOUT;
    update(c.app, c.Tag(true), app, &c.app_events);
  }
}

void TlsRelay::Close(Connection& c) {
  if (c.closed) return;
  c.closed = true;
  // Closing a descriptor does not take it out of the epoll set while another
  // descriptor refers to the same socket (the acceptor's duplicate of an unproven
  // connection): events would keep coming for a freed Connection.
  if (c.tcp >= 0 && c.tcp_events != 0) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.tcp, nullptr);
  if (c.app >= 0 && c.app_events != 0) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.app, nullptr);
  c.tcp_events = c.app_events = 0;
  if (c.ssl != nullptr) SSL_free(c.ssl);
  c.ssl = nullptr;
  // Shut down, not only closed: the acceptor may hold a duplicate of the socket
  // (unproven connections), which would keep it open for the peer.
  if (c.tcp >= 0) {
    shutdown(c.tcp, SHUT_RDWR);
    close(c.tcp);
  }
  if (c.app >= 0) close(c.app);
  c.tcp = c.app = -1;
  --num_connections_;
  closed_.push_back(&c);
}

}  // namespace manta::rpc
