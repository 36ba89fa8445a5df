// ObjectManager, the object data channel side (object_data_channel.h): serving and
// pulling objects over plain TCP with one copy end to end. The channel's threads
// never touch the store themselves: they post to the loop and wait for its answer,
// bounded, and give up when the channel stops.
#include <glog/logging.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <limits>
#include <mutex>
#include <thread>

#include "src/common/util.h"
#include "src/raylet/object_data_channel.h"
#include "src/raylet/object_manager.h"

namespace manta::raylet {

using object_store::ClientId;
using object_store::ObjectLocation;

template <typename T>
std::optional<T> ObjectManager::WaitOnLoop(const char* name, std::function<void(std::function<void(T)>)> fn,
                                           int64_t timeout_ms) {
  auto promise = std::make_shared<std::promise<T>>();
  auto once = std::make_shared<std::once_flag>();
  std::future<T> future = promise->get_future();
  loop_.Post(name, [fn, promise, once] {
    fn([promise, once](T value) { std::call_once(*once, [&] { promise->set_value(std::move(value)); }); });
  });
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!*data_stopping_ && std::chrono::steady_clock::now() < deadline) {
    if (future.wait_for(std::chrono::milliseconds(100)) == std::future_status::ready) return future.get();
  }
  return std::nullopt;
}

absl::StatusOr<int> ObjectManager::StartDataChannel(const std::string& ip) {
  if (!options_.data_channel) return absl::FailedPreconditionError("the object data channel is off");
  std::shared_ptr<std::atomic<bool>> stopping = data_stopping_;
  // The server's threads ask the loop for the object and wait; the reference taken
  // is dropped (on the loop) once the bytes are out, or at once if nobody waits.
  ObjectDataServer::Source source = [this, stopping](const ObjectID& id) -> std::optional<ServedObject> {
    const ClientId client = std::numeric_limits<ClientId>::min() / 4 + next_data_serve_id_.fetch_add(1);
    auto abandoned = std::make_shared<std::atomic<bool>>(false);
    auto here = std::make_shared<std::atomic<bool>>(false);
    using Found = std::optional<ObjectLocation>;
    const int64_t wait_ms = pull_timeout_ms_.load();
    std::optional<Found> found = WaitOnLoop<Found>(
        "ObjectManager.ServeData",
        [this, id, client, abandoned, here, wait_ms](std::function<void(Found)> done) {
          // One being written is waited for: its seal is on its way.
          if (!store_.ContainsOrCreating(id)) return done(std::nullopt);
          *here = true;
          // A spilled object is restored first, in its turn: an answer within half
          // the client's patience, so that it hears "busy", not "gone".
          store_.Get(client, {id}, wait_ms / 2, [this, id, client, abandoned, here, done](std::vector<Found> result) {
            if (!result[0].has_value()) *here = store_.ContainsOrCreating(id);  // else aborted or deleted meanwhile
            if (*abandoned || !result[0].has_value()) store_.DisconnectClient(client);
            done(*abandoned ? std::nullopt : result[0]);
          });
        },
        wait_ms);
    if (!found.has_value() || !found->has_value()) {
      abandoned->store(true);
      if (!*here) return std::nullopt;
      ServedObject busy;
      busy.busy = true;
      return busy;
    }
    ServedObject served{(*found)->offset, (*found)->data_size, (*found)->metadata_size, nullptr};
    served.release = [this, client, stopping] {
      if (!*stopping) loop_.Post("ObjectManager.ServeDataDone", [this, client] { store_.DisconnectClient(client); });
    };
    return served;
  };
  ObjectDataLimits limits = options_.data_limits;
  limits.io_timeout_ms = pull_timeout_ms_.load();
  auto server = ObjectDataServer::Listen(ip, options_.token, options_.arena_fd, store_.base(), std::move(source), limits);
  if (!server.ok()) return server.status();
  data_server_ = std::move(*server);
  data_client_ = std::make_unique<ObjectDataClient>(options_.token, limits);
  transfer_threads_ = std::make_unique<TransferThreads>(options_.transfer_threads);
  return data_server_->port();
}

void ObjectManager::StopDataChannel() {
  data_stopping_->store(true);
  for (const auto& [id, stream] : streams_) stream.cancel();
  if (data_server_) data_server_->Stop();
  transfer_threads_.reset();
}

void ObjectManager::StartDataPull(const std::shared_ptr<PullState>& pull, const std::string& address,
                                  const std::string& data_address) {
  const ClientId client = next_client_id_--;
  const int64_t stream_id = next_stream_id_++;
  auto fetch = std::make_shared<ObjectDataClient::Fetch>();
  streams_[stream_id] = Stream{address, [fetch] { fetch->Cancel(); }};
  const ObjectID id = pull->id;
  transfer_threads_->Run([this, pull, address, data_address, stream_id, client, fetch, id] {
    int64_t total = 0;
    // The allocation is made on the loop once the sizes are known.
    ObjectDataClient::Allocate allocate = [&](int64_t data_size, int64_t metadata_size) -> absl::StatusOr<uint8_t*> {
      using Allocated = absl::StatusOr<ObjectLocation>;
      std::optional<Allocated> where = WaitOnLoop<Allocated>(
          "ObjectManager.DataPullCreate",
          [this, client, id, data_size, metadata_size](std::function<void(Allocated)> done) {
            store_.Create(client, id, data_size, metadata_size, /*pin_on_seal=*/false, std::move(done));
          },
          pull_timeout_ms_.load());
      if (!where.has_value()) return absl::UnavailableError("no allocation for the object in time");
      if (!where->ok()) return where->status();
      total = data_size + metadata_size;
      return store_.base() + (*where)->offset;
    };
    absl::Status status = data_client_->Run(data_address, id, pull_timeout_ms_.load(), allocate, fetch);
    if (*data_stopping_) return;
    loop_.Post("ObjectManager.DataPullDone",
               [this, pull, address, stream_id, client, total, status, refused = fetch->channel_refused()] {
                 OnDataPullDone(pull, address, stream_id, client, total, status, refused);
               });
  });
}

void ObjectManager::OnDataPullDone(const std::shared_ptr<PullState>& pull, const std::string& address,
                                   int64_t stream_id, ClientId client, int64_t total, const absl::Status& status,
                                   bool refused) {
  streams_.erase(stream_id);
  if (status.ok()) {
    absl::Status sealed = store_.Seal(client, pull->id, /*release=*/true);
    store_.DisconnectClient(client);
    bytes_pulled_ += total;
    pull->bytes = total;
    --active_streams_;
    FinishPull(pull, sealed);
    Admit();
    return;
  }
  store_.DisconnectClient(client);  // aborts a partial object
  if (status.code() == absl::StatusCode::kAlreadyExists || store_.Contains(pull->id)) {
    --active_streams_;
    FinishPull(pull, absl::OkStatus());
    Admit();
    return;
  }
  std::string why(status.message());
  if (dead_locations_.contains(address)) {
    why = "the node was declared dead";
  } else if (refused) {
    // Its host answers: the same node over gRPC, and its data channel left alone a while.
    data_refused_until_[address] = MonotonicMs() + kDataRefusedMs;
    LOG_EVERY_N(WARNING, 20) << "the object data channel of " << address << " refused this node (" << why
                             << "); pulling over gRPC";
    return StartGrpcPull(pull, address);
  }
  pull->last_error = absl::Status(status.code(), address + ": " + why);
  VLOG(1) << "data channel pull of " << pull->id.Hex() << " failed: " << pull->last_error;
  StartNextLocation(pull);
}

}  // namespace manta::raylet
