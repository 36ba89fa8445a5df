#include "src/object_store/store_server.h"

#include <glog/logging.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <cstring>
#include <deque>

#include "protos/object_store.pb.h"
#include "src/common/logging.h"
#include "src/common/rpc/network_limits.h"

namespace manta::object_store {

namespace asio = boost::asio;
using asio::local::stream_protocol;

namespace {

std::string Frame(const rpc::StoreReply& reply) {
  std::string body = reply.SerializeAsString();
  uint32_t n = static_cast<uint32_t>(body.size());
  std::string frame(4, '\0');
  for (int i = 0; i < 4; ++i) frame[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return frame + body;
}

void SetError(rpc::StoreReply* reply, const absl::Status& s) {
  reply->set_code(static_cast<int32_t>(s.code()));
  reply->set_message(std::string(s.message()));
}

}  // namespace

struct Connection : std::enable_shared_from_this<Connection> {
  Connection(StoreServer::Impl* server, stream_protocol::socket socket, ClientId id)
      : server(server), socket(std::move(socket)), id(id) {}
  StoreServer::Impl* server;
  stream_protocol::socket socket;
  ClientId id;
  // Bytes read but not yet parsed; frames are parsed in batches, so pipelined
  // one-way requests (Seal, Release) cost one read and one wake-up together.
  std::string inbox;
  size_t inbox_used = 0;
  std::string outbox;  // frames waiting to be written, concatenated
  std::string writing_buf;
  bool writing = false;
  bool handling = false;  // inside HandleFrames
  bool closed = false;
  bool connected = false;  // sent a Connect
  std::string name;        // as it connected

  void Read();
  // Handles every complete frame in the inbox; false if the connection was closed.
  bool HandleFrames();
  void Handle(const rpc::StoreRequest& request);
  void HandleConnect(const rpc::StoreConnectRequest& request, rpc::StoreReply reply);
  void HandleCreate(const rpc::StoreCreateRequest& request, rpc::StoreReply reply);
  void HandleGet(const rpc::StoreGetRequest& request, rpc::StoreReply reply);
  // Seal, Release and Abort: one object, answered at once.
  void HandleOneObjectCall(const rpc::StoreRequest& request, rpc::StoreReply reply);
  void Send(const rpc::StoreReply& reply);
  void Flush();
  void Close(const std::string& why);
};

struct StoreServer::Impl {
  EventLoop& loop;
  ObjectStore& store;
  const Arena& arena;
  asio::io_context& io;
  std::unique_ptr<stream_protocol::acceptor> acceptor;
  absl::flat_hash_map<ClientId, std::shared_ptr<Connection>> connections;
  ClientId next_id = 1;
  const StoreServerOptions options;

  Impl(EventLoop& l, ObjectStore& s, const Arena& a, StoreServerOptions o)
      : loop(l), store(s), arena(a), io(*static_cast<asio::io_context*>(l.native_handle())), options(o) {}

  LogRateLimiter refusals;
  bool stopped = false;

  void Accept() {
    acceptor->async_accept([this](const boost::system::error_code& ec, stream_protocol::socket socket) {
      if (ec) {
        if (ec == asio::error::operation_aborted || stopped) return;
        // Out of descriptors (or memory): pause instead of spinning on a listener that
        // stays readable, and serve the clients already connected meanwhile.
        const int64_t pause_ms = rpc::CurrentNetworkLimits().accept_pause_ms;
        LOG_EVERY_N(WARNING, 100) << "store accept failed: " << ec.message() << "; retrying in " << pause_ms << " ms";
        loop.PostAfter("StoreServer.ResumeAccept", pause_ms, [this] {
          if (!stopped) Accept();
        });
        return;
      }
      Admit(std::move(socket));
      Accept();
    });
  }

  // Serves a new client if it runs as this user.
  void Admit(stream_protocol::socket socket) {
    ucred peer{};
    socklen_t len = sizeof(peer);
    if (getsockopt(socket.native_handle(), SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0 ||
        peer.uid != options.allowed_uid) {
      int64_t others = 0;
      if (refusals.Allow(&others)) {
        LOG(WARNING) << "refused object store client pid " << peer.pid << ": it runs as uid " << peer.uid
                     << ", not as uid " << options.allowed_uid << LogRateLimiter::LeftOut(others);
      }
      return;  // closing the socket refuses it
    }
    size_t pending = 0;
    for (const auto& [id, c] : connections) pending += c->connected ? 0 : 1;
    if (static_cast<int64_t>(pending) >= options.max_pending_connects) {
      int64_t others = 0;
      if (refusals.Allow(&others)) {
        LOG(WARNING) << "refused object store client pid " << peer.pid << ": " << pending
                     << " clients have not sent Connect yet" << LogRateLimiter::LeftOut(others);
      }
      return;
    }
    auto conn = std::make_shared<Connection>(this, std::move(socket), next_id++);
    connections[conn->id] = conn;
    conn->Read();
    std::weak_ptr<Connection> weak = conn;
    loop.PostAfter("StoreServer.ConnectTimeout", options.connect_timeout_ms, [weak, ms = options.connect_timeout_ms] {
      auto c = weak.lock();
      if (c && !c->connected) c->Close("no Connect within " + std::to_string(ms) + " ms");
    });
  }
};

void Connection::Read() {
  // Room for what may come next, in proportion to what has come: a peer announcing a
  // large frame makes this grow only as its bytes arrive.
  const size_t room = std::max<size_t>(64 * 1024, inbox_used);
  if (inbox.size() - inbox_used < 64 * 1024) inbox.resize(inbox_used + room);
  auto self = shared_from_this();
  socket.async_read_some(asio::buffer(inbox.data() + inbox_used, inbox.size() - inbox_used),
                         [self](const boost::system::error_code& ec, size_t n) {
                           if (ec) return self->Close(ec == asio::error::eof ? "" : ec.message());
                           self->inbox_used += n;
                           if (self->HandleFrames()) self->Read();
                         });
}

bool Connection::HandleFrames() {
  handling = true;
  size_t pos = 0;
  while (!closed && inbox_used - pos >= 4) {
    uint32_t n = 0;
    for (int i = 0; i < 4; ++i) n |= static_cast<uint32_t>(static_cast<uint8_t>(inbox[pos + i])) << (8 * i);
    if (n > StoreServer::kMaxFrameBytes) {
      handling = false;
      Close("frame of " + std::to_string(n) + " bytes exceeds the limit");
      return false;
    }
    if (inbox_used - pos - 4 < n) break;  // the rest of this frame has not arrived
    rpc::StoreRequest request;
    if (!request.ParseFromArray(inbox.data() + pos + 4, static_cast<int>(n))) {
      handling = false;
      Close("malformed frame");
      return false;
    }
    pos += 4 + n;
    Handle(request);
  }
  handling = false;
  if (closed) return false;
  // Keep the unparsed tail at the front.
  if (pos > 0) {
    std::memmove(inbox.data(), inbox.data() + pos, inbox_used - pos);
    inbox_used -= pos;
  }
  Flush();
  return true;
}

void Connection::Send(const rpc::StoreReply& reply) {
  if (closed) return;
  outbox += Frame(reply);
  // Replies produced while handling a batch of frames go out in one write (see
  // HandleFrames); replies completed later (a waiting Get) go out now.
  if (!handling) Flush();
}

void Connection::Flush() {
  if (writing || outbox.empty() || closed) return;
  writing = true;
  writing_buf.swap(outbox);
  outbox.clear();
  auto self = shared_from_this();
  asio::async_write(socket, asio::buffer(writing_buf), [self](const boost::system::error_code& ec, size_t) {
    self->writing = false;
    if (ec) return self->Close(ec.message());
    self->writing_buf.clear();
    self->Flush();
  });
}

void Connection::Close(const std::string& why) {
  if (closed) return;
  closed = true;
  if (!why.empty()) LOG(WARNING) << "closing object store client " << id << ": " << why;
  boost::system::error_code ignored;
  // Shut down, not only closed: a copy of the socket held elsewhere (a child that
  // inherited it) would keep it open, and the client would not see it dropped.
  socket.shutdown(asio::local::stream_protocol::socket::shutdown_both, ignored);
  socket.close(ignored);
  server->store.DisconnectClient(id);
  const bool was_connected = connected;
  const std::string client_name = name;
  StoreServer::Impl* owner = server;
  owner->connections.erase(id);  // may destroy this connection
  if (was_connected && !owner->stopped && owner->options.on_client_closed) owner->options.on_client_closed(client_name);
}

namespace {

// The ids of a request, or an error naming the bad one.
absl::StatusOr<std::vector<ObjectID>> IdsOf(const google::protobuf::RepeatedPtrField<std::string>& binaries) {
  std::vector<ObjectID> ids;
  ids.reserve(binaries.size());
  for (const auto& b : binaries) {
    auto id = ObjectID::FromBinaryChecked(b);
    if (!id.ok()) return id.status();
    ids.push_back(*id);
  }
  return ids;
}

}  // namespace

void Connection::Handle(const rpc::StoreRequest& request) {
  if (!connected && request.request_case() != rpc::StoreRequest::kConnect) return Close("request before Connect");
  rpc::StoreReply reply;
  reply.set_request_id(request.request_id());
  switch (request.request_case()) {
    case rpc::StoreRequest::kConnect:
      return HandleConnect(request.connect(), std::move(reply));
    case rpc::StoreRequest::kCreate:
      return HandleCreate(request.create(), std::move(reply));
    case rpc::StoreRequest::kGet:
      return HandleGet(request.get(), std::move(reply));
    case rpc::StoreRequest::kContains: {
      auto oid = ObjectID::FromBinaryChecked(request.contains().object_id());
      if (!oid.ok()) return Close("Contains with a malformed object id");
      reply.mutable_contains()->set_has_object(server->store.Contains(*oid));
      return Send(reply);
    }
    case rpc::StoreRequest::kDelete: {
      auto ids = IdsOf(request.delete_().object_ids());
      if (!ids.ok()) return Close("Delete with a malformed object id");
      server->store.Delete(*ids);
      if (!request.no_reply()) Send(reply);
      return;
    }
    case rpc::StoreRequest::kSeal:
    case rpc::StoreRequest::kRelease:
    case rpc::StoreRequest::kAbort:
      return HandleOneObjectCall(request, std::move(reply));
    case rpc::StoreRequest::REQUEST_NOT_SET:
      return Close("empty request");
  }
}

void Connection::HandleConnect(const rpc::StoreConnectRequest& request, rpc::StoreReply reply) {
  if (request.name().size() > StoreServer::kMaxClientNameBytes) return Close("client name too long");
  connected = true;
  name = request.name();
  reply.mutable_connect()->set_capacity_bytes(server->arena.capacity());
  std::string frame = Frame(reply);
  // Hand over the arena's fd with the reply (the first bytes on this socket).
  int fd = server->arena.fd();
  char control[CMSG_SPACE(sizeof(int))] = {};
  iovec iov{frame.data(), frame.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));
  ssize_t sent = sendmsg(socket.native_handle(), &msg, MSG_NOSIGNAL);
  if (sent != static_cast<ssize_t>(frame.size())) return Close("cannot send the arena to the client");
  if (server->options.on_client_connected) server->options.on_client_connected(name);
}

void Connection::HandleCreate(const rpc::StoreCreateRequest& q, rpc::StoreReply reply) {
  auto oid = ObjectID::FromBinaryChecked(q.object_id());
  if (!oid.ok()) return Close("Create with a malformed object id");
  std::weak_ptr<Connection> weak = shared_from_this();
  server->store.Create(id, *oid, q.data_size(), q.metadata_size(), q.pin_on_seal(),
                       [weak, reply = std::move(reply), oid = *oid,
                        owner = WorkerID::FromBinaryChecked(q.owner_worker_id()).value_or(WorkerID::Nil())](
                           absl::StatusOr<ObjectLocation> loc) mutable {
                         auto self = weak.lock();
                         if (!self || self->closed) return;
                         if (loc.ok() && !owner.IsNil()) self->server->store.SetOwner(oid, owner);
                         if (loc.ok()) {
                           reply.mutable_create()->set_offset(loc->offset);
                         } else {
                           SetError(&reply, loc.status());
                         }
                         self->Send(reply);
                       });
}

void Connection::HandleGet(const rpc::StoreGetRequest& q, rpc::StoreReply reply) {
  auto ids = IdsOf(q.object_ids());
  if (!ids.ok()) return Close("Get with a malformed object id");
  std::weak_ptr<Connection> weak = shared_from_this();
  server->store.Get(id, *ids, q.timeout_ms(),
                    [weak, reply = std::move(reply)](std::vector<std::optional<ObjectLocation>> results) mutable {
                      auto self = weak.lock();
                      if (!self || self->closed) return;
                      for (const auto& r : results) {
                        rpc::StoreObject* o = reply.mutable_get()->add_objects();
                        o->set_found(r.has_value());
                        if (r) {
                          o->set_offset(r->offset);
                          o->set_data_size(r->data_size);
                          o->set_metadata_size(r->metadata_size);
                        }
                      }
                      self->Send(reply);
                    });
}

void Connection::HandleOneObjectCall(const rpc::StoreRequest& request, rpc::StoreReply reply) {
  ObjectStore& store = server->store;
  const bool seal = request.has_seal(), release = request.has_release();
  const std::string& binary =
      seal ? request.seal().object_id() : release ? request.release().object_id() : request.abort().object_id();
  auto oid = ObjectID::FromBinaryChecked(binary);
  if (!oid.ok()) {
    return Close(std::string(seal ? "Seal" : release ? "Release" : "Abort") + " with a malformed object id");
  }
  absl::Status s = seal      ? store.Seal(id, *oid, request.seal().release())
                   : release ? store.Release(id, *oid)
                             : store.Abort(id, *oid);
  if (!s.ok()) SetError(&reply, s);
  // One-way calls are answered only with an error.
  if (!request.no_reply() || !s.ok()) Send(reply);
}

StoreServer::StoreServer(EventLoop& loop, ObjectStore& store, const Arena& arena, std::string socket_path,
                         StoreServerOptions options)
    : impl_(std::make_unique<Impl>(loop, store, arena, options)), socket_path_(std::move(socket_path)) {}

StoreServer::~StoreServer() { Stop(); }

absl::Status StoreServer::Start() {
  if (socket_path_.size() >= kMaxSocketPathBytes) {
    return absl::InvalidArgumentError("store socket path " + socket_path_ + " is " +
                                      std::to_string(socket_path_.size()) + " bytes; Unix sockets allow at most " +
                                      std::to_string(kMaxSocketPathBytes - 1));
  }
  unlink(socket_path_.c_str());
  boost::system::error_code ec;
  auto acceptor = std::make_unique<stream_protocol::acceptor>(impl_->io);
  acceptor->open(stream_protocol(), ec);
  if (!ec) acceptor->bind(stream_protocol::endpoint(socket_path_), ec);
  if (!ec) acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return absl::UnavailableError("cannot listen on store socket " + socket_path_ + ": " + ec.message());
  // Only this user may connect (the peer's uid is checked too, which covers the
  // moment between bind and chmod).
  if (chmod(socket_path_.c_str(), 0600) != 0) {
    return absl::UnavailableError("cannot make the store socket " + socket_path_ + " private: " + std::strerror(errno));
  }
  impl_->stopped = false;
  impl_->acceptor = std::move(acceptor);
  impl_->Accept();
  return absl::OkStatus();
}

void StoreServer::Stop() {
  impl_->stopped = true;
  if (impl_->acceptor) {
    boost::system::error_code ignored;
    impl_->acceptor->close(ignored);
    impl_->acceptor.reset();
    unlink(socket_path_.c_str());
  }
  auto conns = impl_->connections;
  for (auto& [id, c] : conns) c->Close("");
}

size_t StoreServer::num_clients() const { return impl_->connections.size(); }

}  // namespace manta::object_store
