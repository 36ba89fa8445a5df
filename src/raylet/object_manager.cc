#include "src/raylet/object_manager.h"

#include <glog/logging.h>

#include <atomic>
#include <cstring>

#include "src/common/rpc/grpc_client.h"
#include "src/common/rpc/status_convert.h"

namespace manta::raylet {

using object_store::ClientId;
using object_store::ObjectLocation;

// One pull of one object, across its candidate locations. Loop thread only, except
// `dest`/`total`, which the active stream's reactor reads on gRPC's thread after the
// loop set them (ordered by StartRead).
struct ObjectManager::PullState {
  ObjectID id;
  std::vector<std::string> locations;
  size_t next_location = 0;
  std::vector<PullCallback> callbacks;
  absl::Status last_error = absl::NotFoundError("no locations given");
};

namespace {

// Client side of one stream from one location.
class PullReactor : public grpc::ClientReadReactor<rpc::ObjectChunk> {
 public:
  using Done = std::function<void(PullReactor*, grpc::Status)>;
  PullReactor(EventLoop& loop, object_store::ObjectStore& store, ObjectID id, ClientId client,
              int64_t chunk_bytes, int64_t timeout_ms, Done done)
      : loop_(loop), store_(store), id_(id), client_(client), done_(std::move(done)) {
    request_.set_object_id(id.Binary());
    request_.set_chunk_bytes(chunk_bytes);
    context_.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
  }

  void Start(rpc::ObjectManagerService::Stub* stub) {
    stub->async()->PullObject(&context_, &request_, this);
    StartRead(&chunk_);
    StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // OnDone follows
    if (dest_ == nullptr && total_ < 0) {
      // First chunk: allocate on the loop, then continue from there.
      loop_.Post("ObjectManager.PullCreate", [this] { CreateFromFirstChunk(); });
      return;
    }
    if (!CopyChunk()) return;
    StartRead(&chunk_);
  }

  void OnDone(const grpc::Status& status) override {
    grpc::Status s = status;
    if (s.ok() && !error_.empty()) s = grpc::Status(grpc::StatusCode::INTERNAL, error_);
    loop_.Post("ObjectManager.PullDone", [this, s] { done_(this, s); });
  }

  int64_t received() const { return received_; }
  int64_t total() const { return total_; }
  bool created() const { return dest_ != nullptr; }
  bool already_local() const { return already_local_; }
  ClientId client() const { return client_; }

 private:
  void CreateFromFirstChunk() {
    int64_t data_size = chunk_.data_size();
    int64_t metadata_size = chunk_.metadata_size();
    if (data_size < 0 || metadata_size < 0) {
      Fail("sender sent negative sizes");
      return;
    }
    store_.Create(client_, id_, data_size, metadata_size, /*pin_on_seal=*/false,
                  [this, data_size, metadata_size](absl::StatusOr<ObjectLocation> loc) {
                    if (!loc.ok()) {
                      if (loc.status().code() == absl::StatusCode::kAlreadyExists) already_local_ = true;
                      Fail(std::string(loc.status().message()));
                      return;
                    }
                    total_ = data_size + metadata_size;
                    dest_ = store_.base() + loc->offset;
                    if (!CopyChunk()) return;
                    StartRead(&chunk_);
                  });
  }

  bool CopyChunk() {
    const std::string& data = chunk_.data();
    int64_t offset = chunk_.offset();
    if (offset < 0 || offset + static_cast<int64_t>(data.size()) > total_) {
      Fail("sender sent a chunk outside the object");
      return false;
    }
    std::memcpy(dest_ + offset, data.data(), data.size());
    received_ += static_cast<int64_t>(data.size());
    return true;
  }

  void Fail(const std::string& why) {
    error_ = why;
    context_.TryCancel();
  }

  EventLoop& loop_;
  object_store::ObjectStore& store_;
  ObjectID id_;
  ClientId client_;
  Done done_;
  grpc::ClientContext context_;
  rpc::PullObjectRequest request_;
  rpc::ObjectChunk chunk_;
  uint8_t* dest_ = nullptr;
  int64_t total_ = -1;
  std::atomic<int64_t> received_{0};
  std::string error_;
  bool already_local_ = false;
};

// Server side: streams one local object.
class PushReactor : public grpc::ServerWriteReactor<rpc::ObjectChunk> {
 public:
  PushReactor(EventLoop& loop, object_store::ObjectStore& store, const rpc::PullObjectRequest& request,
              ClientId client, std::atomic<int64_t>& served)
      : loop_(loop), store_(store), client_(client), served_(served) {
    chunk_bytes_ = std::clamp<int64_t>(request.chunk_bytes(), 64 << 10, 64 << 20);
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
    if (!store_.Contains(id_)) {
      Finish(grpc::Status(grpc::StatusCode::NOT_FOUND, "object " + id_.Hex() + " is not on this node"));
      return;
    }
    // A spilled object is restored first; bound the wait.
    store_.Get(client_, {id_}, 30000, [this](std::vector<std::optional<ObjectLocation>> result) {
      if (!result[0].has_value()) {
        Finish(grpc::Status(grpc::StatusCode::NOT_FOUND, "object " + id_.Hex() + " could not be read here"));
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
    chunk_.Clear();
    if (sent_ == 0) {
      chunk_.set_data_size(data_size_);
      chunk_.set_metadata_size(metadata_size_);
    }
    chunk_.set_offset(sent_);
    chunk_.set_data(reinterpret_cast<const char*>(src_ + sent_), static_cast<size_t>(n));
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
  rpc::ObjectChunk chunk_;
};

}  // namespace

struct ObjectManager::Impl final : public rpc::ObjectManagerService::CallbackService {
  Impl(ObjectManager& om) : om(om) {}

  grpc::ServerWriteReactor<rpc::ObjectChunk>* PullObject(grpc::CallbackServerContext* context,
                                                        const rpc::PullObjectRequest* request) override {
    // Server client ids come from a separate (very negative) range than pulls'.
    ClientId client = std::numeric_limits<ClientId>::min() / 2 + next_serve_id.fetch_add(1);
    return new PushReactor(om.loop_, om.store_, *request, client, served);
  }

  rpc::ObjectManagerService::Stub* StubFor(const std::string& address) {
    auto it = stubs.find(address);
    if (it == stubs.end()) {
      it = stubs.emplace(address, rpc::ObjectManagerService::NewStub(
                                      rpc::MakeChannel(address, om.options_.max_message_bytes))).first;
    }
    return it->second.get();
  }

  ObjectManager& om;
  std::atomic<int64_t> next_serve_id{0};
  std::atomic<int64_t> served{0};
  absl::flat_hash_map<std::string, std::unique_ptr<rpc::ObjectManagerService::Stub>> stubs;
};

ObjectManager::ObjectManager(EventLoop& loop, object_store::ObjectStore& store, ObjectManagerOptions options)
    : loop_(loop), store_(store), options_(options), impl_(std::make_unique<Impl>(*this)) {}

ObjectManager::~ObjectManager() = default;

rpc::ObjectManagerService::CallbackService* ObjectManager::service() { return impl_.get(); }

int64_t ObjectManager::bytes_served_total() const { return impl_->served.load(); }

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

void ObjectManager::StartNextLocation(const std::shared_ptr<PullState>& pull) {
  if (pull->next_location >= pull->locations.size()) {
    --active_streams_;
    FinishPull(pull, absl::UnavailableError("object " + pull->id.Hex() + " could not be pulled from any of " +
                                            std::to_string(pull->locations.size()) +
                                            " locations; last error: " + std::string(pull->last_error.message())));
    Admit();
    return;
  }
  const std::string address = pull->locations[pull->next_location++];
  ClientId client = next_client_id_--;
  auto* reactor = new PullReactor(
      loop_, store_, pull->id, client, options_.chunk_bytes, options_.pull_timeout_ms,
      [this, pull, address](PullReactor* r, grpc::Status status) {
        std::unique_ptr<PullReactor> owned(r);
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
  reactor->Start(impl_->StubFor(address));
}

void ObjectManager::FinishPull(const std::shared_ptr<PullState>& pull, const absl::Status& status) {
  pulls_.erase(pull->id);
  for (auto& cb : pull->callbacks) cb(status);
}

}  // namespace manta::raylet
