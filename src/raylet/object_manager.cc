#include "src/raylet/object_manager.h"

#include <glog/logging.h>

#include <atomic>
#include <cstring>
#include <tuple>

#include <grpcpp/generic/generic_stub.h>

#include "src/common/rpc/auth.h"
#include "src/common/rpc/grpc_client.h"
#include "src/common/rpc/status_convert.h"
#include "src/common/util.h"
#include "src/raylet/object_data_channel.h"

namespace manta::raylet {

using object_store::ClientId;
using object_store::ObjectLocation;

namespace {

// Reads an ObjectChunk from the slices of a received message without copying its
// data: the data field is returned as (slice index, offset) ranges to copy from.
class ChunkParser {
 public:
  explicit ChunkParser(const std::vector<grpc::Slice>& slices) : slices_(slices) {}

  // Parses the fields; on success `data_ranges` lists where the data bytes are.
  bool Parse() {
    while (!AtEnd()) {
      uint64_t tag;
      if (!Varint(&tag)) return false;
      uint64_t field = tag >> 3, wire = tag & 7;
      if (wire == 0) {
        uint64_t v;
        if (!Varint(&v)) return false;
        if (field == 1) data_size = static_cast<int64_t>(v);
        if (field == 2) metadata_size = static_cast<int64_t>(v);
        if (field == 3) offset = static_cast<int64_t>(v);
      } else if (wire == 2) {
        uint64_t len;
        if (!Varint(&len)) return false;
        if (field == 4) {
          // A repeated field counts once, the last time, as protobuf reads it: the
          // ranges copied must be the ones data_length was checked for.
          ranges_.clear();
          data_length = static_cast<int64_t>(len);
          if (!Ranges(len)) return false;
        } else if (!Skip(len)) {
          return false;
        }
      } else if (wire == 1) {
        if (!Skip(8)) return false;
      } else if (wire == 5) {
        if (!Skip(4)) return false;
      } else {
        return false;
      }
    }
    return true;
  }

  // Copies the data bytes to `dest`.
  void CopyData(uint8_t* dest) const {
    for (const auto& [slice, begin, len] : ranges_) {
      std::memcpy(dest, slices_[slice].begin() + begin, len);
      dest += len;
    }
  }

  int64_t data_size = 0;
  int64_t metadata_size = 0;
  int64_t offset = 0;
  int64_t data_length = 0;

 private:
  bool AtEnd() {
    while (slice_ < slices_.size() && pos_ >= slices_[slice_].size()) {
      ++slice_;
      pos_ = 0;
    }
    return slice_ >= slices_.size();
  }
  bool Byte(uint8_t* b) {
    if (AtEnd()) return false;
    *b = slices_[slice_].begin()[pos_++];
    return true;
  }
  bool Varint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t b;
      if (!Byte(&b)) return false;
      *v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return true;
    }
    return false;
  }
  bool Ranges(uint64_t len) {
    while (len > 0) {
      if (AtEnd()) return false;
      size_t take = std::min<uint64_t>(len, slices_[slice_].size() - pos_);
      ranges_.emplace_back(slice_, pos_, take);
      pos_ += take;
      len -= take;
    }
    return true;
  }
  bool Skip(uint64_t len) {
    while (len > 0) {
      if (AtEnd()) return false;
      size_t take = std::min<uint64_t>(len, slices_[slice_].size() - pos_);
      pos_ += take;
      len -= take;
    }
    return true;
  }

  const std::vector<grpc::Slice>& slices_;
  size_t slice_ = 0;
  size_t pos_ = 0;
  std::vector<std::tuple<size_t, size_t, size_t>> ranges_;
};

constexpr char kPullMethod[] = "/manta.rpc.ObjectManagerService/PullObject";

// Client side of one stream from one location. Messages arrive as raw ByteBuffers
// whose slices are copied straight into the local allocation (one copy).
class PullReactor : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  using Done = std::function<void(PullReactor*, grpc::Status)>;
  PullReactor(EventLoop& loop, object_store::ObjectStore& store, ObjectID id, ClientId client,
              int64_t chunk_bytes, int64_t timeout_ms, Done done)
      : loop_(loop), store_(store), id_(id), client_(client), done_(std::move(done)) {
    rpc::PullObjectRequest request;
    request.set_object_id(id.Binary());
    request.set_chunk_bytes(chunk_bytes);
    grpc::Slice slice(request.SerializeAsString());
    request_ = grpc::ByteBuffer(&slice, 1);
    context_.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
  }

  void Start(grpc::GenericStub* stub) {
    rpc::AttachClusterToken(&context_);
    stub->PrepareBidiStreamingCall(&context_, kPullMethod, grpc::StubOptions(), this);
    StartWriteLast(&request_, grpc::WriteOptions());
    StartRead(&message_);
    // The read after the first chunk starts on the loop, outside any reaction: until
    // then this hold keeps the call (and OnDone) from finishing under it, however
    // early the stream ends. Released once the loop is done with the first chunk.
    AddHold();
    StartCall();
  }

  void OnWriteDone(bool) override {}

  void OnReadDone(bool ok) override {
    const bool first = dest_ == nullptr && total_ < 0;
    if (!ok) {
      if (first) RemoveHold();  // no first chunk: the loop has nothing to do
      return;                   // OnDone follows
    }
    if (first) {
      // First chunk: allocate on the loop, then continue from there.
      loop_.Post("ObjectManager.PullCreate", [this] { CreateFromFirstChunk(); });
      return;
    }
    if (!CopyChunk()) return;
    StartRead(&message_);
  }

  void OnDone(const grpc::Status& status) override {
    grpc::Status s = status;
    if (s.ok() && !error_.empty()) s = grpc::Status(error_code_, error_);
    if (!error_.empty() && status.error_code() == grpc::StatusCode::CANCELLED) s = grpc::Status(error_code_, error_);
    loop_.Post("ObjectManager.PullDone", [this, s] { done_(this, s); });
  }

  // Ends the stream (OnDone follows with CANCELLED). Any thread.
  void Cancel() { context_.TryCancel(); }

  int64_t received() const { return received_; }
  int64_t total() const { return total_; }
  bool created() const { return dest_ != nullptr; }
  bool already_local() const { return already_local_; }
  ClientId client() const { return client_; }

 private:
  // Ends with RemoveHold() on every path (the hold taken in Start).
  void CreateFromFirstChunk() {
    auto fail = [this](const std::string& why, grpc::StatusCode code = grpc::StatusCode::INTERNAL) {
      Fail(why, code);
      RemoveHold();
    };
    std::vector<grpc::Slice> slices;
    if (!message_.Dump(&slices).ok()) return fail("unreadable chunk");
    ChunkParser chunk(slices);
    if (!chunk.Parse()) return fail("malformed first chunk");
    int64_t data_size = chunk.data_size;
    int64_t metadata_size = chunk.metadata_size;
    int64_t total = 0;
    if (!CheckedAdd(data_size, metadata_size, &total)) return fail("sender sent sizes that do not add up");
    // The callback always runs: the hold keeps done_ (whose DisconnectClient would drop
    // a waiting Create) from running first.
    store_.Create(client_, id_, data_size, metadata_size, /*pin_on_seal=*/false,
                  [this, data_size, metadata_size, fail](absl::StatusOr<ObjectLocation> loc) {
                    if (!loc.ok()) {
                      if (loc.status().code() == absl::StatusCode::kAlreadyExists) already_local_ = true;
                      // No room here (the store is full of what is in use) is not the
                      // sender's fault: the pull ends with it.
                      return fail(std::string(loc.status().message()),
                                  loc.status().code() == absl::StatusCode::kResourceExhausted
                                      ? grpc::StatusCode::RESOURCE_EXHAUSTED
                                      : grpc::StatusCode::INTERNAL);
                    }
                    total_ = data_size + metadata_size;
                    dest_ = store_.base() + loc->offset;
                    if (CopyChunk()) StartRead(&message_);
                    RemoveHold();
                  });
  }

  bool CopyChunk() {
    std::vector<grpc::Slice> slices;
    if (!message_.Dump(&slices).ok()) {
      Fail("unreadable chunk");
      return false;
    }
    ChunkParser chunk(slices);
    // In order and within the object (object_manager.proto), so every byte is written
    // once and received_ == total_ means that all of them were.
    if (!chunk.Parse() || chunk.offset != received_ || !RangeWithin(chunk.offset, chunk.data_length, total_)) {
      Fail("sender sent a chunk out of order or outside the object");
      return false;
    }
    chunk.CopyData(dest_ + chunk.offset);
    received_ += chunk.data_length;
    return true;
  }

  void Fail(const std::string& why, grpc::StatusCode code = grpc::StatusCode::INTERNAL) {
    error_ = why;
    error_code_ = code;
    context_.TryCancel();
  }

  EventLoop& loop_;
  object_store::ObjectStore& store_;
  ObjectID id_;
  ClientId client_;
  Done done_;
  grpc::ClientContext context_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer message_;
  uint8_t* dest_ = nullptr;
  int64_t total_ = -1;
  std::atomic<int64_t> received_{0};
  std::string error_;
  grpc::StatusCode error_code_ = grpc::StatusCode::INTERNAL;
  bool already_local_ = false;
};

// Appends `value` as a protobuf varint.
void PutVarint(std::string* out, uint64_t value) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

// Server side: streams one local object. Each chunk is an ObjectChunk on the wire,
// encoded by hand so that its data field is a slice pointing into the arena: the
// bytes go from shared memory to the socket with no user-space copy. The store
// reference taken by Get keeps that memory valid until the stream is done.
class PushReactor : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  // `admitted` is the call's authentication: when it failed, the stream ends with it.
  // Chunks are at most `max_chunk_bytes` (half the RPC message limit), whatever the
  // puller asks for.
  PushReactor(EventLoop& loop, object_store::ObjectStore& store, const rpc::PullObjectRequest& request,
              ClientId client, std::atomic<int64_t>& served, const absl::Status& admitted, int64_t max_chunk_bytes)
      : loop_(loop), store_(store), client_(client), served_(served) {
    if (!admitted.ok()) {
      Finish(rpc::ToGrpcStatus(admitted));
      return;
    }
    chunk_bytes_ = std::clamp<int64_t>(request.chunk_bytes(), 64 << 10, std::max<int64_t>(64 << 10, max_chunk_bytes));
    auto id = ObjectID::FromBinaryChecked(request.object_id());
    if (!id.ok()) {
      Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "PullObject: malformed object id"));
      return;
    }
    id_ = *id;
    loop_.Post("ObjectManager.ServePull", [this] { Begin(); });
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "puller went away"));
      return;
    }
    if (sent_ < total_) {
      WriteNext();
    } else {
      Finish(grpc::Status::OK);
    }
  }

  void OnDone() override {
    loop_.Post("ObjectManager.ServeDone", [this] {
      store_.DisconnectClient(client_);  // drops the reference taken by Get
      delete this;
    });
  }

 private:
  void Begin() {
    if (!store_.ContainsOrCreating(id_)) {  // one being written is waited for: its seal is on its way
      Finish(grpc::Status(grpc::StatusCode::NOT_FOUND, "object " + id_.Hex() + " is not on this node"));
      return;
    }
    // A spilled object is restored first; bound the wait.
    store_.Get(client_, {id_}, 30000, [this](std::vector<std::optional<ObjectLocation>> result) {
      if (!result[0].has_value()) {
        // Here, spilled with no room to restore it in time, or still being written:
        // busy, not gone.
        Finish(store_.ContainsOrCreating(id_)
                   ? grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                  "object " + id_.Hex() + " is here but not readable yet (spilled with no room to "
                                  "restore it, or still being written)")
                   : grpc::Status(grpc::StatusCode::NOT_FOUND, "object " + id_.Hex() + " could not be read here"));
        return;
      }
      src_ = store_.base() + result[0]->offset;
      data_size_ = result[0]->data_size;
      metadata_size_ = result[0]->metadata_size;
      total_ = data_size_ + metadata_size_;
      WriteNext();
    });
  }

  void WriteNext() {
    int64_t n = std::min(chunk_bytes_, total_ - sent_);
    std::string header;
    header.push_back(0x08);  // field 1: data_size
    PutVarint(&header, static_cast<uint64_t>(data_size_));
    header.push_back(0x10);  // field 2: metadata_size
    PutVarint(&header, static_cast<uint64_t>(metadata_size_));
    header.push_back(0x18);  // field 3: offset
    PutVarint(&header, static_cast<uint64_t>(sent_));
    header.push_back(0x22);  // field 4: data, length-delimited
    PutVarint(&header, static_cast<uint64_t>(n));
    grpc::Slice slices[2] = {grpc::Slice(header),
                             grpc::Slice(src_ + sent_, static_cast<size_t>(n), grpc::Slice::STATIC_SLICE)};
    chunk_ = grpc::ByteBuffer(slices, n > 0 ? 2 : 1);
    sent_ += n;
    served_ += n;
    StartWrite(&chunk_);
  }

  EventLoop& loop_;
  object_store::ObjectStore& store_;
  ClientId client_;
  std::atomic<int64_t>& served_;
  ObjectID id_;
  int64_t chunk_bytes_ = 4 << 20;
  const uint8_t* src_ = nullptr;
  int64_t data_size_ = 0;
  int64_t metadata_size_ = 0;
  int64_t total_ = 0;
  int64_t sent_ = 0;
  grpc::ByteBuffer chunk_;
};

}  // namespace

struct ObjectManager::Impl final
    : public rpc::ObjectManagerService::WithRawCallbackMethod_PullObject<rpc::ObjectManagerService::Service> {
  Impl(ObjectManager& om) : om(om) {}

  grpc::ServerWriteReactor<grpc::ByteBuffer>* PullObject(grpc::CallbackServerContext* context,
                                                         const grpc::ByteBuffer* raw_request) override {
    // Server client ids come from a separate (very negative) range than pulls'.
    ClientId client = std::numeric_limits<ClientId>::min() / 2 + next_serve_id.fetch_add(1);
    absl::Status admitted = rpc::AuthenticateCall(*context, "ObjectManager.PullObject");
    rpc::PullObjectRequest request;
    std::vector<grpc::Slice> slices;
    std::string bytes;
    if (raw_request->Dump(&slices).ok()) {
      for (const auto& sl : slices) bytes.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
    }
    if (!admitted.ok() || !request.ParseFromString(bytes)) request.Clear();  // an empty id is rejected below
    return new PushReactor(om.loop_, om.store_, request, client, served, admitted, om.options_.max_message_bytes / 2);
  }

  grpc::GenericStub* StubFor(const std::string& address) {
    auto it = stubs.find(address);
    if (it == stubs.end()) {
      it = stubs.emplace(address, std::make_unique<grpc::GenericStub>(
                                      rpc::MakeChannel(address, om.options_.max_message_bytes))).first;
    }
    return it->second.get();
  }

  ObjectManager& om;
  std::atomic<int64_t> next_serve_id{0};
  std::atomic<int64_t> served{0};
  absl::flat_hash_map<std::string, std::unique_ptr<grpc::GenericStub>> stubs;
};

ObjectManager::ObjectManager(EventLoop& loop, object_store::ObjectStore& store, ObjectManagerOptions options)
    : loop_(loop), store_(store), options_(options), pull_timeout_ms_(options.pull_timeout_ms),
      impl_(std::make_unique<Impl>(*this)) {}

ObjectManager::~ObjectManager() { StopDataChannel(); }

grpc::Service* ObjectManager::service() { return impl_.get(); }

int64_t ObjectManager::bytes_served_total() const {
  return impl_->served.load() + (data_server_ ? data_server_->bytes_served() : 0);
}

void ObjectManager::Pull(const ObjectID& id, std::vector<std::string> locations, PullCallback callback) {
  if (store_.Contains(id)) {
    callback(absl::OkStatus());
    return;
  }
  auto it = pulls_.find(id);
  if (it != pulls_.end()) {
    // Merge with the pull in progress; remember any new locations.
    for (auto& l : locations) {
      if (std::find(it->second->locations.begin(), it->second->locations.end(), l) == it->second->locations.end()) {
        it->second->locations.push_back(l);
      }
    }
    it->second->callbacks.push_back(std::move(callback));
    return;
  }
  auto pull = std::make_shared<PullState>();
  pull->id = id;
  pull->locations = std::move(locations);
  pull->callbacks.push_back(std::move(callback));
  pulls_[id] = pull;
  waiting_.push_back(pull);
  Admit();
}

void ObjectManager::Admit() {
  int64_t max_streams = std::max<int64_t>(1, options_.max_bytes_in_flight / std::max<int64_t>(1, options_.chunk_bytes));
  while (!waiting_.empty() && active_streams_ < max_streams) {
    auto pull = waiting_.front();
    waiting_.pop_front();
    ++active_streams_;
    StartNextLocation(pull);
  }
}

namespace {
// Why a pull that ends unfinished failed. No room in this node's store for the copy
// (another location would not help) stays RESOURCE_EXHAUSTED: the reader waits for
// room and asks again, as the object is not lost.
absl::Status PullFailure(const ObjectManager::PullState& pull) {
  if (pull.last_error.code() == absl::StatusCode::kResourceExhausted) {
    return absl::ResourceExhaustedError("object " + pull.id.Hex() + " could not be pulled here: " +
                                        std::string(pull.last_error.message()));
  }
  return absl::UnavailableError("object " + pull.id.Hex() + " could not be pulled from any of " +
                                std::to_string(pull.locations.size()) +
                                " locations; last error: " + std::string(pull.last_error.message()));
}
}  // namespace

void ObjectManager::StartNextLocation(const std::shared_ptr<PullState>& pull) {
  if (pull->last_error.code() == absl::StatusCode::kResourceExhausted ||
      pull->next_location >= pull->locations.size()) {
    --active_streams_;
    FinishPull(pull, PullFailure(*pull));
    Admit();
    return;
  }
  const std::string address = pull->locations[pull->next_location++];
  if (pull->start_us == 0) pull->start_us = NodeEventNowUs();
  if (dead_locations_.contains(address)) {
    pull->last_error = absl::UnavailableError(address + ": the node was declared dead");
    return StartNextLocation(pull);
  }
  if (auto data = data_addresses_.find(address); data != data_addresses_.end() && data_client_ != nullptr) {
    auto refused = data_refused_until_.find(address);
    if (refused == data_refused_until_.end() || refused->second <= MonotonicMs()) {
      return StartDataPull(pull, address, data->second);
    }
  }
  StartGrpcPull(pull, address);
}

void ObjectManager::StartGrpcPull(const std::shared_ptr<PullState>& pull, const std::string& address) {
  ClientId client = next_client_id_--;
  const int64_t stream_id = next_stream_id_++;
  auto* reactor = new PullReactor(
      loop_, store_, pull->id, client, std::min(options_.chunk_bytes, options_.max_message_bytes / 2),
      pull_timeout_ms_.load(),
      [this, pull, address, stream_id](PullReactor* r, grpc::Status status) {
        std::unique_ptr<PullReactor> owned(r);
        streams_.erase(stream_id);
        if (dead_locations_.contains(address) && status.error_code() == grpc::StatusCode::CANCELLED) {
          status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "the node was declared dead");
        }
        bool complete = status.ok() && r->created() && r->received() == r->total();
        if (complete) {
          absl::Status s = store_.Seal(r->client(), pull->id, /*release=*/true);
          store_.DisconnectClient(r->client());
          bytes_pulled_ += r->total();
          --active_streams_;
          FinishPull(pull, s);
          Admit();
          return;
        }
        store_.DisconnectClient(r->client());  // aborts a partial object
        if (r->already_local() || store_.Contains(pull->id)) {
          --active_streams_;
          FinishPull(pull, absl::OkStatus());
          Admit();
          return;
        }
        pull->last_error = rpc::FromGrpcStatus(status.ok() ? grpc::Status(grpc::StatusCode::DATA_LOSS, "stream ended early")
                                                           : status);
        pull->last_error = absl::Status(pull->last_error.code(), address + ": " + std::string(pull->last_error.message()));
        VLOG(1) << "pull of " << pull->id.Hex() << " failed: " << pull->last_error;
        StartNextLocation(pull);
      });
  streams_[stream_id] = Stream{address, [reactor] { reactor->Cancel(); }};
  reactor->Start(impl_->StubFor(address));
}

void ObjectManager::OnNodeDead(const std::string& address) {
  if (!dead_locations_.insert(address).second) return;
  int64_t cancelled = 0;
  for (const auto& [id, stream] : streams_) {
    if (stream.address != address) continue;
    stream.cancel();
    ++cancelled;
  }
  if (cancelled > 0) LOG(INFO) << "cancelled " << cancelled << " pull(s) from " << address << ": its node died";
}

void ObjectManager::OnNodeAlive(const std::string& address, int data_port) {
  dead_locations_.erase(address);
  const size_t colon = address.rfind(':');
  if (data_port > 0 && colon != std::string::npos && address.substr(colon + 1) != std::to_string(data_port)) {
    data_addresses_[address] = address.substr(0, colon) + ":" + std::to_string(data_port);
  } else {
    data_addresses_.erase(address);
  }
}

void ObjectManager::FinishPull(const std::shared_ptr<PullState>& pull, const absl::Status& status) {
  pulls_.erase(pull->id);
  if (options_.events != nullptr && pull->start_us > 0) {
    rpc::NodeEvent event;
    event.set_kind("pull");
    event.set_start_unix_us(pull->start_us);
    event.set_end_unix_us(NodeEventNowUs());
    event.set_bytes(pull->bytes);
    event.set_num_objects(1);
    event.set_object_id(pull->id.Binary());
    if (pull->next_location > 0) event.set_peer(pull->locations[pull->next_location - 1]);
    event.set_ok(status.ok());
    options_.events->Record(std::move(event));
  }
  for (auto& cb : pull->callbacks) cb(status);
}

}  // namespace manta::raylet
