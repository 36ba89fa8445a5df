#include "src/object_store/store_client.h"

#include <glog/logging.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "protos/object_store.pb.h"
#include "src/common/util.h"

namespace manta::object_store {
namespace {

absl::Status StatusOf(const rpc::StoreReply& reply) {
  if (reply.code() == 0) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(reply.code()), reply.message());
}

absl::Status ReadExact(int fd, void* buf, size_t n) {
  size_t got = 0;
  // A reply usually arrives within tens of microseconds: poll for up to 200 us before
  // sleeping, since a sleep and wake-up across CPUs costs more than the wait itself.
  auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
  while (got < n) {
    ssize_t r = recv(fd, static_cast<char*>(buf) + got, n - got, MSG_DONTWAIT);
    if (r > 0) {
      got += static_cast<size_t>(r);
      continue;
    }
    if (r == 0) return absl::UnavailableError("object store connection closed");
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      return absl::UnavailableError("object store connection closed");
    }
    if (std::chrono::steady_clock::now() >= spin_until) break;
  }
  while (got < n) {
    ssize_t r = read(fd, static_cast<char*>(buf) + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return absl::UnavailableError("object store connection closed");
    got += static_cast<size_t>(r);
  }
  return absl::OkStatus();
}

// Reads a frame body of `len` bytes into *body, which grows as the bytes arrive (at
// most doubling): a corrupt length ends in an error at the end of the stream, never
// in gigabytes reserved up front.
absl::Status ReadBody(int fd, uint32_t len, std::string* body) {
  constexpr size_t kFirstStep = 64 << 10;
  body->clear();
  while (body->size() < len) {
    const size_t have = body->size();
    const size_t step = std::min<size_t>(len - have, std::max(kFirstStep, have));
    body->resize(have + step);
    if (absl::Status s = ReadExact(fd, body->data() + have, step); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

bool ObjectStoreClient::PeerClosed() const {
  pollfd p{fd_, POLLRDHUP, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

absl::StatusOr<std::unique_ptr<ObjectStoreClient>> ObjectStoreClient::Connect(const std::string& socket_path,
                                                                           const std::string& name) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(std::string("socket: ") + std::strerror(errno));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof(addr.sun_path)) {
    close(fd);
    return absl::InvalidArgumentError("store socket path too long: " + socket_path);
  }
  std::strncpy(addr.sun_path, socket_path.c_str(), sizeof(addr.sun_path) - 1);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    int err = errno;
    close(fd);
    return absl::UnavailableError("cannot connect to the object store at " + socket_path + ": " +
                                  std::strerror(err));
  }
  std::unique_ptr<ObjectStoreClient> client(new ObjectStoreClient(fd));
  rpc::StoreRequest request;
  request.set_request_id(0);
  request.mutable_connect()->set_pid(getpid());
  request.mutable_connect()->set_name(name);
  {
    absl::MutexLock lock(&client->mu_);
    if (auto s = client->SendFrame(request.SerializeAsString()); !s.ok()) return s;
  }

  // The reply carries the arena fd as ancillary data on its first bytes.
  uint8_t header[4];
  char control[CMSG_SPACE(sizeof(int))] = {};
  iovec iov{header, sizeof(header)};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  do {
    n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC | MSG_WAITALL);
  } while (n < 0 && errno == EINTR);
  if (n != sizeof(header)) return absl::UnavailableError("object store closed the connection during Connect");
  int arena_fd = -1;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) std::memcpy(&arena_fd, CMSG_DATA(c), sizeof(int));
  }
  if (arena_fd < 0) return absl::InternalError("object store did not send its memory");
  uint32_t len = 0;
  for (int i = 0; i < 4; ++i) len |= static_cast<uint32_t>(header[i]) << (8 * i);
  std::string body;
  if (auto s = ReadBody(fd, len, &body); !s.ok()) {
    close(arena_fd);
    return s;
  }
  rpc::StoreReply reply;
  if (!reply.ParseFromString(body) || !reply.has_connect()) {
    close(arena_fd);
    return absl::InternalError("malformed Connect reply from the object store");
  }
  auto arena = Arena::Map(arena_fd, reply.connect().capacity_bytes());
  if (!arena.ok()) return arena.status();
  client->arena_ = std::move(*arena);
  return client;
}

ObjectStoreClient::~ObjectStoreClient() { close(fd_); }

absl::Status ObjectStoreClient::SendFrame(const std::string& body) {
  std::string frame(4, '\0');
  uint32_t n = static_cast<uint32_t>(body.size());
  for (int i = 0; i < 4; ++i) frame[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  frame += body;
  size_t off = 0;
  while (off < frame.size()) {
    ssize_t w = send(fd_, frame.data() + off, frame.size() - off, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return absl::UnavailableError("object store connection closed");
    off += static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

absl::Status ObjectStoreClient::ReadFrame(std::string* body) {
  uint8_t header[4];
  if (auto s = ReadExact(fd_, header, 4); !s.ok()) return s;
  uint32_t len = 0;
  for (int i = 0; i < 4; ++i) len |= static_cast<uint32_t>(header[i]) << (8 * i);
  return ReadBody(fd_, len, body);
}

struct ObjectStoreClient::Waiter {
  bool done = false;
  absl::StatusOr<rpc::StoreReply> reply;
};

absl::StatusOr<rpc::StoreReply> ObjectStoreClient::Call(rpc::StoreRequest& request, bool one_way) {
  if (!broken_.ok()) return broken_;
  uint64_t request_id = next_request_id_++;
  request.set_request_id(request_id);
  request.set_no_reply(one_way);
  Waiter waiter;
  if (!one_way) waiters_[request_id] = &waiter;
  if (auto s = SendFrame(request.SerializeAsString()); !s.ok()) {
    Break(s);
    return s;
  }
  if (one_way) return rpc::StoreReply();
  AwaitReply(&waiter);
  return std::move(waiter.reply);
}

void ObjectStoreClient::AwaitReply(Waiter* waiter) {
  while (!waiter->done) {
    if (reading_) {
      replies_.Wait(&mu_);
      continue;
    }
    reading_ = true;
    std::string body;
    mu_.Unlock();
    absl::Status read = ReadFrame(&body);
    mu_.Lock();
    reading_ = false;
    if (read.ok()) {
      Deliver(body);
    } else {
      Break(read);
    }
    // Wakes the caller whose reply this was, and lets another waiting caller read.
    replies_.SignalAll();
  }
}

void ObjectStoreClient::Deliver(const std::string& body) {
  rpc::StoreReply reply;
  if (!reply.ParseFromString(body)) return Break(absl::InternalError("malformed reply from the object store"));
  auto it = waiters_.find(reply.request_id());
  if (it != waiters_.end()) {
    it->second->done = true;
    it->second->reply.emplace(std::move(reply));
    waiters_.erase(it);
    return;
  }
  // The late error of an earlier one-way request.
  absl::Status s = StatusOf(reply);
  if (s.ok()) return;
  LOG(WARNING) << "object store rejected an earlier request: " << s;
  if (async_error_.ok()) async_error_ = s;
}

void ObjectStoreClient::Break(const absl::Status& status) {
  if (broken_.ok()) broken_ = status;
  for (auto& [id, waiter] : waiters_) {
    waiter->done = true;
    waiter->reply = broken_;
  }
  waiters_.clear();
}

absl::StatusOr<uint8_t*> ObjectStoreClient::Create(const ObjectID& id, int64_t data_size, int64_t metadata_size,
                                                   bool pin_on_seal, const std::string& owner_worker_id) {
  absl::ReleasableMutexLock lock(&mu_);
  rpc::StoreRequest request;
  auto* q = request.mutable_create();
  q->set_object_id(id.Binary());
  q->set_data_size(data_size);
  q->set_metadata_size(metadata_size);
  q->set_pin_on_seal(pin_on_seal);
  if (!owner_worker_id.empty()) q->set_owner_worker_id(owner_worker_id);
  auto reply = Call(request, false);
  if (!reply.ok()) return reply.status();
  if (auto s = StatusOf(*reply); !s.ok()) return s;
  // Checked although the store vouches for it: a bad range would have this process
  // write outside the arena.
  int64_t size = 0;
  const int64_t offset = reply->create().offset();
  if (!CheckedAdd(data_size, metadata_size, &size) || !RangeWithin(offset, size, arena_->capacity())) {
    return absl::InternalError("object store answered Create of " + id.Hex() + " with memory outside its arena");
  }
  if (size < kPopulateMinBytes) return arena_->base() + offset;
  auto runs = ChunksToPopulate(offset, size);
  lock.Release();  // filling page tables takes a while for a large object
  for (const auto& [first, end] : runs) {
    // Whole chunks: neighbours' pages get mapped too, which is harmless.
    arena_->PopulateRange(first * kPopulateChunkBytes, (end - first) * kPopulateChunkBytes, /*write=*/true);
  }
  return arena_->base() + offset;
}

std::vector<std::pair<int64_t, int64_t>> ObjectStoreClient::ChunksToPopulate(int64_t offset, int64_t size) {
  if (populated_chunks_.empty()) populated_chunks_.resize(arena_->capacity() / kPopulateChunkBytes + 1, false);
  const int64_t first = offset / kPopulateChunkBytes;
  const int64_t last = (offset + size - 1) / kPopulateChunkBytes;
  std::vector<std::pair<int64_t, int64_t>> runs;
  int64_t run_start = -1;
  for (int64_t c = first; c <= last + 1; ++c) {
    bool need = c <= last && !populated_chunks_[c];
    if (need && run_start < 0) run_start = c;
    if (!need && run_start >= 0) {
      runs.emplace_back(run_start, c);
      for (int64_t k = run_start; k < c; ++k) populated_chunks_[k] = true;
      run_start = -1;
    }
  }
  return runs;
}

absl::Status ObjectStoreClient::Seal(const ObjectID& id, bool release, bool wait) {
  absl::MutexLock lock(&mu_);
  rpc::StoreRequest request;
  request.mutable_seal()->set_object_id(id.Binary());
  request.mutable_seal()->set_release(release);
  auto reply = Call(request, !wait);
  if (!reply.ok()) return reply.status();
  return StatusOf(*reply);
}

absl::Status ObjectStoreClient::Abort(const ObjectID& id) {
  absl::MutexLock lock(&mu_);
  rpc::StoreRequest request;
  request.mutable_abort()->set_object_id(id.Binary());
  auto reply = Call(request, false);
  if (!reply.ok()) return reply.status();
  return StatusOf(*reply);
}

absl::StatusOr<std::vector<std::optional<ObjectBuffer>>> ObjectStoreClient::Get(const std::vector<ObjectID>& ids,
                                                                                int64_t timeout_ms) {
  absl::MutexLock lock(&mu_);
  std::vector<std::optional<ObjectBuffer>> out(ids.size());
  std::vector<ObjectID> remote;
  std::vector<size_t> remote_index;
  for (size_t i = 0; i < ids.size(); ++i) {
    auto it = in_use_.find(ids[i]);
    if (it != in_use_.end()) {
      ++it->second.count;
      out[i] = it->second.buffer;
    } else {
      remote.push_back(ids[i]);
      remote_index.push_back(i);
    }
  }
  if (remote.empty()) return out;
  rpc::StoreRequest request;
  auto* q = request.mutable_get();
  for (const auto& id : remote) q->add_object_ids(id.Binary());
  q->set_timeout_ms(timeout_ms);
  auto reply = Call(request, false);
  if (!reply.ok()) return reply.status();
  if (auto s = StatusOf(*reply); !s.ok()) return s;
  if (reply->get().objects_size() != static_cast<int>(remote.size())) {
    return absl::InternalError("object store answered Get with the wrong number of objects");
  }
  for (const auto& o : reply->get().objects()) {
    if (o.found() && !(RangeWithin(o.offset(), o.data_size(), arena_->capacity()) &&
                       RangeWithin(o.offset() + o.data_size(), o.metadata_size(), arena_->capacity()))) {
      return absl::InternalError("object store answered Get with memory outside its arena");
    }
  }
  for (size_t k = 0; k < remote.size(); ++k) {
    const auto& o = reply->get().objects(static_cast<int>(k));
    if (!o.found()) continue;
    // No populate here: Get stays constant-time whatever the size.
    const uint8_t* data = arena_->base() + o.offset();
    ObjectBuffer buffer{data, o.data_size(), data + o.data_size(), o.metadata_size()};
    InUse& e = in_use_[remote[k]];
    if (e.buffer.data != nullptr) {
      // Listed twice in one Get: the store gave one reference per listing, and this
      // client keeps one store reference per object.
      (void)SendRelease(remote[k], false);
    }
    e.buffer = buffer;
    ++e.count;
    out[remote_index[k]] = buffer;
  }
  return out;
}

absl::Status ObjectStoreClient::Release(const ObjectID& id, bool wait) {
  absl::MutexLock lock(&mu_);
  auto it = in_use_.find(id);
  if (it == in_use_.end()) {
    // Not from Get (e.g. the creator's reference after Seal without release): the
    // store knows whether this client holds one.
    return SendRelease(id, wait);
  }
  if (it->second.count == 0) {
    return absl::NotFoundError("Release of " + id.Hex() + ": this client holds no reference");
  }
  InUse& e = it->second;
  if (--e.count > 0) return absl::OkStatus();
  int64_t size = e.buffer.data_size + e.buffer.metadata_size;
  if (wait || e.queued || size > kReleaseDelayMaxObjectBytes) {
    if (e.queued) return absl::OkStatus();  // its store reference already lingers
    return ReleaseToStore(id, wait);
  }
  e.queued = true;
  release_queue_.push_back(id);
  lingering_bytes_ += size;
  while (release_queue_.size() > kReleaseDelay || lingering_bytes_ > arena_->capacity() / 16) {
    ObjectID oldest = release_queue_.front();
    release_queue_.pop_front();
    auto o = in_use_.find(oldest);
    if (o == in_use_.end() || !o->second.queued) continue;  // already released
    lingering_bytes_ -= o->second.buffer.data_size + o->second.buffer.metadata_size;
    o->second.queued = false;
    if (o->second.count == 0) {
      if (auto s = ReleaseToStore(oldest, false); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

absl::Status ObjectStoreClient::ReleaseToStore(const ObjectID& id, bool wait) {
  auto it = in_use_.find(id);
  if (it != in_use_.end() && it->second.queued) {
    // Leaves the queue early (Delete): its entry there is skipped when reached.
    lingering_bytes_ -= it->second.buffer.data_size + it->second.buffer.metadata_size;
  }
  in_use_.erase(id);
  return SendRelease(id, wait);
}

absl::Status ObjectStoreClient::SendRelease(const ObjectID& id, bool wait) {
  rpc::StoreRequest request;
  request.mutable_release()->set_object_id(id.Binary());
  auto reply = Call(request, !wait);
  if (!reply.ok()) return reply.status();
  return StatusOf(*reply);
}

absl::StatusOr<bool> ObjectStoreClient::Contains(const ObjectID& id) {
  absl::MutexLock lock(&mu_);
  rpc::StoreRequest request;
  request.mutable_contains()->set_object_id(id.Binary());
  auto reply = Call(request, false);
  if (!reply.ok()) return reply.status();
  if (auto s = StatusOf(*reply); !s.ok()) return s;
  return reply->contains().has_object();
}

absl::Status ObjectStoreClient::Delete(const std::vector<ObjectID>& ids, bool wait) {
  absl::MutexLock lock(&mu_);
  // Lingering references of released objects must not hold the deletion up.
  for (const auto& id : ids) {
    auto it = in_use_.find(id);
    if (it != in_use_.end() && it->second.count == 0) (void)ReleaseToStore(id, false);
  }
  rpc::StoreRequest request;
  for (const auto& id : ids) request.mutable_delete_()->add_object_ids(id.Binary());
  auto reply = Call(request, /*one_way=*/!wait);
  if (!reply.ok()) return reply.status();
  return StatusOf(*reply);
}

absl::Status ObjectStoreClient::TakeAsyncError() {
  absl::MutexLock lock(&mu_);
  absl::Status s = async_error_;
  async_error_ = absl::OkStatus();
  return s;
}

}  // namespace manta::object_store
